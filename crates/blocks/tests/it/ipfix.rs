//! `ipfix_source`: IPFIX files written by `flow_export` read back record for record, the same
//! messages received over real UDP and TCP sockets, records stored under their origin, and a
//! damaged file's errors named with the file offset.
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::time::Duration;

use trawl_flow::FlowRecord;

use crate::{collected, p, run, start, wait_for};

/// Meters a committed capture, exports its records to an IPFIX file in `dir`; the records.
fn exported(dir: &Path, name: &str) -> (PathBuf, Vec<FlowRecord<'static>>) {
    exported_to(dir, name, "flows", None)
}

/// [`exported`] into `stem.ipfix`, also to `destination` (`ipfix+udp://...`).
fn exported_to(
    dir: &Path,
    name: &str,
    stem: &str,
    destination: Option<&str>,
) -> (PathBuf, Vec<FlowRecord<'static>>) {
    let file = dir.join(format!("{stem}.ipfix"));
    let more = destination.map_or(String::new(), |d| format!(", \"{d}\""));
    let text = format!(
        r#"
        [[block]]
        name = "file"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "meter"
        type = "flow_meter"
        [[block]]
        name = "export"
        type = "flow_export"
        destinations = ["ipfix:{}"{more}]
        lossless = true
        [[block]]
        name = "{name}"
        type = "collect"
        [[connection]]
        from = "file.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = ["export.flows", "{name}.in"]
        "#,
        trawl_testkit::testdata("oracle/many-protocols.pcap.gz").display(),
        file.display()
    );
    run(&text);
    let records = collected(name).flows;
    assert!(records.len() > 200, "{} records", records.len());
    // Round-trip times travel too (extended templates, docs/specs/ipfix.md).
    assert!(records.iter().any(|r| r.fwd.rtt_samples > 0));
    (file, records)
}

fn source_into(name: &str, settings: &str) -> String {
    format!(
        r#"
        [[block]]
        name = "src"
        type = "ipfix_source"
        {settings}
        [[block]]
        name = "{name}"
        type = "collect"
        [[connection]]
        from = "src.flows"
        to = "{name}.in"
        "#
    )
}

fn sorted(mut v: Vec<FlowRecord<'static>>) -> Vec<String> {
    let mut s: Vec<String> = v.drain(..).map(|r| format!("{r:?}")).collect();
    s.sort();
    s
}

#[test]
fn ipfix_source_reads_back_the_records_flow_export_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (file, want) = exported(dir.path(), "ipfix-file-sent");
    let report = run(&source_into(
        "ipfix-file-got",
        &format!("files = [\"{}\"]", file.display()),
    ));
    let got = collected("ipfix-file-got").flows;
    assert_eq!(got.len(), want.len());
    assert_eq!(sorted(got), sorted(want));
    let src = report.block("src").unwrap();
    assert_eq!(src.counter("records"), Some(src.counter("flows").unwrap()));
    assert_eq!(src.counter("input_failed"), Some(0));
    assert_eq!(src.errors, 0);
}

#[test]
fn ipfix_source_takes_its_records_from_the_runtime_budget() {
    // Issue 19: the source has no `count` of its own; it takes each record from the run's
    // budget (`[runtime] count`), as the packet sources do, so the total is exact.
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = exported(dir.path(), "ipfix-count-sent");
    let files = format!("files = [\"{}\", \"{}\"]", file.display(), file.display());
    let report = run(&format!(
        "{}\n[runtime]\ncount = 7\n",
        source_into("ipfix-count-got", &files)
    ));
    assert_eq!(collected("ipfix-count-got").flows.len(), 7);
    assert_eq!(report.block("src").unwrap().counter("records"), Some(7));
    // Its own setting is gone: refused, not silently ignored.
    let text = source_into("ipfix-count-old", &format!("{files}\ncount = 7"));
    let registry = trawl_blocks::registry();
    let e = trawl_compose::plan(&text, "test", &registry, &[])
        .err()
        .expect("refused");
    assert!(e.to_string().contains("count"), "{e}");
}

#[test]
fn ipfix_source_receives_the_same_records_over_udp_and_tcp() {
    // flow_export sends the records of a capture to a listening ipfix_source (another
    // composition, real sockets on loopback): every record arrives as it was metered.
    let dir = tempfile::tempdir().unwrap();
    for scheme in ["udp", "tcp"] {
        let port = free_port(scheme);
        let name = format!("ipfix-net-got-{scheme}");
        let running = start(&source_into(
            &name,
            &format!("listen = [\"{scheme}://127.0.0.1:{port}\"]"),
        ));
        let (_, want) = exported_to(
            dir.path(),
            &format!("ipfix-net-sent-{scheme}"),
            scheme,
            Some(&format!("ipfix+{scheme}://127.0.0.1:{port}")),
        );
        assert!(
            wait_for(Duration::from_secs(20), || collected(&name).flows.len()
                >= want.len()),
            "{scheme}: {} of {} records",
            collected(&name).flows.len(),
            want.len()
        );
        running.stop();
        let report = running.wait().unwrap_or_else(|(e, _)| panic!("{e}"));
        assert_eq!(
            sorted(collected(&name).flows),
            sorted(want.clone()),
            "{scheme}"
        );
        let src = report.block("src").unwrap();
        assert!(src.counter("messages_ipfix").unwrap() > 0);
        if scheme == "udp" {
            assert!(
                src.counter("udp_datagrams").unwrap() >= src.counter("messages_ipfix").unwrap()
            );
        }
        assert_eq!(src.errors, 0, "{:?}", src.error_messages);
    }
}

fn free_port(scheme: &str) -> u16 {
    match scheme {
        "udp" => UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(),
        _ => std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(),
    }
}

#[test]
fn collected_records_are_stored_under_their_origin() {
    // Over UDP from 127.0.0.1 (observation domain 1): `exp-127.0.0.1-1`; from a file: the
    // file's name without its extension, or the `iface` setting.
    let dir = tempfile::tempdir().unwrap();
    let (file, want) = exported(dir.path(), "ipfix-store-sent");
    let store = |db: &str| {
        format!(
            r#"
            [[block]]
            name = "store"
            type = "flow_store"
            dir = "{}"
            [[connection]]
            from = "src.flows"
            to = "store.flows"
            "#,
            p(dir.path(), db)
        )
    };
    let ifaces = |db: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.path().join(db))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let text = |settings: String, db: &str| {
        format!(
            "[[block]]\nname = \"src\"\ntype = \"ipfix_source\"\n{settings}\n{}",
            store(db)
        )
    };
    let report = run(&text(format!("files = [\"{}\"]", file.display()), "a"));
    assert_eq!(ifaces("a"), ["iface=flows"]);
    let stored = report.block("store").unwrap();
    assert_eq!(stored.counter("records"), Some(want.len() as u64));
    assert_eq!(stored.errors, 0, "collected records are not warned about");
    run(&text(
        format!("files = [\"{}\"]\niface = \"router7\"", file.display()),
        "b",
    ));
    assert_eq!(ifaces("b"), ["iface=router7"]);

    let port = free_port("udp");
    let running = start(&text(format!("listen = [\"udp://127.0.0.1:{port}\"]"), "c"));
    exported_to(
        dir.path(),
        "ipfix-store-sent-udp",
        "udp",
        Some(&format!("ipfix+udp://127.0.0.1:{port}")),
    );
    assert!(wait_for(Duration::from_secs(10), || running
        .report()
        .block("src")
        .and_then(|b| b.counter("records"))
        == Some(want.len() as u64)));
    running.stop();
    let report = running.wait().unwrap_or_else(|(e, _)| panic!("{e}"));
    assert_eq!(
        report.block("store").unwrap().counter("records"),
        Some(want.len() as u64)
    );
    assert_eq!(ifaces("c"), ["iface=exp-127.0.0.1-1"]);
}

#[test]
fn a_damaged_file_is_named_with_its_offsets_and_read_past() {
    // Two set ids overwritten, at file offsets 41149 and 96707 (testdata/ipfix/README.md).
    let file = trawl_testkit::testdata("ipfix/many-protocols-damaged.ipfix");
    let mut text = source_into(
        "ipfix-damaged",
        &format!("files = [\"{}\"]", file.display()),
    );
    text = text.replace(
        "type = \"ipfix_source\"",
        "type = \"ipfix_source\"\nlog_errors = false",
    );
    let report = run(&text);
    assert_eq!(collected("ipfix-damaged").flows.len(), 256);
    let src = report.block("src").unwrap();
    assert_eq!(src.counter("error_bad_set_id"), Some(2));
    assert_eq!(src.errors, 2);
    let f = file.display();
    assert_eq!(
        src.error_messages,
        [
            format!("{f}: offset 41149: bad_set_id (set id 1), in the message at offset 0"),
            format!("{f}: offset 96707: bad_set_id (set id 1), in the message at offset 65521"),
        ]
    );
}

#[test]
fn ipfix_source_settings_are_checked() {
    let registry = crate::registry();
    let plan = |settings: &str| {
        trawl_compose::plan(
            &source_into("ipfix-checked", settings),
            "test",
            &registry,
            &crate::cpus(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert!(plan("")
        .unwrap_err()
        .contains("give `listen` addresses or `files`"));
    assert!(plan("listen = [\"udp://127.0.0.1:1\"]\nfiles = [\"a\"]")
        .unwrap_err()
        .contains("exclude each other"));
    assert!(plan("listen = [\"http://x:1\"]")
        .unwrap_err()
        .contains("expected udp://HOST:PORT, sflow://HOST:PORT or tcp://HOST:PORT"));
    assert!(plan("files = [\"a\"]\nmax_templates = 0")
        .unwrap_err()
        .contains("max_templates"));
    assert!(plan("files = [\"a\"]\niface = \"a/b\"")
        .unwrap_err()
        .contains("not a valid interface name"));
}
