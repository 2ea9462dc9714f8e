//! The HTTP API (`trawl serve`, `trawl run --api`) over real sockets, with curl as the client:
//! every endpoint against the CLI's answer on the same stores (query rows, packets byte for
//! byte, live series), `/metrics` read by the Prometheus project's own Python parser and its
//! counters checked against the run's summary, 400/401/404, and the token and TLS off
//! loopback inside a network namespace.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn trawl_ok(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl");
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

/// A trawl process serving the API, its standard error collected as it comes.
pub(crate) struct Served {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Starts `trawl args` and waits for the line naming its address (`marker` then
    /// `ADDR:PORT`); `scheme` goes in front of it.
    fn start(args: &[&str], marker: &str, scheme: &str) -> Served {
        Served::start_with(
            Command::new(env!("CARGO_BIN_EXE_trawl")).args(args),
            marker,
            scheme,
        )
    }

    pub(crate) fn start_with(cmd: &mut Command, marker: &str, scheme: &str) -> Served {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run trawl");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = stderr.lock().unwrap().clone();
            if let Some(at) = text.find(marker) {
                let addr: String = text[at + marker.len()..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                return Served {
                    child,
                    base: format!("{scheme}{addr}"),
                    stderr,
                    reader: Some(reader),
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("trawl ended ({status}) before serving: {text}");
            }
            assert!(Instant::now() < deadline, "trawl did not serve: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGINT, then the exit status and standard error.
    pub(crate) fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let text = self.stderr.lock().unwrap().clone();
        (status, text)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET with curl (`extra`: headers, CA file): the status and the body.
pub(crate) fn get(url: &str, extra: &[&str]) -> (u16, Vec<u8>) {
    get_in(Command::new("curl"), url, extra)
}

fn get_in(mut cmd: Command, url: &str, extra: &[&str]) -> (u16, Vec<u8>) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let out = cmd
        .args(["-sS", "--max-time", "60", "-o"])
        .arg(body.path())
        .args(["-w", "%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl (scripts/deps.sh installs it)");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(
        code != 0,
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, std::fs::read(body.path()).unwrap())
}

pub(crate) fn get_json(url: &str) -> serde_json::Value {
    let (code, body) = get(url, &[]);
    assert_eq!(code, 200, "{url}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{url}: not JSON: {e}"))
}

/// A query answer without what differs between two runs of the same query (its duration).
fn without_duration(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(s) = v.get_mut("stats").and_then(|s| s.as_object_mut()) {
        s.remove("duration_ms");
    }
    v
}

/// A flow database of two interfaces and a packet store of two link types, from testdata
/// captures.
struct Stores {
    dir: tempfile::TempDir,
}

impl Stores {
    fn new() -> Stores {
        let dir = tempfile::tempdir().unwrap();
        let s = Stores { dir };
        let db = s.db();
        let pk = s.packets();
        for (file, iface) in [
            ("oracle/many-protocols.pcap.gz", "lan"),
            ("pcaps/android.pcap", "wlan"),
        ] {
            trawl_ok(&[
                "ingest",
                "-r",
                &testdata(file),
                "--db",
                &db,
                "-i",
                iface,
                "--summary",
                "none",
                // The alarms the tests check are their own.
                "--no-synflood",
                "--no-heavy-hitters",
            ]);
        }
        for (file, iface) in [
            ("pcaps/android.pcap", "eth"),
            ("pcaps/LINKTYPE_IPV4.pcap", "raw"),
        ] {
            trawl_ok(&[
                "dump",
                "-r",
                &testdata(file),
                "-w",
                &pk,
                "-i",
                iface,
                "--summary",
                "none",
            ]);
        }
        s
    }

    fn db(&self) -> String {
        self.dir.path().join("db").to_string_lossy().into_owned()
    }

    fn packets(&self) -> String {
        self.dir.path().join("pk").to_string_lossy().into_owned()
    }

    fn serve(&self, extra: &[&str]) -> Served {
        let (db, pk) = (self.db(), self.packets());
        let mut args = vec![
            "serve",
            "--db",
            &db,
            "--packets",
            &pk,
            "--api",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        Served::start(&args, "serving on http://", "http://")
    }
}

/// `%`-encodes a query-string value.
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// API parameters, and the flags of the same `trawl query`.
type QueryCase<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn api_query_answers_what_trawl_query_answers() {
    let stores = Stores::new();
    let served = stores.serve(&[]);
    let db = stores.db();
    // (API parameters, the same query's flags)
    let cases: [QueryCase; 6] = [
        (&[], &[]),
        (
            &[("attrs", "sip,dip"), ("limit", "0")],
            &["sip,dip", "-n", "0"],
        ),
        (
            &[
                ("attrs", "dport,proto"),
                ("condition", "proto = udp or dport = 443"),
                ("sort", "packets"),
            ],
            &[
                "dport,proto",
                "--condition",
                "proto = udp or dport = 443",
                "-s",
                "packets",
            ],
        ),
        (
            &[("attrs", "iface"), ("iface", "wlan")],
            &["iface", "-i", "wlan"],
        ),
        (
            &[
                ("attrs", "time,iface"),
                ("from", "2000-01-01T00:00:00Z"),
                ("to", "2100-01-01T00:00:00Z"),
                ("limit", "5"),
            ],
            &[
                "time,iface",
                "--from",
                "2000-01-01T00:00:00Z",
                "--to",
                "2100-01-01T00:00:00Z",
                "-n",
                "5",
            ],
        ),
        (
            &[
                ("attrs", "sip"),
                ("condition", "dport = 53"),
                ("sort", "flows"),
            ],
            &["sip", "--condition", "dport = 53", "-s", "flows"],
        ),
    ];
    for (params, flags) in cases {
        let qs: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", enc(v)))
            .collect();
        let api = get_json(&served.url(&format!("/api/v1/query?{}", qs.join("&"))));
        let mut args = vec!["query", "-d", &db, "--format", "json"];
        args.extend_from_slice(flags);
        let cli: serde_json::Value = serde_json::from_slice(&trawl_ok(&args)).unwrap();
        assert!(
            !api["rows"].as_array().unwrap().is_empty(),
            "{params:?}: no rows, the comparison would prove nothing"
        );
        assert_eq!(without_duration(api), without_duration(cli), "{params:?}");
    }
}

#[test]
fn api_packets_are_byte_identical_to_trawl_packets() {
    let stores = Stores::new();
    let served = stores.serve(&[]);
    let pk = stores.packets();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 5] = [
        ("iface=eth", &["-i", "eth"]),
        (
            "iface=eth&filter=tcp%20port%20443",
            &["-i", "eth", "-f", "tcp port 443"],
        ),
        ("format=pcapng", &["--format", "pcapng"]),
        (
            "iface=raw&format=pcapng&count=3",
            &["-i", "raw", "--format", "pcapng", "--count", "3"],
        ),
        (
            "iface=eth&from=2020-02-23T00:00:00Z&to=2020-02-23T23:00:00Z&filter=udp",
            &[
                "-i",
                "eth",
                "--from",
                "2020-02-23T00:00:00Z",
                "--to",
                "2020-02-23T23:00:00Z",
                "-f",
                "udp",
            ],
        ),
    ];
    for (i, (query, flags)) in cases.iter().enumerate() {
        let (code, api) = get(&served.url(&format!("/api/v1/packets?{query}")), &[]);
        assert_eq!(code, 200, "{query}: {}", String::from_utf8_lossy(&api));
        let file = dir.path().join(format!("{i}.cap"));
        let file = file.to_str().unwrap();
        let mut args = vec!["packets", "-r", &pk, "-w", file, "--summary", "none"];
        args.extend_from_slice(flags);
        trawl_ok(&args);
        let cli = std::fs::read(file).unwrap();
        assert!(
            cli.len() > 100,
            "{query}: the CLI wrote no packet, nothing compared"
        );
        assert!(
            api == cli,
            "{query}: {} bytes from the API, {} from trawl packets",
            api.len(),
            cli.len()
        );
    }
    // Mixed link types asked as pcap: refused before the answer starts, naming `format`.
    let (code, body) = get(&served.url("/api/v1/packets?format=pcap"), &[]);
    assert_eq!(code, 400);
    let e: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(e["parameter"], "format", "{e}");
}

/// (URL path and query, the parameter the 400 must name)
const BAD: &[(&str, &str)] = &[
    ("/api/v1/query?condition=dport%20%3D%3D%20x", "condition"),
    ("/api/v1/query?attrs=nonsense", "attrs"),
    ("/api/v1/query?sort=size", "sort"),
    ("/api/v1/query?from=yesterdayish", "from"),
    (
        "/api/v1/query?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
        "to",
    ),
    ("/api/v1/query?iface=../../etc", "iface"),
    ("/api/v1/query?limit=-1", "limit"),
    ("/api/v1/query?resolution=1m", "resolution"),
    ("/api/v1/query?atrs=sip", "atrs"),
    ("/api/v1/packets?filter=tcp%20port%20http2x", "filter"),
    ("/api/v1/packets?format=pcapx", "format"),
    ("/api/v1/packets?iface=a/b", "iface"),
    ("/api/v1/series?step=7s", "step"),
    ("/api/v1/status?verbose=1", "verbose"),
];

#[test]
fn api_bad_parameters_are_400_naming_them_and_unknown_paths_404() {
    let stores = Stores::new();
    let served = stores.serve(&[]);
    for (path, parameter) in BAD {
        let (code, body) = get(&served.url(path), &[]);
        assert_eq!(code, 400, "{path}: {}", String::from_utf8_lossy(&body));
        let e: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(e["parameter"], *parameter, "{path}: {e}");
        assert!(
            e["error"].as_str().unwrap().contains(parameter),
            "{path}: {e}"
        );
    }
    // The condition's message is the query parser's, caret and all.
    let (_, body) = get(&served.url(BAD[0].0), &[]);
    let e: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("at character 10:\ndport == x\n"),
        "{e}"
    );
    // (`/` is the console since issue 20: api_serves_the_console_and_keeps_the_data_...)
    for path in [
        "/console/x",
        "/api/v1",
        "/api/v2/query",
        "/api/v1/query/../../etc/passwd",
        "/static/x",
    ] {
        assert_eq!(get(&served.url(path), &[]).0, 404, "{path}");
    }
    // Nothing writes or deletes.
    for method in ["POST", "PUT", "DELETE"] {
        let (code, _) = get(&served.url("/api/v1/query"), &["-X", method]);
        assert_eq!(code, 405, "{method}");
    }
    // No CORS: no Access-Control header, whatever the origin.
    let out = Command::new("curl")
        .args([
            "-sS",
            "-D",
            "-",
            "-o",
            "/dev/null",
            "-H",
            "Origin: http://evil.example",
        ])
        .arg(served.url("/api/v1/status"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("access-control"), "{head}");
    // An over-long request head is refused, not buffered.
    let long = format!("/api/v1/query?condition={}", "x".repeat(40_000));
    let (code, _) = get(&served.url(&long), &[]);
    assert!(matches!(code, 400 | 414 | 431), "{code}");
    // The OpenAPI document lists every endpoint this test used.
    let doc = get_json(&served.url("/api/v1/openapi.json"));
    for p in [
        "/api/v1/alarms",
        "/api/v1/alarms/stream",
        "/api/v1/query",
        "/api/v1/packets",
        "/api/v1/series",
        "/api/v1/status",
        "/metrics",
        "/healthz",
    ] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} missing from openapi.json"
        );
    }
    let (status, _) = served.stop();
    assert!(status.success());
}

#[test]
fn api_serves_no_store_it_was_not_given() {
    let stores = Stores::new();
    let db = stores.db();
    let served = Served::start(
        &["serve", "--db", &db, "--api", "127.0.0.1:0"],
        "serving on http://",
        "http://",
    );
    let (code, body) = get(&served.url("/api/v1/packets"), &[]);
    assert_eq!(code, 404, "{}", String::from_utf8_lossy(&body));
    assert_eq!(get(&served.url("/healthz"), &[]), (200, b"ok\n".to_vec()));
}

#[test]
fn api_off_loopback_needs_a_token_and_serves_tls() {
    let stores = Stores::new();
    let (db, pk) = (stores.db(), stores.packets());
    let lab = NsPair::new();
    let listen = "192.0.2.1:0";
    // Without a token file, an address off loopback is refused before anything is served.
    let out = lab
        .server()
        .args(["serve", "--db", &db, "--api", listen])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--api-token-file"));

    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let token = "s3cr3t-t0ken-of-32-characters-xx";
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let (cert, key) = self_signed(dir.path(), "192.0.2.1");
    let served = Served::start_with(
        lab.server().args([
            "serve",
            "--db",
            &db,
            "--packets",
            &pk,
            "--api",
            listen,
            "--api-token-file",
            token_file.to_str().unwrap(),
            "--api-tls-cert",
            &cert,
            "--api-tls-key",
            &key,
        ]),
        "serving on https://",
        "https://",
    );
    let in_ns = || {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &lab.client, "curl"]);
        c
    };
    let ca = ["--cacert", cert.as_str()];
    let bearer = format!("Authorization: Bearer {token}");
    let wrong = format!("Authorization: Bearer {}", token.replace('x', "y"));
    for path in [
        "/healthz",
        "/api/v1/status",
        "/metrics",
        "/api/v1/query",
        "/nope",
    ] {
        let url = served.url(path);
        assert_eq!(get_in(in_ns(), &url, &ca).0, 401, "{path} without a token");
        assert_eq!(
            get_in(in_ns(), &url, &[&ca[..], &["-H", &wrong]].concat()).0,
            401,
            "{path}"
        );
    }
    let (code, body) = get_in(
        in_ns(),
        &served.url("/api/v1/query?attrs=iface"),
        &[&ca[..], &["-H", &bearer]].concat(),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let api: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let cli: serde_json::Value = serde_json::from_slice(&trawl_ok(&[
        "query", "iface", "-d", &db, "--format", "json",
    ]))
    .unwrap();
    assert_eq!(without_duration(api), without_duration(cli));
    // Plain HTTP to the TLS port is no way around it.
    let plain = served.url("/healthz").replace("https://", "http://");
    let out = in_ns()
        .args(["-sS", "--max-time", "5", "-H", &bearer, &plain])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ok"));
    let (status, _) = served.stop();
    assert!(status.success());
}

/// Two fresh network namespaces joined by a veth pair: the server at 192.0.2.1 in one, the
/// client at 192.0.2.2 in the other (TEST-NET-1, on the test's own wire), torn down on drop.
struct NsPair {
    server: String,
    client: String,
}

impl NsPair {
    fn new() -> NsPair {
        let id = format!("{}", std::process::id() % 100_000);
        let pair = NsPair {
            server: format!("trawl-api-s{id}"),
            client: format!("trawl-api-c{id}"),
        };
        let ip = |args: &[&str]| {
            let s = Command::new("ip")
                .args(args)
                .status()
                .expect("ip (iproute2)");
            assert!(s.success(), "ip {args:?}");
        };
        ip(&["netns", "add", &pair.server]);
        ip(&["netns", "add", &pair.client]);
        let (a, b) = (format!("tas{id}"), format!("tac{id}"));
        ip(&[
            "link",
            "add",
            &a,
            "netns",
            &pair.server,
            "type",
            "veth",
            "peer",
            "name",
            &b,
            "netns",
            &pair.client,
        ]);
        ip(&["-n", &pair.server, "addr", "add", "192.0.2.1/24", "dev", &a]);
        ip(&["-n", &pair.server, "link", "set", &a, "up"]);
        ip(&["-n", &pair.client, "addr", "add", "192.0.2.2/24", "dev", &b]);
        ip(&["-n", &pair.client, "link", "set", &b, "up"]);
        pair
    }

    /// A command that runs trawl in the server's namespace.
    fn server(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.server, env!("CARGO_BIN_EXE_trawl")]);
        c
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A self-signed certificate for `ip` (openssl), and its key: PEM file paths.
fn self_signed(dir: &Path, ip: &str) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let s = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=trawl",
        ])
        .args(["-addext", &format!("subjectAltName=IP:{ip}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(s.success());
    let p = |p: PathBuf| p.to_string_lossy().into_owned();
    (p(cert), p(key))
}

/// `text` (Prometheus text format) through `prometheus_client`'s parser: every sample as
/// `[name, labels, value]`.
fn prometheus_samples(text: &str) -> Vec<(String, serde_json::Value, f64)> {
    const PARSE: &str = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = [[s.name, s.labels, s.value] for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
        print(json.dumps(out))";
    let mut child = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client could not parse /metrics (pip install prometheus_client; \
         scripts/deps.sh does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<(String, serde_json::Value, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    v
}

fn sample_sum(samples: &[(String, serde_json::Value, f64)], name: &str) -> f64 {
    samples
        .iter()
        .filter(|(n, _, _)| n == name)
        .map(|(_, _, v)| v)
        .sum()
}

#[test]
fn api_of_a_run_serves_its_counters_metrics_and_live_series() {
    let lab = crate::live::lab();
    let dir = tempfile::tempdir().unwrap();
    let series_file = dir.path().join("series.jsonl");
    let served = Served::start(
        &[
            "run",
            "-i",
            &lab.host,
            "--no-ring",
            "--api",
            "127.0.0.1:0",
            "--series",
            series_file.to_str().unwrap(),
            "--duration",
            "20s",
            "--summary",
            "json",
        ],
        "HTTP API on ",
        "http://",
    );
    let sent = lab
        .replay_into_host(&crate::live::pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    assert_eq!(sent, 500);
    // Wait for the capture's count and the series' rows to show every packet.
    let deadline = Instant::now() + Duration::from_secs(10);
    let series = loop {
        let status = get_json(&served.url("/api/v1/status"));
        let rows = get_json(&served.url(&format!("/api/v1/series?iface={}", lab.host)));
        let in_rows: u64 = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["packets"].as_u64().unwrap())
            .sum();
        if status["capture"]["packets"] == 500 && in_rows == 500 {
            assert_eq!(status["mode"], "run");
            assert_eq!(
                status["capture"]["interfaces"][&lab.host]["packets"], 500,
                "{status}"
            );
            let blocks = status["composition"]["blocks"].as_array().unwrap();
            assert!(blocks.iter().any(|b| b["type"] == "http_api"), "{status}");
            break rows;
        }
        assert!(Instant::now() < deadline, "{status}\n{rows}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (code, text) = get(&served.url("/metrics"), &[]);
    assert_eq!(code, 200);
    let samples = prometheus_samples(&String::from_utf8(text).unwrap());
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(
        stderr
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .expect("JSON summary"),
    )
    .unwrap();
    // The counters scraped after the traffic are the summary's (nothing came after).
    let packets = sample_sum(&samples, "trawl_afpacket_source_packets");
    assert_eq!(
        packets as u64,
        summary["packets"].as_u64().unwrap(),
        "{summary}"
    );
    assert_eq!(packets, 500.0);
    let drops = sample_sum(&samples, "trawl_afpacket_source_kernel_drops");
    assert_eq!(
        drops as u64,
        summary["kernel_drops"]
            .as_u64()
            .unwrap_or_else(|| panic!("no kernel drops in the summary: {summary}")),
        "{summary}"
    );
    let capture = samples
        .iter()
        .find(|(n, _, _)| n == "trawl_afpacket_source_packets")
        .unwrap();
    assert_eq!(capture.1["interface"], lab.host.as_str());
    assert_eq!(capture.1["type"], "afpacket_source");
    let meter_in: f64 = samples
        .iter()
        .filter(|(n, l, _)| n == "trawl_block_items_in_total" && l["type"] == "flow_meter")
        .map(|(_, _, v)| v)
        .sum();
    assert_eq!(meter_in, 500.0);
    assert!(samples
        .iter()
        .any(|(n, _, _)| n == "trawl_queue_pushed_total"));
    // The live rows are the rows the run wrote to its series file.
    let file = std::fs::read_to_string(&series_file).unwrap();
    let written: Vec<serde_json::Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for row in series["rows"].as_array().unwrap() {
        let mut r = row.clone();
        let o = r.as_object_mut().unwrap();
        assert_eq!(o.remove("iface").unwrap(), lab.host.as_str());
        assert_eq!(o.remove("source").unwrap(), "live");
        assert!(written.contains(&r), "{r} not in the series file:\n{file}");
    }
}

/// The whole days (ns) the per-second rows of `trawl series -r capture` lie in: `trawl
/// ingest` (in [`Stores::new`]) stored those rows, with their rollups, as its interface's
/// series.
fn series_days(capture: &str) -> (u64, u64) {
    let text =
        String::from_utf8(trawl_ok(&["series", "-r", capture, "--summary", "none"])).unwrap();
    let (mut first, mut last) = (u64::MAX, 0);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let second = v["second"].as_u64().unwrap();
        first = first.min(second);
        last = last.max(second);
    }
    assert!(last > first + 10, "{capture}: too few seconds to compare");
    const DAY: u64 = 86_400;
    let ns = 1_000_000_000;
    ((first - first % DAY) * ns, (last - last % DAY + DAY) * ns)
}

fn alarm(iface: &str, ts_s: u64, victim: &str) -> trawl_store::alarms::Alarm {
    trawl_store::alarms::Alarm {
        detector: "synflood".into(),
        iface: Some(iface.into()),
        ts_ns: ts_s * 1_000_000_000,
        start_ns: (ts_s - 2) * 1_000_000_000,
        end_ns: None,
        rate: Some(1234.0),
        event: serde_json::json!({ "victim": victim }),
    }
}

#[test]
fn api_series_and_alarms_are_the_stored_ones() {
    let stores = Stores::new();
    let db = stores.db();
    // The series `trawl ingest` stored beside the flows (Stores::new).
    let lan = series_days(&testdata("oracle/many-protocols.pcap.gz"));
    let wlan = series_days(&testdata("pcaps/android.pcap"));
    let mut w = trawl_store::alarms::AlarmWriter::new(&db);
    w.append(&[
        alarm("lan", 1_600_000_000, "10.0.0.1"),
        alarm("wlan", 1_700_000_000, "10.0.0.2"),
    ])
    .unwrap();
    let served = stores.serve(&[]);
    for step in ["1s", "1m", "1h"] {
        let st = trawl_store::series::Step::parse(step).unwrap();
        let answer = get_json(&served.url(&format!("/api/v1/series?step={step}")));
        assert_eq!(answer["step"], step);
        let rows = answer["rows"].as_array().unwrap();
        for (iface, (from, to)) in [("lan", lan), ("wlan", wlan)] {
            // The stored days: the reader walks its files from `from` to `to`.
            let stored =
                trawl_store::series::read(Path::new(&db), Some(iface), from, to, st).unwrap();
            let mine: Vec<&serde_json::Value> =
                rows.iter().filter(|r| r["iface"] == iface).collect();
            assert_eq!(mine.len(), stored.len(), "{step} {iface}");
            assert!(!stored.is_empty());
            for (a, s) in mine.iter().zip(&stored) {
                assert_eq!(a["source"], "stored");
                assert_eq!(a["second"], s.second, "{step} {iface}");
                assert_eq!(a["packets"], s.packets, "{step} {iface}");
                assert_eq!(a["bytes"], s.bytes, "{step} {iface}");
                assert_eq!(a["new_flows"], s.new_flows, "{step} {iface}");
                assert_eq!(a["active_flows"], s.active_flows, "{step} {iface}");
            }
        }
    }
    // One interface, and the seconds' packets add up to the capture's.
    let one = get_json(&served.url("/api/v1/series?iface=wlan"));
    let packets: u64 = one["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(packets, 500);
    let all = get_json(&served.url("/api/v1/alarms"));
    let stored = trawl_store::alarms::read(Path::new(&db), 0, u64::MAX).unwrap();
    assert_eq!(all["alarms"], serde_json::to_value(&stored).unwrap());
    assert_eq!(all["alarms"].as_array().unwrap().len(), 2);
    let wlan_only = get_json(&served.url("/api/v1/alarms?iface=wlan&from=1650000000"));
    assert_eq!(wlan_only["alarms"].as_array().unwrap().len(), 1);
    assert_eq!(wlan_only["alarms"][0]["event"]["victim"], "10.0.0.2");

    // The stream: the stored alarms of its window, then each new one as it is stored.
    let mut curl = Command::new("curl")
        .args(["-sSN", "--max-time", "20"])
        .arg(served.url("/api/v1/alarms/stream?from=1650000000"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(curl.stdout.take().unwrap()).lines();
    let mut next_alarm = || loop {
        let line = lines.next().expect("stream ended").unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            break serde_json::from_str::<serde_json::Value>(data).unwrap();
        }
    };
    assert_eq!(next_alarm()["event"]["victim"], "10.0.0.2");
    w.append(&[alarm("lan", 1_700_000_100, "10.0.0.3")])
        .unwrap();
    let new = next_alarm();
    assert_eq!(new["event"]["victim"], "10.0.0.3");
    assert_eq!(new["iface"], "lan");
    let _ = curl.kill();
    let _ = curl.wait();
}

/// Issue 20: the web console is served at `/` and under `/console/` (the page, its script and
/// style, the vendored chart library and its licence) with their types and a strict content
/// policy; with a token its files need none (a browser opening the page cannot send one, and
/// they hold no data) while every endpoint, unknown `/console/` paths included, still does.
/// Before, `/` was a 404 (401 with a token): there was no console.
#[test]
fn api_serves_the_console_and_keeps_the_data_behind_the_token() {
    let stores = Stores::new();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let token = "console-t0ken-of-32-characters-x";
    std::fs::write(&token_file, token).unwrap();
    let headers = |url: &str| -> String {
        let out = Command::new("curl")
            .args(["-sS", "-D", "-", "-o", "/dev/null", url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    for extra in [
        &[][..],
        &["--api-token-file", token_file.to_str().unwrap()][..],
    ] {
        let served = stores.serve(extra);
        let (code, page) = get(&served.url("/"), &[]);
        assert_eq!(code, 200);
        let page = String::from_utf8(page).unwrap();
        assert!(
            page.contains("<script src=\"/console/console.js\">"),
            "{page}"
        );
        assert_eq!(get(&served.url("/console/"), &[]).1, page.as_bytes());
        for (path, ty, needle) in [
            ("/console/console.js", "text/javascript", "/api/v1/query?"),
            ("/console/console.css", "text/css", "#chart"),
            (
                "/console/uPlot.iife.min.js",
                "text/javascript",
                "uPlot (v1.6.32)",
            ),
            ("/console/uPlot.min.css", "text/css", ".uplot"),
            ("/console/uPlot.LICENSE.txt", "text/plain", "MIT License"),
        ] {
            let (code, body) = get(&served.url(path), &[]);
            assert_eq!(code, 200, "{path}");
            assert!(String::from_utf8_lossy(&body).contains(needle), "{path}");
            let h = headers(&served.url(path));
            assert!(h.contains(&format!("content-type: {ty}")), "{path}: {h}");
            assert!(h.contains("x-content-type-options: nosniff"), "{h}");
            assert!(
                h.contains("content-security-policy: default-src 'none'"),
                "{h}"
            );
        }
        let data = get(&served.url("/api/v1/status"), &[]).0;
        let unknown = get(&served.url("/console/nope.js"), &[]).0;
        if extra.is_empty() {
            assert_eq!((data, unknown), (200, 404));
        } else {
            assert_eq!(
                (data, unknown),
                (401, 401),
                "the data stays behind the token"
            );
            let bearer = format!("Authorization: Bearer {token}");
            assert_eq!(get(&served.url("/api/v1/status"), &["-H", &bearer]).0, 200);
        }
        let (status, _) = served.stop();
        assert!(status.success());
    }
}
