//! Fleet queries (issue 21, docs/specs/distributed.md): five `trawl serve` processes on
//! loopback, each over a database of other testdata captures, asked by `trawl query --probes`;
//! the merged answer must equal `trawl query` over one database holding all five probes' data
//! (each probe's data under an interface named after the probe, so `iface` there is `probe`
//! here). Probes that are down, slow, refuse the token, send garbage or are killed while
//! answering (a real process on a slowed link in a network namespace) are marked and left
//! out; the rest is still merged. Paired probes count once; the coordinator sums series and
//! streams answers (SSE).
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The probes: name, `site` tag, capture.
const PROBES: [(&str, &str, &str); 5] = [
    ("fra1", "fra", "oracle/many-protocols.pcap.gz"),
    ("fra2", "fra", "oracle/1kxun.pcap.gz"),
    ("ams1", "ams", "pcaps/android.pcap"),
    ("ams2", "ams", "oracle/sip.pcap"),
    ("nyc1", "nyc", "oracle/v6-http.pcap"),
];

const TOKEN: &str = "fleet-test-token-0123456789abcdef";

fn trawl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl")
}

fn trawl_ok(args: &[&str]) -> Vec<u8> {
    let out = trawl(args);
    assert!(
        out.status.success(),
        "trawl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn testdata(rel: &str) -> String {
    trawl_testkit::testdata(rel).to_string_lossy().into_owned()
}

/// A `trawl serve` process.
struct Probe {
    child: Child,
    url: String,
}

impl Probe {
    /// `trawl serve ARGS --api 127.0.0.1:0` until dropped.
    fn start(args: &[&str]) -> Probe {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
        cmd.args(["serve", "--api", "127.0.0.1:0"]).args(args);
        Probe::spawn(cmd)
    }

    /// `cmd` (a `trawl serve`) until dropped; its URL is the one it says it serves on.
    fn spawn(mut cmd: Command) -> Probe {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run trawl serve");
        // Owned at once, so a panic below still kills and reaps it (Drop).
        let mut probe = Probe {
            child,
            url: String::new(),
        };
        let mut lines = BufReader::new(probe.child.stderr.take().unwrap()).lines();
        let marker = "serving on ";
        let mut seen = String::new();
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(at) = line.find(marker) {
                probe.url = line[at + marker.len()..].trim().to_string();
                break;
            }
            seen.push_str(&line);
        }
        assert!(
            !probe.url.is_empty(),
            "trawl serve ended before serving: {seen}"
        );
        // Standard error keeps draining, so the probe never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        probe
    }

    /// A probe serving `db` (and the packet store `pk`) with the test's token.
    fn serve(db: &Path, pk: Option<&Path>, token_file: &Path) -> Probe {
        let (db, token) = (db.to_str().unwrap(), token_file.to_str().unwrap());
        let mut args = vec!["--db", db, "--api-token-file", token];
        if let Some(pk) = pk {
            args.extend(["--packets", pk.to_str().unwrap()]);
        }
        Probe::start(&args)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The five probes' databases, the database of all of them, the token file.
struct Fleet {
    dir: tempfile::TempDir,
    probes: Vec<Probe>,
}

impl Fleet {
    fn new() -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let all = dir.path().join("all");
        let mut probes = Vec::new();
        for (name, _, capture) in PROBES {
            let own = dir.path().join(name);
            let pk = dir.path().join(format!("{name}-packets"));
            trawl_ok(&[
                "dump",
                "-r",
                &testdata(capture),
                "-w",
                pk.to_str().unwrap(),
                "-i",
                name,
                "--summary",
                "none",
            ]);
            for db in [&own, &all] {
                trawl_ok(&[
                    "ingest",
                    "-r",
                    &testdata(capture),
                    "--db",
                    db.to_str().unwrap(),
                    "-i",
                    name,
                    "--summary",
                    "none",
                ]);
            }
            probes.push(Probe::serve(&own, Some(&pk), &token_file));
        }
        Fleet { dir, probes }
    }

    fn all(&self) -> String {
        self.dir.path().join("all").to_string_lossy().into_owned()
    }

    /// A probes file of the five probes and `extra` (TOML of more `[[probe]]`s).
    fn probes_file(&self, extra: &str) -> String {
        // The probes' API threads run at nice 10 (queries yield to capture): on a machine
        // loaded by the rest of the suite they answer far slower than alone, so tests that
        // are not about timeouts give them a minute, not the default 10 s (those that are
        // set `--probe-timeout`, which overrides this).
        let mut text = String::from("timeout = \"60s\"\n\n");
        for ((name, site, _), p) in PROBES.iter().zip(&self.probes) {
            text.push_str(&format!(
                "[[probe]]\nname = \"{name}\"\nurl = \"{}\"\ntoken_file = \"token\"\nsite = \"{site}\"\n\n",
                p.url
            ));
        }
        text.push_str(extra);
        let path = self.dir.path().join("probes.toml");
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// Rows of an answer, with `iface` (the one database) read as `probe` (the fleet).
fn rows(v: &Value) -> Vec<Value> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(i) = r.as_object_mut().unwrap().remove("iface") {
                r["probe"] = i;
            }
            r
        })
        .collect()
}

/// (fleet query flags, the same query's flags over the one database)
type Case<'a> = (&'a [&'a str], &'a [&'a str]);

#[test]
fn fleet_query_equals_one_database_of_all_probes() {
    let fleet = Fleet::new();
    let file = fleet.probes_file("");
    let all = fleet.all();
    let cases: &[Case] = &[
        // Top talkers.
        (&["talk_conv"], &["talk_conv"]),
        // Ports, all rows, by packets.
        (
            &["dport,proto", "-n", "0", "-s", "packets"],
            &["dport,proto", "-n", "0", "-s", "packets"],
        ),
        // CIDR conditions, IPv4 and IPv6.
        (
            &[
                "sip",
                "-n",
                "0",
                "--condition",
                "sip = 10.0.0.0/8 or dip = 192.168.0.0/16 or host = 2001::/16",
            ],
            &[
                "sip",
                "-n",
                "0",
                "--condition",
                "sip = 10.0.0.0/8 or dip = 192.168.0.0/16 or host = 2001::/16",
            ],
        ),
        // Time buckets over a time range.
        (
            &[
                "time",
                "--resolution",
                "1h",
                "-s",
                "time",
                "-n",
                "0",
                "--from",
                "2000-01-01T00:00:00Z",
                "--to",
                "2100-01-01T00:00:00Z",
            ],
            &[
                "time",
                "--resolution",
                "1h",
                "-s",
                "time",
                "-n",
                "0",
                "--from",
                "2000-01-01T00:00:00Z",
                "--to",
                "2100-01-01T00:00:00Z",
            ],
        ),
        // The probe attribute.
        (
            &["talk_conv,probe", "-n", "0"],
            &["talk_conv,iface", "-n", "0"],
        ),
        (
            &["probe,dport", "-n", "20", "-s", "flows"],
            &["iface,dport", "-n", "20", "-s", "flows"],
        ),
        // Probe and tag conditions.
        (
            &[
                "dport",
                "-n",
                "0",
                "--condition",
                "probe = fra1 and dport = 443",
            ],
            &[
                "dport",
                "-n",
                "0",
                "--condition",
                "iface = fra1 and dport = 443",
            ],
        ),
        (
            &[
                "probe,proto",
                "-n",
                "0",
                "--condition",
                "site = fra or (site = nyc and proto = tcp)",
            ],
            &[
                "iface,proto",
                "-n",
                "0",
                "--condition",
                "iface = fra1 or iface = fra2 or (iface = nyc1 and proto = tcp)",
            ],
        ),
    ];
    for (fleet_flags, local_flags) in cases {
        let mut args = vec!["query", "--probes", &file, "--format", "json"];
        args.extend_from_slice(fleet_flags);
        let got = json_of(&trawl_ok(&args));
        let mut args = vec!["query", "-d", &all, "--format", "json"];
        args.extend_from_slice(local_flags);
        let want = json_of(&trawl_ok(&args));
        let (mut g, mut w) = (rows(&got), rows(&want));
        assert!(!w.is_empty(), "{fleet_flags:?}: no rows, nothing compared");
        if fleet_flags[0].contains("probe") {
            // Equal rows may tie-break on the grouped-by key in another order: `iface` and
            // `probe` are different fields of it.
            let key = |r: &Value| r.to_string();
            g.sort_by_key(key);
            w.sort_by_key(key);
        }
        assert_eq!(g, w, "{fleet_flags:?}");
        assert_eq!(got["totals"], want["totals"], "{fleet_flags:?}");
        assert_eq!(
            got["stats"]["rows_matched"], want["stats"]["rows_matched"],
            "{fleet_flags:?}"
        );
        assert_eq!(got["incomplete"], false, "{got}");
        let asked = got["probes"].as_array().unwrap();
        assert_eq!(asked.len(), 5);
        let condition = fleet_flags
            .iter()
            .any(|f| f.contains("site") || f.contains("probe ="));
        for p in asked {
            let expected = if p["status"] == "skipped" && condition {
                "skipped"
            } else {
                "ok"
            };
            assert_eq!(p["status"], expected, "{p}");
        }
    }
    // The table names every probe's status after the rows.
    let table = String::from_utf8(trawl_ok(&[
        "query",
        "--probes",
        &file,
        "talk_conv",
        "--condition",
        "site = ams",
    ]))
    .unwrap();
    let status_of = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no line for {name}: {table}"))
            .to_string()
    };
    assert_eq!(status_of("ams1"), "ok", "{table}");
    assert_eq!(status_of("fra1"), "skipped", "{table}");
    // A local query knows no probe.
    let out = trawl(&["query", "-d", &all, "probe"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fleet query"));
}

/// A listener that accepts and never answers; its connections are held until the test ends.
fn silent_listener() -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().take(4).flatten() {
            held.push(s);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    (format!("http://{addr}"), h)
}

/// A fake probe: reads one request, then writes `answer` and closes (as many times as asked).
fn fake_probe(answer: Vec<u8>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            if read_head(&mut s).is_some() {
                let _ = s.write_all(&answer);
            }
        }
    });
    format!("http://{addr}")
}

/// Reads a request's head, as an HTTP/1.1-only server does: an HTTP/2 preface is answered
/// at once with 400 and the connection closed (`None`), as a real one answers it.
fn read_head(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = [0u8; 4096];
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if head.starts_with(b"PRI * HTTP/2.0") {
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        // A lingering close, as real servers make: closed with the client's SETTINGS frame
        // unread, the socket would send a reset that can overtake the 400.
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        return None;
    }
    Some(head)
}

fn http_200(body: &[u8], claimed_len: usize) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.trawl.partial\r\ncontent-length: {claimed_len}\r\nconnection: close\r\n\r\n"
    )
    .into_bytes();
    a.extend_from_slice(body);
    a
}

/// A real probe's binary answer to `attrs`.
fn partial_bytes(url: &str, attrs: &str) -> Vec<u8> {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .arg(format!("{url}/api/v1/partial?attrs={attrs}"))
        .output()
        .expect("curl (scripts/deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&out.stdout[..4], b"TRPA");
    out.stdout
}

#[test]
fn fleet_query_marks_dead_slow_refusing_and_garbage_probes_and_merges_the_rest() {
    let mut fleet = Fleet::new();
    let all = fleet.all();
    // A sixth probe, killed before the query (its port refuses connections).
    let token_file = fleet.dir.path().join("token");
    let killed = Probe::serve(Path::new(&all), None, &token_file);
    let killed_url = killed.url.clone();
    drop(killed);
    let (silent, _held) = silent_listener();
    let real = partial_bytes(&fleet.probes[0].url, "sip,dip");
    let cut_mid_answer = fake_probe(http_200(&real[..real.len() / 2], real.len()));
    let truncated = fake_probe(http_200(&real[..real.len() - 10], real.len() - 10));
    let mut v9 = real.clone();
    v9[4] = 9;
    let wrong_version = fake_probe(http_200(&v9, v9.len()));
    let mut flipped = real.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    let corrupt = fake_probe(http_200(&flipped, flipped.len()));
    let extra = format!(
        "[[probe]]\nname = \"killed\"\nurl = \"{killed_url}\"\ntoken_file = \"token\"\n\n\
         [[probe]]\nname = \"slow\"\nurl = \"{silent}\"\n\n\
         [[probe]]\nname = \"cut\"\nurl = \"{cut_mid_answer}\"\n\n\
         [[probe]]\nname = \"truncated\"\nurl = \"{truncated}\"\n\n\
         [[probe]]\nname = \"v9\"\nurl = \"{wrong_version}\"\n\n\
         [[probe]]\nname = \"corrupt\"\nurl = \"{corrupt}\"\n",
    );
    std::fs::write(
        fleet.dir.path().join("other-token"),
        "not-the-token-0123456789abcdef\n",
    )
    .unwrap();
    // fra2 is asked with the wrong token: its data must be missing from the answer.
    let file = fleet.probes_file(&extra);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        &format!(
            "name = \"fra2\"\nurl = \"{}\"\ntoken_file = \"token\"",
            fleet.probes[1].url
        ),
        &format!(
            "name = \"fra2\"\nurl = \"{}\"\ntoken_file = \"other-token\"",
            fleet.probes[1].url
        ),
    );
    assert!(text.contains("other-token"));
    std::fs::write(&file, text).unwrap();
    let others: Vec<&str> = PROBES
        .iter()
        .map(|p| p.0)
        .filter(|&n| n != "fra2")
        .collect();
    // Long enough for the real probes (their API at nice 10) to answer on a loaded machine.
    let timeout = 6.0;
    let started = Instant::now();
    let out = trawl(&[
        "query",
        "--probes",
        &file,
        "sip,dip",
        "-n",
        "0",
        "--format",
        "json",
        "--probe-timeout",
        "6s",
    ]);
    let took = started.elapsed().as_secs_f64();
    assert_eq!(
        out.status.code(),
        Some(1),
        "incomplete: exit 1; {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Within the timeout (plus process start and the merge on a loaded machine).
    assert!(took < timeout + 2.0, "the answer took {took:.1} s");
    let got = json_of(&out.stdout);
    assert_eq!(got["incomplete"], true);
    let status: std::collections::BTreeMap<String, (String, String)> = got["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                (
                    p["status"].as_str().unwrap().to_string(),
                    p["message"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    let is = |name: &str, want: &str, says: &str| {
        let (s, m) = &status[name];
        assert_eq!(s, want, "{name}: {m}");
        assert!(m.contains(says), "{name}: {m:?} does not say {says:?}");
    };
    is("killed", "refused", "connection refused");
    is("slow", "timeout", "no answer within");
    is("fra2", "refused", "HTTP 401");
    is(
        "cut",
        "error",
        "truncated answer: the connection closed after",
    );
    is("truncated", "error", "corrupt or truncated zstd");
    is("v9", "error", "schema version 9");
    is("corrupt", "error", "");
    for name in others.iter() {
        is(name, "ok", "");
    }
    // The rows are those of the probes that answered.
    let want = json_of(&trawl_ok(&[
        "query",
        "-d",
        &all,
        "sip,dip",
        "-n",
        "0",
        "--format",
        "json",
        "-i",
        &others.join(","),
    ]));
    assert!(!rows(&want).is_empty());
    assert_eq!(rows(&got), rows(&want));
    assert_eq!(got["totals"], want["totals"]);
    fleet.probes.clear();
}

/// A GET with curl: the status and the body.
fn curl(url: &str) -> (u16, Vec<u8>) {
    crate::api::get(url, &[])
}

#[test]
fn coordinator_serves_the_fleet_query_series_and_each_probes_packets() {
    let fleet = Fleet::new();
    let file = fleet.probes_file("");
    let coordinator = Probe::start(&["--probes", &file]);
    // The query: what `trawl query --probes` answers.
    let (code, body) = curl(&format!(
        "{}/api/v1/query?attrs=talk_conv,probe&limit=0&condition=site%20%21%3D%20ams",
        coordinator.url
    ));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let api = json_of(&body);
    let cli = json_of(&trawl_ok(&[
        "query",
        "--probes",
        &file,
        "talk_conv,probe",
        "-n",
        "0",
        "--format",
        "json",
        "--condition",
        "site != ams",
    ]));
    assert!(!rows(&cli).is_empty());
    assert_eq!(rows(&api), rows(&cli));
    assert_eq!(api["totals"], cli["totals"]);
    assert_eq!(api["incomplete"], false);
    // The series per probe: every probe's rows, tagged with the probe.
    let (code, body) = curl(&format!(
        "{}/api/v1/series?step=1m&per=probe",
        coordinator.url
    ));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let series = json_of(&body);
    let mut want = 0;
    for ((name, _, _), p) in PROBES.iter().zip(&fleet.probes) {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--fail",
                "-H",
                &format!("Authorization: Bearer {TOKEN}"),
            ])
            .arg(format!("{}/api/v1/series?step=1m", p.url))
            .output()
            .unwrap();
        let own = json_of(&out.stdout);
        let n = own["rows"].as_array().unwrap().len();
        let tagged = series["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["probe"] == *name)
            .count();
        assert_eq!(tagged, n, "{name}");
        want += n;
    }
    assert!(want > 0, "no stored series: nothing compared");
    assert_eq!(series["rows"].as_array().unwrap().len(), want);
    fleet_series_is_the_sum_of_the_probes_series(&fleet);
    // Packets: byte for byte what `trawl packets` writes on the probe.
    let dir = tempfile::tempdir().unwrap();
    for (name, query, flags) in [
        ("ams1", "", &[][..]),
        (
            "fra1",
            "&filter=tcp%20port%2080&format=pcapng",
            &["-f", "tcp port 80", "--format", "pcapng"][..],
        ),
    ] {
        let (code, api) = curl(&format!(
            "{}/api/v1/packets?probe={name}{query}",
            coordinator.url
        ));
        assert_eq!(code, 200, "{name}: {}", String::from_utf8_lossy(&api));
        let out = dir.path().join(format!("{name}.cap"));
        let pk = fleet.dir.path().join(format!("{name}-packets"));
        let mut args = vec![
            "packets",
            "-r",
            pk.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
            "--summary",
            "none",
        ];
        args.extend_from_slice(flags);
        trawl_ok(&args);
        let cli = std::fs::read(&out).unwrap();
        assert!(
            cli.len() > 100,
            "{name}: no packet written, nothing compared"
        );
        assert!(
            api == cli,
            "{name}: {} bytes through the coordinator, {} from trawl packets",
            api.len(),
            cli.len()
        );
    }
    let (code, body) = curl(&format!("{}/api/v1/packets?probe=nowhere", coordinator.url));
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
}

/// A network namespace for one probe, joined to the test's namespace by a veth pair whose
/// probe end can be made slow (`slow`: a token bucket at a given rate), so that a probe's
/// answer takes seconds to stream and the probe can be killed while it is sending it. The
/// kernel holds little of an answer there (576-byte packets, one per send, a 4 KiB send
/// buffer, at most one unsent packet queued, a congestion window of two packets): the rest is
/// still in the probe when it dies, and is never sent. Addresses are a /30 of 198.18.0.0/15 (RFC 2544) chosen by process id; the
/// namespace and both veth ends go on drop.
struct SlowLink {
    ns: String,
    probe_if: String,
    probe_ip: String,
    host_ip: String,
}

impl SlowLink {
    fn new() -> SlowLink {
        let id = std::process::id() % 16_384;
        let ns = format!("trawl-fleet{id}");
        let (host_if, probe_if) = (format!("tfh{id}"), format!("tfp{id}"));
        let net = format!("198.18.{}.{}", id / 64, (id % 64) * 4);
        let at = |n: u32| {
            let (head, last) = net.rsplit_once('.').unwrap();
            format!("{head}.{}", last.parse::<u32>().unwrap() + n)
        };
        let (host_ip, probe_ip) = (at(1), at(2));
        run_ok("ip", &["netns", "add", &ns]);
        let link = SlowLink {
            ns,
            probe_if,
            probe_ip,
            host_ip,
        };
        let ns = link.ns.as_str();
        run_ok(
            "ip",
            &[
                "link",
                "add",
                &host_if,
                "type",
                "veth",
                "peer",
                "name",
                &link.probe_if,
                "netns",
                ns,
            ],
        );
        run_ok(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/30", link.host_ip),
                "dev",
                &host_if,
            ],
        );
        run_ok("ip", &["link", "set", &host_if, "mtu", "576", "up"]);
        let probe_addr = format!("{}/30", link.probe_ip);
        run_ok(
            "ip",
            &["-n", ns, "addr", "add", &probe_addr, "dev", &link.probe_if],
        );
        let probe_if = link.probe_if.as_str();
        run_ok(
            "ip",
            &[
                "-n",
                ns,
                "link",
                "set",
                probe_if,
                "mtu",
                "576",
                "gso_max_segs",
                "1",
                "up",
            ],
        );
        run_ok("ip", &["-n", ns, "link", "set", "lo", "up"]);
        // Before the probe's listening socket exists: its connections inherit these.
        for setting in [
            "net.ipv4.tcp_wmem=4096 4096 4096",
            "net.ipv4.tcp_notsent_lowat=1",
            "net.ipv4.tcp_congestion_control=reno",
        ] {
            run_ok("ip", &["netns", "exec", ns, "sysctl", "-qw", setting]);
        }
        link
    }

    /// `trawl serve ARGS` in the namespace, on the probe's address.
    fn serve(&self, args: &[&str]) -> Probe {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_trawl")])
            .args(["serve", "--api", &format!("{}:0", self.probe_ip)])
            .args(args);
        Probe::spawn(cmd)
    }

    /// From now on the probe sends at `kbit` kbit/s, two packets in flight at most.
    fn slow(&self, kbit: u64) {
        let ns = self.ns.as_str();
        let host = format!("{}/32", self.host_ip);
        let route = ["-n", ns, "route", "add", &host, "dev", &self.probe_if];
        run_ok("ip", &[&route[..], &["cwnd", "lock", "2"]].concat());
        run_ok(
            "tc",
            &[
                "-n",
                ns,
                "qdisc",
                "add",
                "dev",
                &self.probe_if,
                "root",
                "tbf",
                "rate",
                &format!("{kbit}kbit"),
                "burst",
                "1600",
                "limit",
                "1200",
            ],
        );
    }

    /// Bytes the probe has sent that the other end acknowledged, over its TCP connections.
    fn bytes_acked(&self) -> u64 {
        let out = Command::new("ss")
            .args(["-N", &self.ns, "-tniH", "state", "established"])
            .output()
            .expect("ss (iproute2)");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("bytes_acked:"))
            .filter_map(|n| n.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn run_ok(program: &str, args: &[&str]) {
    let s = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(s.success(), "{program} {args:?}");
}

/// Issue 21: a probe that is a real process, SIGKILLed while it streams its answer (its link
/// slowed so the answer takes seconds), is marked with what happened to its answer (truncated
/// or reset, after how many bytes), the answer comes at once rather than at the timeout, and
/// its rows are the merge of the probes that answered.
#[test]
fn fleet_query_marks_a_probe_killed_while_answering() {
    const ATTRS: &str = "sip,dip,sport,dport,proto";
    let fleet = Fleet::new();
    // The victim's database: the fleet's captures and two larger ones, so that its answer is
    // larger than the link's kernel buffers hold (the binary answer of the fleet's own data
    // alone is 5.5-6.5 kB, and copies of it under other names compress away).
    let victim_db = fleet.dir.path().join("victim-db");
    let captures = PROBES
        .iter()
        .map(|(_, _, c)| *c)
        .chain(["pcaps/android.pcap", "pcaps/fuzz-2006-06-26-2594.pcap"]);
    for capture in captures {
        trawl_ok(&[
            "ingest",
            "-r",
            &testdata(capture),
            "--db",
            victim_db.to_str().unwrap(),
            "-i",
            "victim",
            "--no-synflood",
            "--no-heavy-hitters",
            "--summary",
            "none",
        ]);
    }
    let link = SlowLink::new();
    let token_file = fleet.dir.path().join("token");
    let mut victim = link.serve(&[
        "--db",
        victim_db.to_str().unwrap(),
        "--api-token-file",
        token_file.to_str().unwrap(),
    ]);
    // The answer's size, asked over the link while it is still fast.
    let size = partial_bytes(&victim.url, ATTRS).len() as u64;
    // The kernel's buffers (send buffer and queue) hold about 5 kB: a smaller answer could be
    // in them whole before the kill, and arrive complete.
    assert!(size > 7_000, "the killed probe's answer is {size} bytes");
    // About 4 s for the whole answer: the kill comes in its first 10%.
    link.slow((size * 8 / 4 / 1000).max(8));
    let file = fleet.probes_file(&format!(
        "[[probe]]\nname = \"victim\"\nurl = \"{}\"\ntoken_file = \"token\"\n",
        victim.url
    ));
    let started = Instant::now();
    let query = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["query", "--probes", &file, ATTRS, "-n", "0"])
        .args(["--format", "json", "--probe-timeout", "20s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The victim has begun its answer (its head and some of the body are through).
    while link.bytes_acked() < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the victim never began to answer"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    let out = query.wait_with_output().unwrap();
    let after_kill = killed.elapsed().as_secs_f64();
    assert_eq!(
        out.status.code(),
        Some(1),
        "incomplete: exit 1; {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What the kernel held of the answer drains in 1 to 3 s; the timeout is 20 s.
    assert!(
        after_kill < 5.0,
        "the answer came {after_kill:.1} s after the kill"
    );
    let got = json_of(&out.stdout);
    assert_eq!(got["incomplete"], true);
    let probes = got["probes"].as_array().unwrap();
    let victim_report = probes.iter().find(|p| p["name"] == "victim").unwrap();
    assert_eq!(victim_report["status"], "error", "{victim_report}");
    let message = victim_report["message"].as_str().unwrap();
    let received: u64 = [
        "truncated answer: the connection closed after ",
        "connection reset after ",
    ]
    .iter()
    .find_map(|m| message.strip_prefix(m))
    .and_then(|rest| rest.split_whitespace().next())
    .and_then(|n| n.parse().ok())
    .unwrap_or_else(|| {
        panic!("the victim's message says neither truncated nor reset: {message:?}")
    });
    assert!(
        received < size,
        "{received} of {size} bytes came: the answer was not cut ({message})"
    );
    for p in probes.iter().filter(|p| p["name"] != "victim") {
        assert_eq!(p["status"], "ok", "{p}");
    }
    // The rows are the five others' (the one database holds exactly them).
    let want = json_of(&trawl_ok(&[
        "query",
        "-d",
        &fleet.all(),
        ATTRS,
        "-n",
        "0",
        "--format",
        "json",
    ]));
    assert!(!rows(&want).is_empty());
    assert_eq!(rows(&got), rows(&want));
    assert_eq!(got["totals"], want["totals"]);
    drop(link);
}

/// A probe's own `/api/v1/series?QUERY` rows.
fn own_series(url: &str, query: &str) -> Vec<Value> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "-H"])
        .arg(format!("Authorization: Bearer {TOKEN}"))
        .arg(format!("{url}/api/v1/series?{query}"))
        .output()
        .expect("curl (scripts/deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out.stdout)["rows"].as_array().unwrap().clone()
}

/// The counters a fleet series sums.
const SERIES_COUNTERS: [&str; 8] = [
    "packets",
    "bytes",
    "active_flows",
    "new_flows",
    "in_packets",
    "in_bytes",
    "out_packets",
    "out_bytes",
];

/// Rows of probes summed by second, as the coordinator must: per second, every counter summed
/// over the probes' rows (all interfaces) and the number of probes with a row then.
fn summed_by_second(probes: &[Vec<Value>]) -> Vec<Value> {
    let mut by_second: std::collections::BTreeMap<u64, (Vec<u64>, usize)> = Default::default();
    for rows in probes {
        let mut seen = std::collections::BTreeSet::new();
        for r in rows {
            let second = r["second"].as_u64().unwrap();
            let (sums, n) = by_second
                .entry(second)
                .or_insert_with(|| (vec![0; SERIES_COUNTERS.len()], 0));
            for (sum, c) in sums.iter_mut().zip(SERIES_COUNTERS) {
                *sum += r[c].as_u64().unwrap();
            }
            if seen.insert(second) {
                *n += 1;
            }
        }
    }
    by_second
        .into_iter()
        .map(|(second, (sums, n))| {
            let mut row = serde_json::json!({"iface": "all", "second": second, "probes_summed": n});
            for (sum, c) in sums.into_iter().zip(SERIES_COUNTERS) {
                row[c] = serde_json::json!(sum);
            }
            row
        })
        .collect()
}

/// Issue 21: the coordinator's `/api/v1/series` is by default the probes' series summed by
/// second (`probe=` narrows it to some probes), and a probe missing from the sum marks it.
/// A sixth probe serving the one database of all five shares every second with one of them,
/// so seconds of several probes are summed too.
fn fleet_series_is_the_sum_of_the_probes_series(fleet: &Fleet) {
    let token_file = fleet.dir.path().join("token");
    let twin = Probe::serve(Path::new(&fleet.all()), None, &token_file);
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let file = fleet.probes_file(&format!(
        "[[probe]]\nname = \"twin\"\nurl = \"{}\"\ntoken_file = \"token\"\n\n\
         [[probe]]\nname = \"dead\"\nurl = \"http://{dead}\"\n",
        twin.url
    ));
    let coordinator = Probe::start(&["--probes", &file]);
    let query = "step=1m";
    let mut own: Vec<(&str, Vec<Value>)> = PROBES
        .iter()
        .zip(&fleet.probes)
        .map(|((name, _, _), p)| (*name, own_series(&p.url, query)))
        .collect();
    own.push(("twin", own_series(&twin.url, query)));
    let get = |extra: &str| {
        let (code, body) = curl(&format!("{}/api/v1/series?{query}{extra}", coordinator.url));
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        json_of(&body)
    };
    let all = get("");
    let want = summed_by_second(&own.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>());
    assert!(
        want.iter().any(|r| r["probes_summed"].as_u64() > Some(1)),
        "no second of two probes: nothing summed"
    );
    assert_eq!(all["rows"].as_array().unwrap(), &want);
    assert_eq!(all["incomplete"], true, "the dead probe is missing");
    let dead_report = all["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "dead")
        .unwrap();
    assert_eq!(dead_report["status"], "refused", "{dead_report}");
    // Some probes: their sum, complete (the others are not asked).
    let some = get("&probe=fra1,twin");
    let chosen: Vec<Vec<Value>> = own
        .iter()
        .filter(|(n, _)| ["fra1", "twin"].contains(n))
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(some["rows"].as_array().unwrap(), &summed_by_second(&chosen));
    assert_eq!(some["incomplete"], false, "{some}");
    let (code, body) = curl(&format!("{}/api/v1/series?probe=nowhere", coordinator.url));
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
}

/// `trawl ingest` of `capture` into `db` under interface `iface`.
fn ingest(capture: &str, db: &Path, iface: &str) {
    trawl_ok(&[
        "ingest",
        "-r",
        &testdata(capture),
        "--db",
        db.to_str().unwrap(),
        "-i",
        iface,
        "--summary",
        "none",
    ]);
}

/// Issue 21: two probes tagged as a pair (the same link) count its flows once: with both
/// holding the same database the answer is one's; with one of them down it is the other's,
/// marked incomplete with the missing member named. A probe outside the pair still adds.
#[test]
fn fleet_query_counts_a_paired_link_once() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (link, other, all) = (
        dir.path().join("link"),
        dir.path().join("other"),
        dir.path().join("all"),
    );
    // The pair's name is the `probe` value of its groups: `iface` in the one database.
    ingest("oracle/many-protocols.pcap.gz", &link, "tap");
    ingest("oracle/many-protocols.pcap.gz", &all, "tap");
    ingest("pcaps/android.pcap", &other, "ams1");
    ingest("pcaps/android.pcap", &all, "ams1");
    let east = Probe::serve(&link, None, &token_file);
    let west = Probe::serve(&link, None, &token_file);
    let ams1 = Probe::serve(&other, None, &token_file);
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let file = |west_url: &str| {
        let text = format!(
            "[[probe]]\nname = \"east\"\nurl = \"{}\"\ntoken_file = \"token\"\npair = \"tap\"\n\n\
             [[probe]]\nname = \"west\"\nurl = \"{west_url}\"\ntoken_file = \"token\"\npair = \"tap\"\n\n\
             [[probe]]\nname = \"ams1\"\nurl = \"{}\"\ntoken_file = \"token\"\n",
            east.url, ams1.url
        );
        let path = dir.path().join("probes.toml");
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let all = all.to_string_lossy().into_owned();
    let cases: &[Case] = &[
        (&["talk_conv", "-n", "0"], &["talk_conv", "-n", "0"]),
        (
            &["probe,dport", "-n", "0", "-s", "packets"],
            &["iface,dport", "-n", "0", "-s", "packets"],
        ),
        (
            &["time,probe", "--resolution", "5m", "-n", "0", "-s", "time"],
            &["time,iface", "--resolution", "5m", "-n", "0", "-s", "time"],
        ),
    ];
    for (west_url, incomplete) in [(west.url.clone(), false), (format!("http://{dead}"), true)] {
        let probes = file(&west_url);
        for (fleet_flags, local_flags) in cases {
            let mut args = vec!["query", "--probes", &probes, "--format", "json"];
            args.extend_from_slice(fleet_flags);
            let out = trawl(&args);
            assert_eq!(
                out.status.code(),
                Some(i32::from(incomplete)),
                "{fleet_flags:?}"
            );
            let got = json_of(&out.stdout);
            let mut args = vec!["query", "-d", &all, "--format", "json"];
            args.extend_from_slice(local_flags);
            let want = json_of(&trawl_ok(&args));
            let (mut g, mut w) = (rows(&got), rows(&want));
            assert!(!w.is_empty(), "{fleet_flags:?}: no rows, nothing compared");
            let key = |r: &Value| r.to_string();
            g.sort_by_key(key);
            w.sort_by_key(key);
            assert_eq!(g, w, "{fleet_flags:?}, west at {west_url}");
            assert_eq!(got["totals"], want["totals"], "{fleet_flags:?}");
            assert_eq!(got["incomplete"], incomplete, "{got}");
            let west_report = got["probes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "west")
                .unwrap();
            assert_eq!(west_report["pair"], "tap");
            let status = if incomplete { "refused" } else { "ok" };
            assert_eq!(west_report["status"], status, "{west_report}");
        }
    }
    // A pair of one is refused before any probe is asked.
    let lonely = dir.path().join("lonely.toml");
    std::fs::write(
        &lonely,
        format!(
            "[[probe]]\nname = \"east\"\nurl = \"{}\"\npair = \"tap\"\n",
            east.url
        ),
    )
    .unwrap();
    let out = trawl(&["query", "--probes", lonely.to_str().unwrap(), "dport"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has one probe"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fake probe that reads a request, waits `delay`, then writes `answer` (each connection).
fn late_probe(answer: Vec<u8>, delay: Duration) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                if read_head(&mut s).is_some() {
                    std::thread::sleep(delay);
                    let _ = s.write_all(&answer);
                }
            });
        }
    });
    format!("http://{addr}")
}

/// The events of an SSE stream as they come: (name, data, when it came).
fn sse_events(url: &str) -> Vec<(String, Value, Instant)> {
    let mut curl = Command::new("curl")
        .args(["-sSN", "--max-time", "60", url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl (scripts/deps.sh installs it)");
    let mut events = Vec::new();
    let mut name = String::new();
    for line in BufReader::new(curl.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            events.push((name.clone(), json_of(d.as_bytes()), Instant::now()));
        }
    }
    assert!(curl.wait().unwrap().success(), "curl {url}");
    events
}

/// Issue 21: the coordinator streams a fleet query (SSE): a `probe` and a `partial` event per
/// probe in the order they answer (a probe 2.5 s slower than the others comes last, and what
/// came before it came before it answered), then a `result` equal to `/api/v1/query`'s answer.
#[test]
fn coordinator_streams_the_fleet_query_as_probes_answer() {
    const DELAY: Duration = Duration::from_millis(2500);
    let fleet = Fleet::new();
    let real = partial_bytes(&fleet.probes[0].url, "dport");
    let late = late_probe(http_200(&real, real.len()), DELAY);
    let file = fleet.probes_file(&format!("[[probe]]\nname = \"late\"\nurl = \"{late}\"\n"));
    let coordinator = Probe::start(&["--probes", &file]);
    let query = "attrs=dport&limit=5&sort=packets";
    let events = sse_events(&format!("{}/api/v1/query/stream?{query}", coordinator.url));
    let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    let mut want = ["probe", "partial"].repeat(6);
    want.push("result");
    assert_eq!(names, want);
    let probes: Vec<&Value> = events
        .iter()
        .filter(|e| e.0 == "probe")
        .map(|e| &e.1)
        .collect();
    assert_eq!(probes[5]["name"], "late", "the slow probe comes last");
    assert!(probes.iter().all(|p| p["status"] == "ok"), "{probes:?}");
    // Streamed, not gathered: the fast probes' events came well before the slow one answered.
    let (first, result) = (events[0].2, events[12].2);
    assert!(
        result.duration_since(first) > DELAY / 2,
        "the first event came {:?} before the result",
        result.duration_since(first)
    );
    // Each partial answer holds one more probe's outcome; the ones not in yet are pending.
    for (k, e) in events.iter().filter(|e| e.0 == "partial").enumerate() {
        let reports = e.1["probes"].as_array().unwrap();
        let pending = reports.iter().filter(|p| p["status"] == "pending").count();
        assert_eq!(pending, 5 - k, "{}", e.1);
        assert_eq!(e.1["incomplete"], k < 5);
        assert!(e.1["rows"].as_array().unwrap().len() <= 5);
    }
    // The last partial and the result are the one-shot answer.
    let (code, body) = curl(&format!("{}/api/v1/query?{query}", coordinator.url));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let once = json_of(&body);
    let status = |v: &Value| -> Vec<(Value, Value)> {
        v["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["name"].clone(), p["status"].clone()))
            .collect()
    };
    for streamed in [&events[11].1, &events[12].1] {
        // Every probe answered both times (else the rows differ for that reason).
        assert_eq!(status(streamed), status(&once), "{streamed}\n{once}");
        assert!(!rows(&once).is_empty());
        assert_eq!(rows(streamed), rows(&once), "{streamed}\n{once}");
        assert_eq!(streamed["totals"], once["totals"]);
        assert_eq!(streamed["incomplete"], false);
    }
    // A bad parameter is a 400 before any event.
    let (code, _) = curl(&format!(
        "{}/api/v1/query/stream?attrs=nope",
        coordinator.url
    ));
    assert_eq!(code, 400);
}

/// Issue 21: the coordinator asks probes over HTTP/2 (h2c, by prior knowledge) and a probe
/// that speaks only HTTP/1.1 (an older trawl, or a proxy before it) over HTTP/1.1 on a new
/// connection; each report names the version, and both answers are merged. The probe API
/// answers both versions (curl, an independent client).
#[test]
fn fleet_asks_over_http2_and_an_http1_only_probe_over_http1() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let db = dir.path().join("db");
    ingest(PROBES[0].2, &db, "new");
    let probe = Probe::serve(&db, None, &token_file);
    for (flag, version) in [("--http1.1", "1.1"), ("--http2-prior-knowledge", "2")] {
        let out = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{http_code}",
            ])
            .args([flag, "-H", &format!("Authorization: Bearer {TOKEN}")])
            .arg(format!("{}/api/v1/partial?attrs=dport", probe.url))
            .output()
            .expect("curl (scripts/deps.sh installs it)");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{version} 200"),
            "curl {flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let real = partial_bytes(&probe.url, "dport");
    let old = fake_probe(http_200(&real, real.len()));
    let file = dir.path().join("probes.toml");
    std::fs::write(
        &file,
        format!(
            "[[probe]]\nname = \"new\"\nurl = \"{}\"\ntoken_file = \"token\"\n\n\
             [[probe]]\nname = \"old\"\nurl = \"{old}\"\n",
            probe.url
        ),
    )
    .unwrap();
    let got = json_of(&trawl_ok(&[
        "query",
        "--probes",
        file.to_str().unwrap(),
        "dport,probe",
        "-n",
        "0",
        "--format",
        "json",
    ]));
    let reports: Vec<(String, String, String)> = got["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
            (s("name"), s("status"), s("protocol"))
        })
        .collect();
    assert_eq!(
        reports,
        [
            ("new".into(), "ok".into(), "h2".into()),
            ("old".into(), "ok".into(), "http/1.1".into())
        ],
        "{}",
        got["probes"]
    );
    // Each probe's rows are the probe's own database's (the old one answered with them too).
    let local = rows(&json_of(&trawl_ok(&[
        "query",
        "-d",
        db.to_str().unwrap(),
        "dport,iface",
        "-n",
        "0",
        "--format",
        "json",
    ])));
    assert!(!local.is_empty());
    let sorted = |mut v: Vec<Value>| {
        v.sort_by_key(|r| r.to_string());
        v
    };
    for name in ["new", "old"] {
        let of_probe: Vec<Value> = rows(&got)
            .into_iter()
            .filter(|r| r["probe"] == name)
            .collect();
        let want: Vec<Value> = local
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r["probe"] = name.into();
                r
            })
            .collect();
        assert_eq!(sorted(of_probe), sorted(want), "{name}");
    }
}

/// The local ports of the established connections to `url`'s port (on loopback: the
/// coordinator's client side; the probe's own accepted side has the port as its source).
fn connections_to(url: &str) -> Vec<String> {
    let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
    let out = Command::new("ss")
        .args(["-Htn", "state", "established"])
        .arg(format!("( dport = :{port} )"))
        .output()
        .expect("ss (iproute2)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut local: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    local.sort();
    local
}

/// Issue 21: a coordinator keeps one HTTP/2 connection per probe between queries (the console
/// asks many) instead of one per probe and query; a probe restarted in between (its kept
/// connection closed) is asked on a new connection, not reported failed.
#[test]
fn coordinator_keeps_one_connection_per_probe_and_replaces_a_closed_one() {
    let mut fleet = Fleet::new();
    let file = fleet.probes_file("");
    let coordinator = Probe::start(&["--probes", &file]);
    let query = format!("{}/api/v1/query?attrs=dport&limit=10", coordinator.url);
    let ask = || {
        let (code, body) = curl(&query);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let doc = json_of(&body);
        assert_eq!(doc["incomplete"], false, "{doc}");
        for p in doc["probes"].as_array().unwrap() {
            assert_eq!(p["status"], "ok", "{p}");
            assert_eq!(p["protocol"], "h2", "{p}");
        }
        doc
    };
    let first = ask();
    let kept: Vec<Vec<String>> = fleet
        .probes
        .iter()
        .map(|p| connections_to(&p.url))
        .collect();
    for (k, (name, _, _)) in kept.iter().zip(PROBES) {
        assert_eq!(k.len(), 1, "{name}: one connection after a query: {k:?}");
    }
    let second = ask();
    assert_eq!(rows(&second), rows(&first));
    for (p, k) in fleet.probes.iter().zip(&kept) {
        assert_eq!(
            &connections_to(&p.url),
            k,
            "the same connection, asked again"
        );
    }
    // The first probe restarts on its address: the coordinator's connection to it is closed.
    let addr = fleet.probes[0]
        .url
        .trim_start_matches("http://")
        .to_string();
    drop(fleet.probes.remove(0));
    let dir = fleet.dir.path();
    let name = PROBES[0].0;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.args(["serve", "--api", &addr, "--db"])
        .arg(dir.join(name))
        .arg("--packets")
        .arg(dir.join(format!("{name}-packets")))
        .arg("--api-token-file")
        .arg(dir.join("token"));
    let restarted = Probe::spawn(cmd);
    assert_eq!(restarted.url, format!("http://{addr}"));
    let third = ask();
    assert_eq!(rows(&third), rows(&first));
    let now = connections_to(&restarted.url);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, kept[0], "a new connection to the restarted probe");
}
