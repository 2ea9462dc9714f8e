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
