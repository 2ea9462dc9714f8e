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

    /// Messages of `topic` decoded by fastavro (PyPI) with the published schema
    /// `docs/specs/avro/SCHEMA.avsc` alone, after checking the single-object header (`C3 01`
    /// and the schema's CRC-64-AVRO fingerprint as fastavro computes it): one JSON object each.
    fn fastavro_decode(
        cluster: &Cluster,
        topic: &str,
        schema: &str,
        n: usize,
    ) -> Vec<serde_json::Value> {
        const SCRIPT: &str = r#"
import io, json, sys
from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint, to_parsing_canonical_form
schema = parse_schema(json.load(open(sys.argv[1])))
fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
for path in sys.argv[2:]:
    b = open(path, "rb").read()
    assert b[:2] == b"\xc3\x01", ("no single-object marker", b[:2])
    assert b[2:10] == fp, ("fingerprint", b[2:10].hex(), fp.hex())
    r = io.BytesIO(b[10:])
    print(json.dumps(schemaless_reader(r, schema)))
    assert r.read() == b"", "bytes after the record"
"#;
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..n {
            let f = dir.path().join(format!("{i}.bin"));
            std::fs::write(&f, cluster.consume_one(topic, i as u64)).unwrap();
            files.push(f);
        }
        let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/specs/avro");
        let out = Command::new("python3")
            .args(["-c", SCRIPT])
            .arg(specs.join(format!("{schema}.avsc")))
            .args(&files)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "fastavro (pip install fastavro): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `avro` has every field of `json` with the same value (numbers compared as numbers:
    /// Avro's `0.0` is the JSON lines' `0`).
    fn same_fields(avro: &serde_json::Value, json: &serde_json::Value) {
        for (k, want) in json.as_object().unwrap() {
            let got = &avro[k.as_str()];
            let same = match (got, want) {
                // The JSON lines round means and deviations to 3 decimals; Avro keeps them.
                (serde_json::Value::Number(g), serde_json::Value::Number(w)) => {
                    let (g, w) = (g.as_f64().unwrap(), w.as_f64().unwrap());
                    (g - w).abs() <= 0.0005 * (1.0 + 1e-9 * w.abs())
                }
                _ => got == want,
            };
            assert!(same, "{k}: avro {got}, JSON {want}");
        }
    }

    /// `format=avro`: records and series rows in Avro's single-object encoding, decoded
    /// without trawl (fastavro and the published schemas) into what `trawl flows` and `trawl
    /// series` print.
    #[test]
    fn kafka_avro_messages_decode_with_the_published_schemas() {
        let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
        let b = &cluster.bootstrap;
        let capture = crate::testdata("oracle/many-protocols.pcap.gz");
        let lines = flows_lines(&capture);
        let out = trawl(&["series", "-r", &capture, "--summary", "none"]);
        assert!(out.status.success());
        let series: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let out = trawl(&[
            "flows",
            "-r",
            &capture,
            "--export",
            &format!("kafka://{b}/avro?format=avro&series=avro-series&probe=p9"),
            "--summary",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The first messages, each found among the records by its key and first packet.
        let key = |r: &serde_json::Value| {
            format!(
                "{} {} {} {} {}",
                r["src_ip"], r["src_port"], r["dst_ip"], r["dst_port"], r["first_ns"]
            )
        };
        let want: std::collections::HashMap<String, serde_json::Value> = lines
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (key(&v), v)
            })
            .collect();
        let n = lines.len().min(20);
        let got = fastavro_decode(&cluster, "avro", "FlowRecord", n);
        assert_eq!(got.len(), n);
        for a in &got {
            let mut want = want
                .get(&key(a))
                .unwrap_or_else(|| panic!("no record {a}"))
                .clone();
            assert_eq!(
                a["proto"].as_u64().map(|p| p as u8),
                trawl_central::message::proto_number(want["proto"].as_str().unwrap())
            );
            want.as_object_mut().unwrap().remove("proto");
            same_fields(a, &want);
            assert_eq!(a["probe"], "p9");
        }
        let got = fastavro_decode(&cluster, "avro-series", "SeriesRow", 3);
        for (a, want) in got.iter().zip(&series) {
            same_fields(a, want);
            assert_eq!(a["probe"], "p9");
        }
    }

    /// `acks=` configures the producer: on a topic where no `acks=all` write should succeed
    /// (`min.insync.replicas=2` on a one-broker cluster), `acks=all` (the default) delivers
    /// nothing and drops every record at its timeout, while `acks=1` and `acks=0`, which the
    /// broker does not hold to the in-sync replicas, deliver every record; each as kcat
    /// with the same acks fares on the same topic.
    #[test]
    fn kafka_acks_parameter_sets_the_producers_acks() {
        let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
        let b = &cluster.bootstrap;
        cluster.create_topic("acks", &["min.insync.replicas=2"]);
        let capture = crate::testdata("oracle/tls13.pcap");
        let want = flows_lines(&capture).len() as u64;
        assert!(want > 0);
        // The oracle: kcat producing one message with the same acks to the same topic just
        // before. trawl's exporter must fare as kcat does with each setting. (A run of the
        // suite once saw this broker take an acks=all write despite min.insync.replicas=2;
        // against kcat the test follows what the broker does, and an acks setting trawl
        // ignored still differs from kcat at 1 and 0, which must deliver.)
        let kcat_delivers = |acks: &str| {
            let mut child = std::process::Command::new("kcat")
                .args(["-P", "-b", b, "-t", "acks", "-X"])
                .arg(format!("acks={}", if acks == "all" { "-1" } else { acks }))
                .args([
                    "-X",
                    "message.timeout.ms=1500",
                    "-X",
                    "enable.idempotence=false",
                ])
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run kcat (apt install kcat)");
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(b"kcat\n").unwrap();
            let out = child.wait_with_output().unwrap();
            // kcat reports a message it could not deliver on stderr (and exits non-zero).
            out.status.success()
                && !String::from_utf8_lossy(&out.stderr).contains("Delivery failed")
        };
        let mut delivered_total = 0;
        for (acks, refused_by_this_broker) in [("all", true), ("1", false), ("0", false)] {
            let oracle = kcat_delivers(acks);
            // acks=0 cannot learn of a refusal; 1 and 0 must go through here.
            if !refused_by_this_broker {
                assert!(oracle, "kcat with acks={acks} was refused");
            }
            let out = trawl(&[
                "flows",
                "-r",
                &capture,
                "--export",
                &format!("kafka://{b}/acks?acks={acks}&timeout=1500&probe=p"),
                "--summary",
                "json",
            ]);
            let e = &summary(&out)["exporters"][0];
            if oracle {
                assert!(out.status.success(), "acks={acks}: {e}");
                assert_eq!(e["messages"].as_u64(), Some(want), "acks={acks}: {e}");
                delivered_total += want + 1;
            } else {
                assert!(!out.status.success(), "acks={acks}: {e}");
                assert_eq!(e["messages"].as_u64(), Some(0), "acks={acks}: {e}");
                assert_eq!(e["dropped_send"].as_u64(), Some(want), "acks={acks}: {e}");
            }
        }
        // The topic holds what was delivered (kcat's and trawl's), nothing else.
        let got = cluster.consume_lines("acks", delivered_total as usize, Duration::from_secs(30));
        assert_eq!(got.len() as u64, delivered_total);
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
