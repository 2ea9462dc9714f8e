//! One name per field in every output (issue 19): each output of the inventory in
//! docs/fields.md is produced from the committed captures and its names are checked against
//! the table, so the table cannot drift from what trawl writes, and a rename shows up here.
//! <https://github.com/trawl/trawl/issues/19>
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use super::{testdata, trawl};

/// The inventory: output id → its names in the documented order.
fn inventory() -> BTreeMap<String, Vec<String>> {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/fields.md"),
    )
    .unwrap();
    let section = doc
        .split("## Inventory")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an Inventory section");
    let mut table = BTreeMap::new();
    let mut previous: Vec<String> = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let id = cells[0].trim_start_matches("| ").replace('`', "");
        // The names before any parenthesis (which says what is only sometimes there).
        let names_cell = cells[2].split(" (").next().unwrap();
        let names: Vec<String> = names_cell
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect();
        // "the same names, same order" repeats the row above.
        let names = if names.is_empty() {
            previous.clone()
        } else {
            names
        };
        previous = names.clone();
        table.insert(id, names);
    }
    table
}

fn stdout(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The keys of a JSON object, sorted (serde_json's objects sort theirs; the flow record's
/// order is checked through its CSV header, which the spec gives the same order).
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
    k.sort();
    k
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn first_json(text: &str) -> Value {
    serde_json::from_str(text.lines().next().expect("a line")).unwrap()
}

fn csv_header(text: &str) -> Vec<String> {
    text.lines()
        .next()
        .unwrap()
        .split(',')
        .map(String::from)
        .collect()
}

/// A table's header: columns separated by runs of spaces.
fn table_header(text: &str) -> Vec<String> {
    text.lines()
        .next()
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Every output of the inventory, produced: id → (names, whether their order counts).
fn produced(dir: &Path) -> BTreeMap<String, (Vec<String>, bool)> {
    let android = testdata("pcaps/android.pcap");
    let sip = testdata("oracle/sip.pcap");
    let d = |p: &str| dir.join(p).to_str().unwrap().to_string();
    let mut got = BTreeMap::new();
    let mut put = |id: &str, names: Vec<String>, ordered: bool| {
        got.insert(id.to_string(), (names, ordered));
    };

    let flows = trawl(&["flows", "-r", &android, "--summary", "json"]);
    let summary: Value = serde_json::from_str(
        String::from_utf8_lossy(&flows.stderr)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    put("flows.summary", keys(&summary), false);
    put("flows.json", keys(&first_json(&stdout(flows))), false);
    let csv = stdout(trawl(&[
        "flows",
        "-r",
        &android,
        "--format",
        "csv",
        "--summary",
        "none",
    ]));
    put("flows.csv", csv_header(&csv), true);
    let series = stdout(trawl(&["series", "-r", &android, "--summary", "none"]));
    std::fs::write(d("series.jsonl"), &series).unwrap();
    put("series.json", keys(&first_json(&series)), false);
    let csv = stdout(trawl(&[
        "series",
        "-r",
        &android,
        "--format",
        "csv",
        "--summary",
        "none",
    ]));
    put("series.csv", csv_header(&csv), true);

    stdout(trawl(&["ingest", "-r", &sip, "--db", &d("db"), "-i", "x"]));
    let all = "src_ip,dst_ip,src_port,dst_port,proto,iface,vlan,time";
    let query = |format: &str| stdout(trawl(&["query", "-d", &d("db"), all, "--format", format]));
    let json: Value = serde_json::from_str(&query("json")).unwrap();
    put("query.json rows", keys(&json["rows"][0]), false);
    put("query.json totals", keys(&json["totals"]), false);
    put("query.csv", csv_header(&query("csv")), true);
    put("query.table", table_header(&query("table")), true);
    let sub = |kind: &str, source: &[&str]| {
        let mut args = vec!["subscribe", kind, "--format", "table", "--count", "1"];
        args.extend_from_slice(source);
        stdout(trawl(&args))
    };
    put(
        "subscribe.flows.table",
        table_header(&sub("flows", &["--db", &d("db")])),
        true,
    );
    put(
        "subscribe.series.table",
        table_header(&sub("series", &["--file", &d("series.jsonl")])),
        true,
    );

    let (flood, _) = crate::detect::flood_capture(dir);
    let events = stdout(trawl(&[
        "detect",
        "synflood",
        "-r",
        flood.to_str().unwrap(),
    ]));
    let events: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    put("synflood.start", keys(&events[0]), false);
    put("synflood.end", keys(&events[1]), false);
    let heavy = stdout(trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &android,
        "--top",
        "2",
    ]));
    let report = first_json(&heavy);
    put("heavy_hitters", keys(&report), false);
    put(
        "heavy_hitters.flow",
        keys(&report["flows_by_bytes"]["items"][0]["item"]),
        false,
    );

    // Stored alarms: the change detector's, from a capture with a rate step.
    let (step, _) = crate::stored::step_capture(dir);
    let step = step.to_str().unwrap();
    stdout(trawl(&[
        "ingest",
        "-r",
        step,
        "--db",
        &d("steps"),
        "--summary",
        "none",
        // The change detector's alone (its fields are checked below).
        "--no-synflood",
        "--no-heavy-hitters",
    ]));
    let alarms = |format: &str| stdout(trawl(&["alarms", "-d", &d("steps"), "--format", format]));
    let stored: Vec<Value> = alarms("json")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    put("alarms.json", keys(&stored[0]), false);
    put("alarms.csv", csv_header(&alarms("csv")), true);
    put("alarms.table", table_header(&alarms("table")), true);
    let end = stored
        .iter()
        .find(|a| a["event"]["event"] == "end")
        .unwrap();
    put("series_change.start", keys(&stored[0]["event"]), false);
    put("series_change.end", keys(&end["event"]), false);

    stdout(trawl(&["voip", "-r", &sip, "-o", &d("voip")]));
    let jsonl = |f: &str| first_json(&std::fs::read_to_string(d(f)).unwrap());
    put("voip.calls", keys(&jsonl("voip/calls.jsonl")), false);
    put("voip.rtp", keys(&jsonl("voip/rtp.jsonl")), false);

    let dns = testdata("app/dns/tcpdump--dns_udp.pcap");
    stdout(trawl(&["logs", "-r", &dns, "-o", &d("logs")]));
    put("logs.dns", keys(&jsonl("logs/dns.jsonl")), false);
    got
}

#[test]
fn every_output_names_its_fields_as_the_table_says() {
    let dir = tempfile::tempdir().unwrap();
    let table = inventory();
    let got = produced(dir.path());
    assert_eq!(
        table.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "every output of the table is checked, and only those"
    );
    for (id, (names, ordered)) in &got {
        let want = &table[id];
        if *ordered {
            assert_eq!(names, want, "{id}");
        } else {
            assert_eq!(names, &sorted(want.clone()), "{id}");
        }
    }
}

#[test]
fn records_of_every_producer_have_the_flow_record_names() {
    // trawl flows, collect (from an IPFIX file) and subscribe (from a flow database) write
    // records through one writer: the same names as the table's flow record.
    let dir = tempfile::tempdir().unwrap();
    let want = sorted(inventory()["flows.json"].clone());
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    stdout(trawl(&[
        "ingest",
        "-r",
        &testdata("oracle/sip.pcap"),
        "--db",
        db,
        "-i",
        "x",
    ]));
    for args in [
        vec![
            "collect",
            "-r",
            &testdata("ipfix/many-protocols-damaged.ipfix"),
        ],
        vec!["subscribe", "flows", "--db", db, "--count", "1"],
    ] {
        let out = trawl(&args);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(keys(&first_json(&text)), want, "{args:?}");
    }
    // A heavy-hitter flow names its protocol as records do.
    let heavy = stdout(trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &testdata("pcaps/android.pcap"),
        "--top",
        "1",
    ]));
    let proto = &first_json(&heavy)["flows_by_bytes"]["items"][0]["item"]["proto"];
    assert!(proto == "tcp" || proto == "udp", "{proto}");
}
