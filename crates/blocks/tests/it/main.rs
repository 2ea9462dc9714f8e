//! trawl's blocks in real compositions over the committed captures, checked against the same
//! work done by the library without the runtime, and against libpcap.
mod docs;
mod offline;

use std::path::{Path, PathBuf};

use trawl_compose::Report;

/// A committed capture.
pub fn capture(name: &str) -> PathBuf {
    trawl_testkit::testdata(&format!("pcaps/{name}"))
}

/// Plans and runs a composition to the end.
pub fn run(text: &str) -> Report {
    let plan = trawl_compose::plan(
        text,
        "test composition",
        &trawl_blocks::registry(),
        &trawl_capture::live::allowed_cpus(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    trawl_compose::start(plan)
        .expect("starts")
        .wait()
        .unwrap_or_else(|(e, r)| panic!("{e}\n{}", r.table()))
}

/// A path inside `dir` as a TOML string.
pub fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}
