//! The CLI's module graph has no circle (issue 19): flags and their value parsers are leaves
//! the commands import, never the other way round. A module is a file of `crates/cli/src`;
//! module A uses B when A's text names a path into B (`crate::b::...`, `super::...`, or a
//! child module declared in A); declaring a module (`mod b;`) is not a use.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of the crate, by path (`["args"]`, `["plan", "live"]`; the root is `[]`),
/// with its file's text.
fn modules(src: &Path) -> BTreeMap<Vec<String>, String> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, String>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                walk(&p, &[prefix, &[name]].concat(), out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let path = match name.as_str() {
                    "main" | "lib" if prefix.is_empty() => Vec::new(),
                    "mod" => prefix.to_vec(),
                    _ => [prefix, &[name]].concat(),
                };
                out.insert(path, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// The paths `text` names, each as the identifiers after its anchor, resolved to absolute
/// module paths (`crate::a::b::C` → `[a, b, C]`; `super::x` in `plan::live` → `[plan, x]`;
/// `child::x` for a `mod child;` of this module). `use crate::{a, b::c}` groups are expanded
/// one level.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let children: BTreeSet<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|n| n.trim().to_string())
        })
        .collect();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // Code only: a path in a comment is no use.
    let text: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let text = text.as_str();
    // An inline module (`mod tests { use super::*; }`, at the end of a file by house style)
    // belongs to its file's module: there `super` is the file's module itself.
    let inline_from = text
        .match_indices("mod ")
        .find(|(at, _)| {
            let line = text[*at..].lines().next().unwrap_or("");
            line.trim_end().ends_with('{')
                && (*at == 0 || text[..*at].ends_with(|c: char| c.is_whitespace()))
        })
        .map(|(at, _)| at);
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        // A path starts at an identifier not preceded by another path segment.
        let starts = (i == 0 || {
            let p = bytes[i - 1] as char;
            !ident(p) && p != ':'
        }) && ident(bytes[i] as char);
        if !starts {
            i += 1;
            continue;
        }
        let at = i;
        let rest = &text[i..];
        let end = rest
            .find(|c: char| !(ident(c) || c == ':'))
            .unwrap_or(rest.len());
        let path_text = &rest[..end];
        i += end.max(1);
        let segments: Vec<&str> = path_text.split("::").collect();
        if segments.len() < 2 {
            continue;
        }
        let (mut path, tail) = match segments[0] {
            "crate" => (Vec::new(), &segments[1..]),
            "super" if inline_from.is_some_and(|o| at > o) => (module.to_vec(), &segments[1..]),
            "super" => (
                module[..module.len().saturating_sub(1)].to_vec(),
                &segments[1..],
            ),
            "self" => (module.to_vec(), &segments[1..]),
            first if children.contains(first) => {
                ([module, &[first.to_string()]].concat(), &segments[1..])
            }
            _ => continue,
        };
        let mut tail = tail;
        // `super::super::x`
        while tail.first() == Some(&"super") {
            path.pop();
            tail = &tail[1..];
        }
        path.extend(tail.iter().filter(|s| !s.is_empty()).map(|s| s.to_string()));
        if path_text.ends_with("::") && rest[end..].starts_with('{') {
            // `use crate::{a::B, c}`: the group's first-level names.
            let close = rest[end..].find('}').unwrap_or(rest.len() - end);
            for item in rest[end + 1..end + close].split(',') {
                let item: Vec<String> = item
                    .trim()
                    .split("::")
                    .take_while(|s| !s.is_empty() && s.chars().all(ident))
                    .map(str::to_string)
                    .collect();
                if !item.is_empty() {
                    out.push([&path[..], &item[..]].concat());
                }
            }
            continue;
        }
        out.push(path);
    }
    out
}

/// The module a path lands in: its longest prefix that is a module of the crate.
fn owner<'a>(path: &[String], all: &'a BTreeMap<Vec<String>, String>) -> Option<&'a Vec<String>> {
    (0..=path.len())
        .rev()
        .find_map(|n| all.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// Edges `from -> to` between distinct modules.
fn uses(all: &BTreeMap<Vec<String>, String>) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, text) in all {
        let set = edges.entry(module.clone()).or_default();
        for path in named_paths(module, text) {
            if let Some(to) = owner(&path, all) {
                if to != module {
                    set.insert(to.clone());
                }
            }
        }
    }
    edges
}

/// One circle of the graph, if it has one.
fn circle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut c = stack[at..].to_vec();
            c.push(node.clone());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "main".into()
    } else {
        m.join("::")
    }
}

#[test]
fn the_cli_module_graph_has_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = modules(&src);
    assert!(
        all.len() > 10,
        "{} modules found under {}",
        all.len(),
        src.display()
    );
    let edges = uses(&all);
    // The walk sees real uses: main dispatches to the commands, and a command's `super::`
    // reaches its parent.
    let main_uses = &edges[&Vec::new()];
    assert!(
        main_uses.contains(&vec!["dump".to_string()]),
        "{main_uses:?}"
    );
    assert!(edges[&vec!["plan".to_string(), "consumers".to_string()]]
        .contains(&vec!["plan".to_string()]));
    if let Some(c) = circle(&edges) {
        let text: Vec<String> = c.iter().map(|m| name(m)).collect();
        panic!(
            "the CLI's modules use each other in a circle: {}",
            text.join(" -> ")
        );
    }
}

#[test]
fn a_circle_is_found() {
    // The checker itself: two modules naming each other, through `crate::` and `super::`.
    let mut all = BTreeMap::new();
    all.insert(
        Vec::new(),
        "mod a;\nmod b;\nfn main() { a::go() }".to_string(),
    );
    all.insert(
        vec!["a".to_string()],
        "use crate::{b::Thing, b::OTHER};\npub fn go() {}".into(),
    );
    all.insert(vec!["b".to_string()], "mod c;\npub struct Thing;".into());
    all.insert(
        vec!["b".to_string(), "c".to_string()],
        "fn f() { super::super::a::go() }".into(),
    );
    let edges = uses(&all);
    assert_eq!(
        circle(&edges),
        None,
        "b::c -> a -> b is no circle: {edges:?}"
    );
    all.insert(
        vec!["b".to_string()],
        "mod c;\npub struct Thing;\nfn g() { c::f() }".into(),
    );
    let c = circle(&uses(&all)).expect("a -> b -> b::c -> a");
    assert_eq!(c.first(), c.last());
}
