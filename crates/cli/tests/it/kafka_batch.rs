//! `kafka://...?batch=BYTES` (issue 22, throughput): records packed into fewer messages, as
//! JSON lines or length-delimited Protobuf, which kcat, trawl's consumers and ClickHouse's
//! `Protobuf` format (chDB) split back into the same records. Against a real broker.
#[cfg(feature = "kafka")]
mod with_brokers {
    use std::path::Path;
    use std::process::Command;
    use std::time::Duration;

    use trawl_testkit::kafka::{coverage, Cluster};

    use crate::{summary, testdata, trawl};

    fn ok(out: &std::process::Output) {
        assert!(
            out.status.success(),
            "exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Exports `capture` to `topic` with `params`; returns the exporter's summary.
    fn export(b: &str, capture: &str, topic: &str, params: &str) -> serde_json::Value {
        let out = trawl(&[
            "flows",
            "-r",
            capture,
            "--export",
            &format!("kafka://{b}/{topic}?{params}"),
            "--summary",
            "json",
        ]);
        ok(&out);
        summary(&out)["exporters"][0].clone()
    }

    /// `trawl collect --kafka` of `topic` to its end into a database in `dir`; returns the
    /// records it read and what `trawl query` gives of them per conversation.
    fn collect(b: &str, topic: &str, dir: &Path) -> (u64, String) {
        let db = dir.join(topic);
        let db = db.to_str().unwrap();
        let out = trawl(&[
            "collect",
            "--kafka",
            &format!("{b}/{topic}"),
            "--db",
            db,
            "--no-output",
            "--kafka-end",
            "--summary",
            "json",
        ]);
        ok(&out);
        let s = summary(&out);
        assert_eq!(s["kafka"]["bad_messages"].as_u64(), Some(0), "{s}");
        let q = trawl(&[
            "query",
            "sip,dip,sport,dport,proto",
            "-d",
            db,
            "--format",
            "csv",
            "-n",
            "0",
        ]);
        ok(&q);
        let records = s["kafka"]["records"].as_u64().unwrap();
        (records, String::from_utf8(q.stdout).unwrap())
    }

    /// The records of a delimited-Protobuf message: its varint lengths, walked.
    fn delimited_count(mut b: &[u8]) -> usize {
        let mut n = 0;
        while !b.is_empty() {
            let (mut len, mut shift) = (0usize, 0);
            loop {
                let c = b[0];
                b = &b[1..];
                len |= usize::from(c & 0x7f) << shift;
                shift += 7;
                if c < 0x80 {
                    break;
                }
            }
            b = &b[len..];
            n += 1;
        }
        n
    }

    /// chDB (a current ClickHouse) reading `message` with the `Protobuf` format and the
    /// published `trawl.proto`: one JSON object per record.
    fn chdb_protobuf(message: &[u8]) -> Vec<serde_json::Value> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("message.bin");
        std::fs::write(&file, message).unwrap();
        let proto = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/specs/trawl.proto")
            .canonicalize()
            .unwrap();
        let sql = format!(
            "SELECT src_ip, dst_ip, src_port, dst_port, proto, fwd_packets, rev_packets, probe \
             FROM file('{}', 'Protobuf') SETTINGS format_schema = '{}:FlowRecord'",
            file.display(),
            proto.display()
        );
        let out = Command::new("python3")
            .args([
                "-c",
                "import sys, chdb; sys.stdout.write(str(chdb.query(sys.argv[1], 'JSONEachRow')))",
                &sql,
            ])
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "chdb (pip install chdb): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Batched JSON and delimited-Protobuf topics hold every record in fewer messages: kcat
    /// sees `trawl flows`'s lines, `trawl collect --kafka` stores what it stores from a topic
    /// of one record per message, and chDB's `Protobuf` format reads a batched message's
    /// records with the published `.proto` alone. (Before `batch=`, the destination was
    /// refused as an unknown parameter.)
    #[test]
    fn kafka_batched_messages_carry_every_record_and_consumers_split_them() {
        let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
        let b = &cluster.bootstrap;
        let capture = testdata("oracle/many-protocols.pcap.gz");
        let want: Vec<String> =
            String::from_utf8(trawl(&["flows", "-r", &capture, "--summary", "none"]).stdout)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
        let n = want.len() as u64;
        assert!(n > 20, "{n} records");

        let e = export(b, &capture, "one-each", "format=json");
        assert_eq!(e["messages"].as_u64(), Some(n), "{e}");
        let mut messages = 0;
        for (topic, params) in [
            ("batch-json", "format=json&batch=64k"),
            (
                "batch-pbd",
                "format=protobuf-delimited&batch=32k&compression=lz4&probe=p3",
            ),
        ] {
            let e = export(b, &capture, topic, params);
            assert_eq!(e["records"].as_u64(), Some(n), "{topic}: {e}");
            messages = e["messages"].as_u64().unwrap();
            // A batch holds more than eight records of this capture (JSON: 1.1 kB each).
            assert!(messages > 1 && messages * 8 < n, "{topic}: {e}");
        }

        // JSON: the lines of the batched messages are `trawl flows`'s lines, each once.
        let got = cluster.consume_lines("batch-json", want.len(), Duration::from_secs(30));
        let c = coverage(&want, &got);
        assert!(c.missing.is_empty(), "missing: {:?}", c.missing.first());
        assert!(c.unexpected.is_empty(), "{:?}", c.unexpected.first());
        assert_eq!(c.duplicates, 0);

        // The consumer splits both into the records one message each gives.
        let tmp = tempfile::tempdir().unwrap();
        let (records, oracle) = collect(b, "one-each", tmp.path());
        assert_eq!(records, n);
        for topic in ["batch-json", "batch-pbd"] {
            let (records, rows) = collect(b, topic, tmp.path());
            assert_eq!(records, n, "{topic}");
            assert_eq!(rows, oracle, "{topic}");
        }

        // ClickHouse's Protobuf format reads a batched message: every record of it. (The
        // fullest: a message waits 200 ms at most for records, and the first ones of a
        // capture come slowly.)
        let fullest = (0..messages)
            .map(|i| cluster.consume_one("batch-pbd", i))
            .max_by_key(|m| delimited_count(m))
            .unwrap();
        let rows = chdb_protobuf(&fullest);
        assert_eq!(rows.len(), delimited_count(&fullest));
        assert!(
            rows.len() > 8,
            "{} records in the fullest message",
            rows.len()
        );
        // chDB quotes 64-bit integers in JSON: compared as text.
        let text = |v: &serde_json::Value| v.as_str().map_or(v.to_string(), str::to_string);
        let fields = ["src_ip", "dst_ip", "src_port", "dst_port", "fwd_packets"];
        let key = |v: &serde_json::Value| fields.map(|f| text(&v[f]));
        let records: Vec<serde_json::Value> = want
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for row in &rows {
            assert!(
                records.iter().any(|r| key(r) == key(row)),
                "no record of `trawl flows` is {row}"
            );
            assert_eq!(row["probe"], "p3");
        }
    }
}
