//! Stored series and alarms: rollups equal their seconds, survive restarts and late parts,
//! and retention removes old days of both.
use std::path::Path;

use trawl_series::SeriesRow;
use trawl_store::alarms::{self, Alarm, AlarmWriter};
use trawl_store::retention::{self, Retention};
use trawl_store::series::{self, SeriesIngest, Step};

/// 2025-11-22 00:00:00 UTC, in seconds.
const T0: u64 = 1_763_769_600;
const NS: u64 = 1_000_000_000;

/// A deterministic varied row of second `s`.
fn row(s: u64) -> SeriesRow {
    let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    SeriesRow {
        second: s,
        packets: h % 1000,
        bytes: h % 1000 * 700 + h % 13,
        active_flows: h % 97,
        new_flows: h % 11,
        in_packets: h % 500,
        in_bytes: h % 500 * 600,
        out_packets: h % 7,
        out_bytes: h % 7 * 90,
    }
}

fn write(db: &Path, iface: &str, seconds: std::ops::Range<u64>) {
    let mut w = SeriesIngest::open(db, iface).unwrap();
    for s in seconds {
        w.push(&row(s));
        w.advance(s).unwrap();
    }
    w.finish().unwrap();
}

/// The rollup of `rows` to `period`, computed here by the rule of the spec: counters add up,
/// `active_flows` is the largest of the period's seconds.
fn expected(rows: &[SeriesRow], period: u64) -> Vec<SeriesRow> {
    let mut out: Vec<SeriesRow> = Vec::new();
    for r in rows {
        let start = r.second - r.second % period;
        if out.last().is_none_or(|l| l.second != start) {
            out.push(SeriesRow {
                second: start,
                ..SeriesRow::default()
            });
        }
        let l = out.last_mut().unwrap();
        l.packets += r.packets;
        l.bytes += r.bytes;
        l.active_flows = l.active_flows.max(r.active_flows);
        l.new_flows += r.new_flows;
        l.in_packets += r.in_packets;
        l.in_bytes += r.in_bytes;
        l.out_packets += r.out_packets;
        l.out_bytes += r.out_bytes;
    }
    out
}

fn read(db: &Path, iface: Option<&str>, from: u64, to: u64, step: Step) -> Vec<SeriesRow> {
    series::read(db, iface, from * NS, to * NS, step).unwrap()
}

#[test]
fn rollups_equal_the_sums_of_their_seconds() {
    let db = tempfile::tempdir().unwrap();
    // Two and a half hours starting mid-hour, across midnight.
    let (from, to) = (T0 + DAY - 5400 + 17, T0 + DAY + 3600 + 1234);
    write(db.path(), "eth0", from..to);
    let secs = read(db.path(), Some("eth0"), T0, T0 + 3 * DAY, Step::Second);
    let written: Vec<SeriesRow> = (from..to).map(row).collect();
    assert_eq!(secs, written);
    for step in [Step::Minute, Step::Hour] {
        let got = read(db.path(), Some("eth0"), T0, T0 + 3 * DAY, step);
        assert_eq!(got, expected(&written, step.seconds()), "{step:?}");
        // Rollup files were written, and what they hold equals what the seconds give.
        let files = db
            .path()
            .join(format!("series/iface=eth0/step={}", step.name()));
        assert!(files.is_dir(), "{step:?} rollups written");
    }
    // Without the rollup files the reader derives the same rows from the seconds.
    let with = read(db.path(), Some("eth0"), T0, T0 + 3 * DAY, Step::Hour);
    std::fs::remove_dir_all(db.path().join("series/iface=eth0/step=1m")).unwrap();
    std::fs::remove_dir_all(db.path().join("series/iface=eth0/step=1h")).unwrap();
    assert_eq!(
        read(db.path(), Some("eth0"), T0, T0 + 3 * DAY, Step::Hour),
        with
    );
    // A sub-range: rows whose start lies in it.
    let mins = read(db.path(), None, from + 600, from + 900, Step::Minute);
    assert_eq!(mins.len(), 5);
    assert!(mins
        .iter()
        .all(|r| (from + 600..from + 900).contains(&r.second)));
}

const DAY: u64 = 86_400;

#[test]
fn a_later_writer_of_the_same_hour_updates_its_rollups() {
    let db = tempfile::tempdir().unwrap();
    let h = T0 + 10 * 3600;
    // A first run stops mid-hour (its rollups cover up to then); a second continues the
    // hour, and a third adds a part to seconds the first one wrote (a capture ingested twice).
    write(db.path(), "eth0", h..h + 1000);
    write(db.path(), "eth0", h + 1000..h + 5000);
    write(db.path(), "eth0", h + 100..h + 200);
    let mut all: Vec<SeriesRow> = (h..h + 5000).map(row).collect();
    for r in all
        .iter_mut()
        .filter(|r| (h + 100..h + 200).contains(&r.second))
    {
        let again = row(r.second);
        series::add(r, &again);
    }
    assert_eq!(read(db.path(), Some("eth0"), h, h + DAY, Step::Second), all);
    for step in [Step::Minute, Step::Hour] {
        assert_eq!(
            read(db.path(), Some("eth0"), h, h + DAY, step),
            expected(&all, step.seconds()),
            "{step:?}"
        );
    }
}

#[test]
fn without_an_interface_the_interfaces_add_up() {
    let db = tempfile::tempdir().unwrap();
    let h = T0 + 3600;
    write(db.path(), "eth0", h..h + 120);
    write(db.path(), "eth1", h + 60..h + 180);
    assert_eq!(
        series::list_ifaces(db.path()).unwrap(),
        vec!["eth0", "eth1"]
    );
    let both = read(db.path(), None, h, h + 180, Step::Minute);
    let m = |iface| read(db.path(), Some(iface), h, h + 180, Step::Minute);
    let (a, b) = (m("eth0"), m("eth1"));
    assert_eq!(both.len(), 3);
    let mut mid = a[1];
    series::add(&mut mid, &b[0]);
    assert_eq!(both, vec![a[0], mid, b[1]]);
}

fn alarm(ts_ns: u64) -> Alarm {
    Alarm {
        detector: "synflood".into(),
        iface: Some("eth0".into()),
        ts_ns,
        start_ns: ts_ns - 3 * NS,
        end_ns: None,
        rate: Some(1500.0),
        event: serde_json::json!({"event": "start", "victim": "10.0.0.1"}),
    }
}

#[test]
fn alarms_read_back_by_time_and_a_torn_last_line_is_skipped() {
    let db = tempfile::tempdir().unwrap();
    let a: Vec<Alarm> = [T0 + 10, T0 + DAY - 1, T0 + DAY + 5]
        .iter()
        .map(|s| alarm(s * NS))
        .collect();
    let mut w = AlarmWriter::new(db.path());
    w.append(&a).unwrap();
    assert_eq!(
        alarms::read(db.path(), T0 * NS, (T0 + 2 * DAY) * NS).unwrap(),
        a
    );
    assert_eq!(
        alarms::read(db.path(), (T0 + 11) * NS, (T0 + DAY + 5) * NS).unwrap(),
        a[1..2]
    );
    let day1 = alarms::day_file(db.path(), (T0 + DAY) * NS);
    let mut text = std::fs::read(&day1).unwrap();
    text.extend_from_slice(b"{\"detector\":\"syn");
    std::fs::write(&day1, &text).unwrap();
    assert_eq!(
        alarms::read(db.path(), T0 * NS, (T0 + 2 * DAY) * NS).unwrap(),
        a
    );
    // A damaged line that is not the last is an error naming the file and line.
    text.extend_from_slice(b"\n");
    std::fs::write(&day1, &text).unwrap();
    let e = alarms::read(db.path(), T0 * NS, (T0 + 2 * DAY) * NS).unwrap_err();
    assert!(e.to_string().contains("alarms.jsonl: line 2"), "{e}");
}

#[test]
fn retention_removes_old_series_and_alarms() {
    let db = tempfile::tempdir().unwrap();
    for d in 0..3 {
        write(db.path(), "eth0", T0 + d * DAY..T0 + d * DAY + 700);
        AlarmWriter::new(db.path())
            .append(&[alarm((T0 + d * DAY + 50) * NS)])
            .unwrap();
    }
    let all = |db: &Path| read(db, Some("eth0"), T0, T0 + 3 * DAY, Step::Second).len();
    assert_eq!(all(db.path()), 2100);
    // Keep the day of `now` and the one before.
    let now = (T0 + 2 * DAY + 3600) * NS;
    let rules = Retention {
        max_age_days: Some(1),
        max_bytes: None,
    };
    let out = retention::enforce(db.path(), &rules, now).unwrap();
    assert!(out.blocks_deleted >= 4, "{out:?}");
    assert_eq!(all(db.path()), 1400);
    let left = alarms::read(db.path(), 0, u64::MAX).unwrap();
    assert_eq!(left.len(), 2);
    assert!(!db
        .path()
        .join("series/iface=eth0/step=1s/date=2025-11-22")
        .exists());
    assert!(!db.path().join("alarms/date=2025-11-22").exists());
    // A budget of exactly the last day's files takes the whole day before, series and
    // alarms alike, and nothing of the last day.
    let last_day = bytes_under(db.path(), "date=2025-11-24");
    let rules = Retention {
        max_age_days: None,
        max_bytes: Some(last_day),
    };
    retention::enforce(db.path(), &rules, now).unwrap();
    assert_eq!(all(db.path()), 700);
    assert_eq!(alarms::read(db.path(), 0, u64::MAX).unwrap().len(), 1);
    assert_eq!(bytes_under(db.path(), ""), last_day);
}

/// Bytes of the files below `db` whose path contains `part`.
fn bytes_under(db: &Path, part: &str) -> u64 {
    let mut total = 0;
    let mut dirs = vec![db.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().contains(part) {
                total += e.metadata().unwrap().len();
            }
        }
    }
    total
}
