//! The web console (docs/specs/api.md, "The console"): one HTML page, one script, one style
//! sheet and the vendored chart library (uPlot, `console/uplot/README.md`), embedded in the
//! binary so that an air-gapped probe serves them: no CDN, no build step.
//!
//! The files are the same for everyone and hold no data, so they are served without the token
//! (a browser cannot send a bearer header when it opens a page); the page asks for the token
//! and sends it with every API request, which stay behind the token as before. The answers
//! forbid other origins' frames and scripts (`Content-Security-Policy`).
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// A file of the console.
pub(crate) struct Asset {
    pub path: &'static str,
    content_type: &'static str,
    pub body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The page, at `/` and under `/console/`.
const INDEX: Asset = Asset {
    path: "/console/index.html",
    content_type: HTML,
    body: include_bytes!("../console/index.html"),
};

/// The page's other files, by the path the page names them with.
pub(crate) const ASSETS: &[Asset] = &[
    Asset {
        path: "/console/console.js",
        content_type: JS,
        body: include_bytes!("../console/console.js"),
    },
    Asset {
        path: "/console/console.css",
        content_type: CSS,
        body: include_bytes!("../console/console.css"),
    },
    Asset {
        path: "/console/uPlot.iife.min.js",
        content_type: JS,
        body: include_bytes!("../console/uplot/uPlot.iife.min.js"),
    },
    Asset {
        path: "/console/uPlot.min.css",
        content_type: CSS,
        body: include_bytes!("../console/uplot/uPlot.min.css"),
    },
    Asset {
        path: "/console/uPlot.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../console/uplot/LICENSE"),
    },
];

/// Only this origin's scripts, styles and requests; no frames, forms or plugins.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' \
                   data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; \
                   base-uri 'none'";

fn serve(a: &'static Asset) -> Response {
    (
        [
            (header::CONTENT_TYPE, a.content_type),
            // Small files that change with the binary: revalidated, never stale.
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        a.body,
    )
        .into_response()
}

/// The console's routes, merged outside the token check (see the module doc).
pub(crate) fn router() -> Router {
    let mut r = Router::new();
    for path in ["/", "/console", "/console/", INDEX.path] {
        r = r.route(path, get(|| async { serve(&INDEX) }));
    }
    for a in ASSETS {
        r = r.route(a.path, get(move || async move { serve(a) }));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(body: &[u8]) -> &str {
        std::str::from_utf8(body).expect("UTF-8")
    }

    /// `attr="..."` values in `html`.
    fn values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
        let pat = format!("{attr}=\"");
        html.match_indices(&pat)
            .map(|(at, _)| {
                let rest = &html[at + pat.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect()
    }

    #[test]
    fn the_page_names_only_files_that_are_served() {
        let html = text(INDEX.body);
        let named: Vec<&str> = values(html, "src")
            .into_iter()
            .chain(values(html, "href").into_iter().filter(|h| *h != "#"))
            .collect();
        assert_eq!(named.len(), 4, "{named:?}");
        for n in named {
            assert!(ASSETS.iter().any(|a| a.path == n), "{n} is not served");
        }
    }

    #[test]
    fn every_element_the_script_looks_up_is_in_the_page() {
        let html = text(INDEX.body);
        let ids = values(html, "id");
        let js = text(ASSETS[0].body);
        let looked_up: Vec<&str> = js
            .match_indices("$(\"")
            .map(|(at, _)| {
                let rest = &js[at + 3..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect();
        assert!(looked_up.len() > 20);
        for id in looked_up {
            assert!(
                ids.contains(&id),
                "console.js looks up #{id}, not in index.html"
            );
        }
    }

    #[test]
    fn the_served_chart_library_is_the_version_its_readme_records() {
        let readme = include_str!("../console/uplot/README.md");
        let js = text(ASSETS[2].body);
        let version = js
            .lines()
            .next()
            .and_then(|l| l.split("(v").nth(1))
            .and_then(|v| v.split(')').next())
            .expect("a version in uPlot's first line");
        assert!(
            readme.contains(&format!("`uplot` {version} ")),
            "uPlot {version} is served, console/uplot/README.md records another"
        );
        assert!(text(ASSETS[4].body).contains("MIT License"));
    }
}
