//! `--export kafka://...`: the topic holds exactly what `trawl flows` prints, as JSON; as
//! Protobuf, `protoc --decode` reads each message with the published `.proto` alone. Against a
//! real broker (`scripts/services.sh`), read back with `kcat`.
#[cfg(feature = "kafka")]
mod with_brokers {
    use std::io::Write;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use trawl_testkit::kafka::{coverage, Cluster};

    use crate::{summary, testdata, trawl};

    fn flows_lines(capture: &str) -> Vec<String> {
        let out = trawl(&["flows", "-r", capture, "--summary", "none"]);
        assert!(out.status.success());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The protocol number of a JSON record (which names it).
    fn proto_number(rec: &serde_json::Value) -> u8 {
        match rec["proto"].as_str() {
            Some("tcp") => 6,
            Some("udp") => 17,
            other => panic!("protocol {other:?} not in this test's table"),
        }
    }

    /// `protoc --decode=trawl.FlowRecord` of one message, as text.
    fn protoc_decode(message: &[u8]) -> String {
        let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/specs");
        let mut child = Command::new("protoc")
            .arg(format!("--proto_path={}", specs.display()))
            .args(["--decode=trawl.FlowRecord", "trawl.proto"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run protoc (apt install protobuf-compiler)");
        child.stdin.take().unwrap().write_all(message).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "protoc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn kafka_topic_holds_what_flows_and_collect_print_as_json_and_protobuf() {
        let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
        let b = &cluster.bootstrap;

        // JSON: the topic's messages are the lines `trawl flows` prints, one each.
        let capture = testdata("oracle/many-protocols.pcap.gz");
        let want = flows_lines(&capture);
        let out = trawl(&[
            "flows",
            "-r",
            &capture,
            "--export",
            &format!("kafka://{b}/cli-json"),
            "--summary",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let e = &summary(&out)["exporters"][0];
        assert_eq!(e["records"].as_u64(), Some(want.len() as u64), "{e}");
        assert_eq!(e["messages"].as_u64(), Some(want.len() as u64), "{e}");
        let got = cluster.consume_lines("cli-json", want.len(), Duration::from_secs(30));
        let c = coverage(&want, &got);
        assert!(c.missing.is_empty(), "missing: {:?}", c.missing.first());
        assert!(
            c.unexpected.is_empty(),
            "unexpected: {:?}",
            c.unexpected.first()
        );
        assert_eq!(c.duplicates, 0);

        // `trawl collect --export`: the records of an IPFIX file, as `trawl collect` prints
        // them.
        let tmp = tempfile::tempdir().unwrap();
        let ipfix = tmp.path().join("x.ipfix");
        let out = trawl(&[
            "flows",
            "-r",
            &capture,
            "--export",
            &format!("ipfix:{}", ipfix.display()),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ipfix = ipfix.display().to_string();
        let out = trawl(&["collect", "-r", &ipfix, "--summary", "none"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let out = trawl(&[
            "collect",
            "-r",
            &ipfix,
            "--no-output",
            "--export",
            &format!("kafka://{b}/cli-collect"),
            "--summary",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let e = &summary(&out)["exporters"][0];
        assert_eq!(e["messages"].as_u64(), Some(want.len() as u64), "{e}");
        let got = cluster.consume_lines("cli-collect", want.len(), Duration::from_secs(30));
        let c = coverage(&want, &got);
        assert!(c.missing.is_empty(), "missing: {:?}", c.missing.first());
        assert!(
            c.unexpected.is_empty(),
            "unexpected: {:?}",
            c.unexpected.first()
        );

        // Protobuf keyed by flow: each message decodes with the .proto alone, and names the
        // flow of a record `trawl flows` printed.
        let capture = testdata("oracle/tls13.pcap");
        let want = flows_lines(&capture);
        let out = trawl(&[
            "flows",
            "-r",
            &capture,
            "--export",
            &format!("kafka://{b}/cli-pb?format=protobuf&key=flow&probe=probe-7"),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (i, line) in want.iter().enumerate() {
            let rec: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = protoc_decode(&cluster.consume_one("cli-pb", i as u64));
            for field in ["src_ip", "dst_ip", "src_mac", "end_reason"] {
                let v = rec[field].as_str().unwrap();
                assert!(
                    text.contains(&format!("{field}: \"{v}\"")),
                    "{field} {v}: {text}"
                );
            }
            for field in [
                "src_port",
                "dst_port",
                "first_ns",
                "fwd_packets",
                "fwd_bytes",
            ] {
                let v = rec[field].as_u64().unwrap();
                assert!(
                    v == 0 || text.contains(&format!("{field}: {v}\n")),
                    "{field} {v}: {text}"
                );
            }
            let proto = proto_number(&rec);
            assert!(text.contains(&format!("proto: {proto}\n")), "{text}");
            assert!(text.contains("probe: \"probe-7\""), "{text}");
        }
        // The key is the flow key.
        let keys = Command::new("kcat")
            .args([
                "-C",
                "-b",
                b,
                "-t",
                "cli-pb",
                "-o",
                "beginning",
                "-e",
                "-q",
                "-f",
                "%k\n",
            ])
            .output()
            .unwrap();
        let rec: serde_json::Value = serde_json::from_str(&want[0]).unwrap();
        let first_key = format!(
            "{}|{}|{}|{}|{}",
            rec["src_ip"].as_str().unwrap(),
            rec["src_port"],
            rec["dst_ip"].as_str().unwrap(),
            rec["dst_port"],
            proto_number(&rec)
        );
        assert_eq!(
            String::from_utf8_lossy(&keys.stdout).lines().next(),
            Some(first_key.as_str())
        );
    }

    /// `protoc --decode=trawl.MESSAGE` of one message, as text.
    fn protoc_decode_as(message_type: &str, message: &[u8]) -> String {
        let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/specs");
        let mut child = Command::new("protoc")
            .arg(format!("--proto_path={}", specs.display()))
            .arg(format!("--decode=trawl.{message_type}"))
            .arg("trawl.proto")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run protoc (apt install protobuf-compiler)");
        child.stdin.take().unwrap().write_all(message).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "protoc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn kafka_series_and_alarms_go_to_their_own_topics_as_json_and_protobuf() {
        let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
        let b = &cluster.bootstrap;
        let dir = tempfile::tempdir().unwrap();
        // A rate step the series change detector raises alarms on (stored.rs).
        let (capture, step) = crate::stored::step_capture(dir.path());
        let capture = capture.to_str().unwrap();
        let out = trawl(&["series", "-r", capture, "--summary", "none"]);
        assert!(out.status.success());
        let want_rows: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let out = trawl(&[
            "flows",
            "-r",
            capture,
            "--export",
            &format!("kafka://{b}/step?series=step-series&alarms=step-alarms&probe=p9"),
            "--summary",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let e = &summary(&out)["exporters"][0];
        assert_eq!(
            e["series_rows"].as_u64(),
            Some(want_rows.len() as u64),
            "{e}"
        );

        // The rows: exactly `trawl series`'s lines, each once.
        let got = cluster.consume_lines("step-series", want_rows.len(), Duration::from_secs(30));
        let c = coverage(&want_rows, &got);
        assert!(c.missing.is_empty(), "missing: {:?}", c.missing.first());
        assert!(
            c.unexpected.is_empty(),
            "unexpected: {:?}",
            c.unexpected.first()
        );
        assert_eq!(c.duplicates, 0);

        // The alarms: the change detector's, as JSON objects (docs/specs/kafka.md).
        let alarms: Vec<serde_json::Value> = cluster
            .consume_lines("step-alarms", 2, Duration::from_secs(30))
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(e["alarms"].as_u64(), Some(alarms.len() as u64), "{e}");
        let start = alarms
            .iter()
            .find(|a| a["event"] == "start" && a["metric"] == "packets" && a["term"] == "short")
            .unwrap_or_else(|| panic!("no short-term packets alarm: {alarms:?}"));
        assert_eq!(start["detector"], "series_change");
        assert_eq!(
            start["detected_ns"].as_u64().unwrap() - step,
            6_000_000_000,
            "{start}"
        );
        assert!(
            alarms
                .iter()
                .any(|a| a["event"] == "end" && a["metric"] == "packets"),
            "{alarms:?}"
        );
        // The records still go to their topic.
        assert!(e["messages"].as_u64().unwrap() > (want_rows.len() + alarms.len()) as u64);

        // Protobuf: each decodes with the published .proto alone.
        let out = trawl(&[
            "flows",
            "-r",
            capture,
            "--export",
            &format!(
                "kafka://{b}/step-pb?format=protobuf&series=step-pb-series&alarms=step-pb-alarms&probe=p9"
            ),
        ]);
        assert!(out.status.success());
        let first: serde_json::Value = serde_json::from_str(&want_rows[0]).unwrap();
        let text = protoc_decode_as("SeriesRow", &cluster.consume_one("step-pb-series", 0));
        for field in ["second", "packets", "bytes", "new_flows"] {
            let v = first[field].as_u64().unwrap();
            assert!(
                text.contains(&format!("{field}: {v}\n")),
                "{field} {v}: {text}"
            );
        }
        assert!(text.contains("probe: \"p9\""), "{text}");
        let text = protoc_decode_as("Alarm", &cluster.consume_one("step-pb-alarms", 0));
        assert!(text.contains("detector: \"series_change\""), "{text}");
        assert!(text.contains("event: \"start\""), "{text}");
        assert!(text.contains("json: \"{"), "{text}");
        assert!(text.contains("probe: \"p9\""), "{text}");
    }
}

#[test]
fn kafka_destination_errors_name_the_parameter() {
    let out = crate::trawl(&[
        "flows",
        "-r",
        &crate::testdata("oracle/tls13.pcap"),
        "--export",
        "kafka://127.0.0.1:9/t?colour=red",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown parameter \"colour\""), "{err}");
}

/// Without the `kafka` feature, the destination parses but is refused naming the feature.
#[cfg(not(feature = "kafka"))]
#[test]
fn kafka_destination_without_the_feature_names_it() {
    let out = crate::trawl(&[
        "flows",
        "-r",
        &crate::testdata("oracle/tls13.pcap"),
        "--export",
        "kafka://127.0.0.1:9/t",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cargo feature `kafka`"), "{err}");
}
