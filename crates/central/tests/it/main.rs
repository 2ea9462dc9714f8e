//! Records of real captures survive the trip through a Kafka message: what `kafka://`
//! exports write (JSON lines, Protobuf) reads back into the same flow record.
use trawl_capture::{FileSource, PacketSource};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

/// Every record of a capture, owned.
fn records(rel: &str) -> Vec<FlowRecord<'static>> {
    let path = trawl_testkit::testdata(rel);
    let mut source = FileSource::open(&path).unwrap();
    let mut meter = FlowMeter::new(FlowConfig::default());
    let mut out = Vec::new();
    let mut sink = |r: &FlowRecord<'_>| {
        out.push(FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        })
    };
    while let Some(batch) = source.next_batch().unwrap() {
        for pkt in batch.iter() {
            meter.process(&pkt, &mut sink);
        }
    }
    meter.flush(&mut sink);
    out
}

/// The records of a capture, some given what metering alone does not fill in: an
/// application label, an outer tunnel, collected and enrichment fields (each on its own
/// records and all together on others), and a handshake timed at 0 ns.
fn varied_records(rel: &str) -> Vec<FlowRecord<'static>> {
    use trawl_flow::{App, AppLabel, AppSource, Tunnel, TunnelType};
    let mut all = records(rel);
    for (i, r) in all.iter_mut().enumerate() {
        if i % 3 == 1 {
            r.app = Some(AppLabel {
                app: App::ALL[i % App::ALL.len()],
                source: if i % 2 == 0 {
                    AppSource::Payload
                } else {
                    AppSource::Port
                },
            });
        }
        if i % 4 == 1 {
            let v4 = i % 8 == 1;
            let addr = |last: u8| -> [u8; 16] {
                if v4 {
                    std::net::Ipv4Addr::new(198, 51, 100, last)
                        .to_ipv6_mapped()
                        .octets()
                } else {
                    [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]
                }
            };
            r.tunnel = Tunnel {
                kind: TunnelType::ALL[1 + i % (TunnelType::ALL.len() - 1)],
                ip_version: if v4 { 4 } else { 6 },
                id: i as u32,
                src_ip: addr(i as u8),
                dst_ip: addr(1),
            };
        }
        if i % 5 == 2 {
            r.extra.src_as = 64_500 + i as u32;
            r.extra.dst_as = 4_200_000_000;
            r.extra.src_country = *b"NL";
            r.extra.dst_country = if i % 10 == 2 { [0; 2] } else { *b"JP" };
        }
        if i % 7 == 3 {
            r.extra.sampling_rate = 512;
            r.extra.agent = Some("192.0.2.9".parse().unwrap());
            r.extra.in_if = 3;
            r.extra.out_if = i as u32;
        }
        if i == 11 {
            r.fwd.rtt_handshake_ns = Some(0);
        }
    }
    all
}

#[test]
fn json_and_protobuf_messages_read_back_into_the_same_record() {
    let all = varied_records("oracle/many-protocols.pcap.gz");
    assert!(all.len() > 200);
    assert!(all.iter().any(|r| r.fwd.rtt_samples > 0));
    let mut json = RecordWriter::new(RecordFormat::Json, false).with_iface("eth1");
    for r in &all {
        let mut line = Vec::new();
        json.write(r, &mut line);
        line.pop();
        // JSON lines round the statistics to 3 decimals: the record read back writes the
        // same line.
        let p = trawl_central::message::parse(&line).unwrap();
        let mut again = Vec::new();
        json.write(&p.record, &mut again);
        again.pop();
        assert_eq!(
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(&line)
        );
        assert_eq!(p.iface.as_deref(), Some("eth1"));

        let mut pb = Vec::new();
        trawl_export::pb::encode_flow(r, Some("eth2"), "probe-9", &mut pb);
        let p = trawl_central::message::parse(&pb).unwrap();
        assert_eq!(p.record, *r);
        assert_eq!(p.iface.as_deref(), Some("eth2"));
        assert_eq!(p.probe.as_deref(), Some("probe-9"));
        assert_eq!(p.store_iface("x"), "eth2");
    }
}

/// The published `trawl.proto` names the fields trawl writes after the first 60 (protoc reads
/// them as known fields, not as unknown numbers), with the handshake that took 0 ns present.
#[test]
fn protoc_reads_the_label_round_trip_tunnel_and_enrichment_fields_by_name() {
    let all = varied_records("oracle/many-protocols.pcap.gz");
    let mut r = *all.iter().find(|r| r.fwd.rtt_samples > 0).unwrap();
    r.fwd.rtt_handshake_ns = Some(0);
    r.app = all.iter().find_map(|r| r.app);
    r.tunnel = all.iter().find(|r| r.tunnel.is_some()).unwrap().tunnel;
    r.extra = all
        .iter()
        .find(|r| r.extra.is_enriched() && r.extra.dst_country != [0; 2])
        .unwrap()
        .extra;
    r.extra.in_if = 3;
    let mut pb = Vec::new();
    trawl_export::pb::encode_flow(&r, None, "probe-9", &mut pb);
    let specs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/specs");
    let mut child = std::process::Command::new("protoc")
        .arg(format!("--proto_path={specs}"))
        .args(["--decode=trawl.FlowRecord", "trawl.proto"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run protoc (apt install protobuf-compiler)");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &pb).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let want = [
        format!("app: \"{}\"", r.app.unwrap().app.name()),
        "fwd_rtt_handshake_ns: 0".to_string(),
        format!("tunnel_type: \"{}\"", r.tunnel.kind.name()),
        format!("tunnel_src: \"{}\"", r.tunnel.src_addr()),
        format!("tunnel_id: {}", r.tunnel.id),
        format!("src_as: {}", r.extra.src_as),
        "src_country: \"NL\"".to_string(),
        "in_if: 3".to_string(),
        format!("fwd_rtt_samples: {}", r.fwd.rtt_samples),
    ];
    for w in want {
        assert!(text.lines().any(|l| l == w), "{w} not in\n{text}");
    }
    // No field protoc does not know (it prints those by number).
    assert!(
        !text.lines().any(|l| l.starts_with(char::is_numeric)),
        "{text}"
    );
}

/// `format=avro` without Kafka: every record (labels, round trips, tunnels, collected and
/// enrichment fields among them) encoded as trawl's Avro and decoded by fastavro with the
/// published `FlowRecord.avsc` alone has every field of its JSON line with the same value.
#[test]
fn avro_records_decode_with_the_published_schema_into_the_json_fields() {
    const SCRIPT: &str = r#"
import io, json, struct, sys
from fastavro import parse_schema, schemaless_reader
schema = parse_schema(json.load(open(sys.argv[1])))
b = open(sys.argv[2], "rb").read()
while b:
    (n,) = struct.unpack(">I", b[:4])
    r = io.BytesIO(b[14:4 + n])
    print(json.dumps(schemaless_reader(r, schema)))
    assert r.read() == b"", "bytes after the record"
    b = b[4 + n:]
"#;
    let all = varied_records("oracle/many-protocols.pcap.gz");
    let mut json = RecordWriter::new(RecordFormat::Json, false);
    let (mut messages, mut lines) = (Vec::new(), Vec::new());
    for r in &all {
        let mut m = Vec::new();
        trawl_export::avro::encode_flow(r, None, "p", &mut m);
        messages.extend_from_slice(&(m.len() as u32).to_be_bytes());
        messages.extend_from_slice(&m);
        let mut line = Vec::new();
        json.write(r, &mut line);
        lines.push(serde_json::from_slice::<serde_json::Value>(&line).unwrap());
    }
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("avro-records.bin");
    std::fs::write(&file, &messages).unwrap();
    let schema = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/specs/avro/FlowRecord.avsc"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT, schema])
        .arg(&file)
        .output()
        .expect("run python3");
    std::fs::remove_file(&file).unwrap();
    assert!(
        out.status.success(),
        "fastavro (pip install fastavro): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(decoded.len(), lines.len());
    let mut checked = std::collections::BTreeSet::new();
    for (avro, json) in decoded.iter().zip(&lines) {
        for (k, want) in json.as_object().unwrap() {
            let got = &avro[k.as_str()];
            if k == "proto" {
                // Avro has the number, JSON its name.
                continue;
            }
            let same = match (got, want) {
                // The JSON lines round means and deviations to 3 decimals; Avro keeps them.
                (serde_json::Value::Number(g), serde_json::Value::Number(w)) => {
                    let (g, w) = (g.as_f64().unwrap(), w.as_f64().unwrap());
                    (g - w).abs() <= 0.0005 * (1.0 + 1e-9 * w.abs())
                }
                _ => got == want,
            };
            assert!(same, "{k}: avro {got}, JSON {want}");
            if !want.is_null() {
                checked.insert(k.clone());
            }
        }
    }
    for k in [
        "app",
        "fwd_rtt_handshake_ns",
        "rev_rtt_mean_ns",
        "tunnel_src",
        "tunnel_id",
        "agent",
        "dst_as",
        "src_country",
    ] {
        assert!(checked.contains(k), "no record had {k}");
    }
}

/// The sorted Native block of a batch of flow rows (what `trawl clickhouse load` inserts) is
/// the block ClickHouse 18.16 itself writes for the same rows in sorting-key order, byte for
/// byte, and inserting it fills the table as the RowBinary rows do.
#[test]
fn native_blocks_are_the_servers_own_and_load_the_same_rows() {
    use trawl_central::http::Server;
    use trawl_central::native::NativeWriter;
    use trawl_central::schema::{self, SchemaOptions, ServerVersion};
    let ch = trawl_testkit::clickhouse::ClickHouse::start(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        1,
    );
    let o = SchemaOptions {
        version: ServerVersion::V18,
        ..SchemaOptions::default()
    };
    for st in schema::ddl(&o) {
        ch.query(&st);
    }
    ch.query("CREATE TABLE trawl.flows_rb AS trawl.flows");
    let all = varied_records("oracle/many-protocols.pcap.gz");
    let mut rows = Vec::new();
    for (i, r) in all.iter().enumerate() {
        // Probes and interfaces of several lengths: the key compares them as bytes, the
        // shorter first.
        let probe = ["p", "p1", "", "p10"][i % 4];
        let iface = ["eth0", "eth", "x"][i % 3];
        trawl_central::rowbinary::flow_row(r, probe, iface, &mut rows);
    }
    let (cols, key) = schema::table("flows").unwrap();
    let mut w = NativeWriter::new(cols, key).unwrap();
    let mut block = Vec::new();
    w.write(&rows, all.len(), &mut block).unwrap();
    let names = w.column_list();
    let server = Server::parse(&ch.url).unwrap();
    server
        .insert(
            &format!("INSERT INTO trawl.flows ({names}) FORMAT Native"),
            &block,
        )
        .unwrap();
    server
        .insert(
            &format!("INSERT INTO trawl.flows_rb ({names}) FORMAT RowBinary"),
            &rows,
        )
        .unwrap();
    let every = |t: &str| ch.query(&format!("SELECT * FROM trawl.{t} ORDER BY {names}"));
    assert_eq!(every("flows"), every("flows_rb"));
    assert_eq!(
        ch.query("SELECT count() FROM trawl.flows").trim(),
        all.len().to_string()
    );
    // Every key distinct (so that the order is the key's alone): then the server's block of
    // the rows in key order is ours.
    assert_eq!(
        ch.query(&format!("SELECT uniqExact({key}) FROM trawl.flows_rb"))
            .trim(),
        all.len().to_string()
    );
    // A few hundred rows: one block (the server's blocks are up to 65,536 rows).
    assert!(all.len() < 65_536);
    let theirs = server
        .query(&format!(
            "SELECT {names} FROM trawl.flows_rb ORDER BY {key} FORMAT Native"
        ))
        .unwrap();
    assert!(
        theirs == block,
        "the server's Native block differs from ours"
    );
}

/// A current server (chDB) reads the same block into its flow table, whose text columns are
/// `LowCardinality(String)` where the block says `String`: every row arrives, equal to the
/// rows' own values.
#[test]
fn native_blocks_load_into_a_current_servers_flow_table() {
    use trawl_central::native::NativeWriter;
    use trawl_central::schema::{self, SchemaOptions};
    let dir = tempfile_dir("native-chdb");
    let all = varied_records("oracle/many-protocols.pcap.gz");
    let mut rows = Vec::new();
    for r in &all {
        trawl_central::rowbinary::flow_row(r, "probe-1", "eth0", &mut rows);
    }
    let (cols, key) = schema::table("flows").unwrap();
    let mut w = NativeWriter::new(cols, key).unwrap();
    let mut block = Vec::new();
    w.write(&rows, all.len(), &mut block).unwrap();
    let file = dir.join("block.native");
    std::fs::write(&file, &block).unwrap();
    let mut sql = schema::script(&schema::ddl(&SchemaOptions {
        replicated: false,
        ..SchemaOptions::default()
    }));
    sql.push_str(&format!(
        "INSERT INTO trawl.flows ({}) FROM INFILE '{}' FORMAT Native;\n",
        w.column_list(),
        file.display()
    ));
    sql.push_str(
        "SELECT count(), uniqExact(src_ip, dst_ip, src_port, dst_port, first_ns), \
         sum(fwd_bytes + rev_bytes), any(toTypeName(probe)), any(probe) FROM trawl.flows",
    );
    let out = trawl_testkit::clickhouse::chdb(&dir.join("session"), &sql);
    let bytes: u64 = all.iter().map(|r| r.fwd.bytes + r.rev.bytes).sum();
    let distinct: std::collections::BTreeSet<_> = all
        .iter()
        .map(|r| (r.src_ip, r.dst_ip, r.src_port, r.dst_port, r.first_ns))
        .collect();
    assert_eq!(
        out.trim(),
        format!(
            "{}\t{}\t{bytes}\tLowCardinality(String)\tprobe-1",
            all.len(),
            distinct.len()
        )
    );
}

/// The topic the Kafka-engine view tests name: the `iface` of records that name neither an
/// interface nor a probe.
const VIEW_TOPIC: &str = "flows-json";

/// JSON lines as `kafka://...?format=json` writes them, of the varied records of a capture
/// (labels, round trips, tunnels, collected, enrichment and interface-name fields) through
/// writers of every shape a record can take: with and without `iface`, the three feature
/// levels, `--tunnel inner` (null tunnel fields), every extra field written (a null `agent`),
/// and some lines naming a `probe` (which the loader reads); with the rows `trawl clickhouse
/// load` inserts for the same lines (`clickhouse_sink`'s defaults: no probe, the topic as
/// the interface). Returns the lines, the RowBinary rows and how many.
fn view_lines_and_loader_rows() -> (Vec<u8>, Vec<u8>, usize) {
    use trawl_flow::{FeatureLevel, InterfaceInfo};
    let mut all = varied_records("oracle/many-protocols.pcap.gz");
    let uplink: &'static InterfaceInfo = Box::leak(Box::new(InterfaceInfo {
        name: "xe-0/0/1".into(),
        description: "uplink \"A\"".into(),
    }));
    for r in all.iter_mut().skip(5).step_by(9) {
        r.extra.in_if_info = Some(uplink);
    }
    let mut writers = Vec::new();
    for level in [
        FeatureLevel::Full,
        FeatureLevel::Standard,
        FeatureLevel::Minimal,
    ] {
        writers.push(RecordWriter::new(RecordFormat::Json, false).with_features(level));
        writers.push(
            RecordWriter::new(RecordFormat::Json, false)
                .with_features(level)
                .with_iface("eth1"),
        );
    }
    let mut every = RecordWriter::new(RecordFormat::Json, false).with_iface("");
    every.set_tunnel_fields(true);
    every.set_extra_fields(true, true);
    every.set_interface_fields(true);
    writers.push(every);
    let (mut lines, mut rows) = (Vec::new(), Vec::new());
    for (i, r) in all.iter().enumerate() {
        let mut line = Vec::new();
        let w = i % writers.len();
        writers[w].write(r, &mut line);
        if i % 11 == 4 {
            line.splice(1..1, b"\"probe\":\"probe-7\",".iter().copied());
        }
        let p = trawl_central::message::parse(&line[..line.len() - 1]).unwrap();
        let probe = p.probe.as_deref().unwrap_or("");
        trawl_central::rowbinary::flow_row(&p.record, probe, p.store_iface(VIEW_TOPIC), &mut rows);
        lines.extend_from_slice(&line);
    }
    (lines, rows, all.len())
}

/// Every row of a flow table in one order (all columns, as text; addresses in hex).
fn every_row(table: &str) -> String {
    use trawl_central::schema::ColType;
    let (cols, _) = trawl_central::schema::table("flows").unwrap();
    let names: Vec<String> = cols
        .iter()
        .map(|(n, t)| match t {
            ColType::Plain("FixedString(16)") => format!("hex({n})"),
            _ => n.to_string(),
        })
        .collect();
    let names = names.join(", ");
    format!("SELECT {names} FROM {table} ORDER BY {names} FORMAT TabSeparated")
}

/// What the rows must hold for the comparison to mean something: every later column filled
/// somewhere (labels, AS numbers, countries, round trips, tunnels), probes and both kinds of
/// interface names.
const VIEW_COVERAGE: &str = "SELECT count(), countIf(app != '' AND app_source != ''), \
     countIf(src_as != 0 AND dst_as != 0), countIf(src_country != ''), \
     countIf(dst_country != ''), countIf(isNotNull(fwd_rtt_handshake_ns)), \
     countIf(fwd_rtt_samples > 0 AND isNotNull(fwd_rtt_mean_ns)), \
     countIf(isNotNull(rev_rtt_max_ns)), countIf(tunnel_type != ''), \
     countIf(tunnel_id != 0), countIf(tunnel_src != toFixedString('', 16)), \
     countIf(probe = 'probe-7'), countIf(iface = 'eth1'), countIf(iface = 'flows-json'), \
     countIf(iface = 'probe-7') FROM trawl.flows FORMAT TabSeparated";

/// The view's rows (TabSeparated, one order) are the loader's; else the first that differs.
fn assert_same_rows(view: &str, loader: &str) {
    if let Some((v, l)) = view.lines().zip(loader.lines()).find(|(v, l)| v != l) {
        panic!("the view's rows differ from the loader's: the view\n{v}\nthe loader\n{l}");
    }
    assert_eq!(view.lines().count(), loader.lines().count());
}

fn assert_view_coverage(counts: &str, n: usize) {
    let c: Vec<usize> = counts
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(c[0], n, "{counts}");
    assert!(
        c[1..].iter().all(|&k| k > 0),
        "a column never filled: {counts}"
    );
}

/// The Kafka engine's materialized view (`trawl clickhouse schema --kafka-engine`) turns each
/// JSON record into the row `trawl clickhouse load` inserts for it, every column equal (the
/// label, AS numbers, countries, round trips and tunnel too, not their defaults): in
/// ClickHouse 18.16, the JSON lines inserted into a queue table of the view's columns with
/// the `Null` engine (the view fires on the insert as on the Kafka engine's blocks; the CLI
/// test `clickhouse_kafka_engine_reads_the_json_topic` reads a real topic).
#[test]
fn kafka_view_rows_equal_the_loaders_on_18_16() {
    use trawl_central::http::Server;
    use trawl_central::schema::{self, SchemaOptions, ServerVersion};
    let ch = trawl_testkit::clickhouse::ClickHouse::start(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        1,
    );
    let o = SchemaOptions {
        version: ServerVersion::V18,
        ..SchemaOptions::default()
    };
    for st in schema::ddl(&o)
        .into_iter()
        .chain(schema::kafka_view_ddl("trawl", "Null", VIEW_TOPIC))
    {
        ch.query(&st);
    }
    ch.query("CREATE TABLE trawl.flows_rb AS trawl.flows");
    let (lines, rows, n) = view_lines_and_loader_rows();
    let server = Server::parse(&ch.url).unwrap();
    server
        .insert("INSERT INTO trawl.flows_queue FORMAT JSONEachRow", &lines)
        .unwrap();
    let (cols, _) = schema::table("flows").unwrap();
    let names: Vec<&str> = cols.iter().map(|(n, _)| *n).collect();
    server
        .insert(
            &format!(
                "INSERT INTO trawl.flows_rb ({}) FORMAT RowBinary",
                names.join(", ")
            ),
            &rows,
        )
        .unwrap();
    assert_view_coverage(&ch.query(VIEW_COVERAGE), n);
    let view = ch.query(&every_row("trawl.flows"));
    assert_eq!(view.lines().count(), n);
    assert_same_rows(&view, &ch.query(&every_row("trawl.flows_rb")));
}

/// The same in a current engine (chDB: `LowCardinality` columns, `null` read as the
/// default), in a session whose time zone is 14 hours east of UTC: the view's `date` is the
/// UTC day of `first_ns`, as the loader's.
#[test]
fn kafka_view_rows_equal_the_loaders_in_a_current_server() {
    use trawl_central::schema::{self, SchemaOptions};
    let dir = tempfile_dir("view-chdb");
    let (lines, rows, n) = view_lines_and_loader_rows();
    let (json, bin) = (dir.join("lines.json"), dir.join("rows.bin"));
    std::fs::write(&json, &lines).unwrap();
    std::fs::write(&bin, &rows).unwrap();
    let (cols, _) = schema::table("flows").unwrap();
    let names: Vec<&str> = cols.iter().map(|(n, _)| *n).collect();
    let mut sql = String::from("SET session_timezone = 'Pacific/Kiritimati';\n");
    sql.push_str(&schema::script(&schema::ddl(&SchemaOptions {
        replicated: false,
        ..SchemaOptions::default()
    })));
    sql.push_str(&schema::script(&schema::kafka_view_ddl(
        "trawl", "Null", VIEW_TOPIC,
    )));
    sql.push_str(&format!(
        "CREATE TABLE trawl.flows_rb AS trawl.flows;\n\
         INSERT INTO trawl.flows_queue FROM INFILE '{}' FORMAT JSONEachRow;\n\
         INSERT INTO trawl.flows_rb ({}) FROM INFILE '{}' FORMAT RowBinary;\n{VIEW_COVERAGE}",
        json.display(),
        names.join(", "),
        bin.display()
    ));
    let session = dir.join("session");
    assert_view_coverage(&trawl_testkit::clickhouse::chdb(&session, &sql), n);
    let view = trawl_testkit::clickhouse::chdb(&session, &every_row("trawl.flows"));
    assert_eq!(view.lines().count(), n);
    let loader = trawl_testkit::clickhouse::chdb(&session, &every_row("trawl.flows_rb"));
    assert_same_rows(&view, &loader);
}

/// A fresh directory under the test binary's scratch directory.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
