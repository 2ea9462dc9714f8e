//! Issue 20's workflow end to end in a real browser: headless Chromium (Debian's `chromium`
//! and `chromium-driver`, installed by scripts/deps.sh), driven over WebDriver by a small
//! client below, against `trawl run -i VETH --db --dump --api` while a testdata capture with
//! an injected SYN flood is replayed into the veth pair. The alarm appears on the chart;
//! clicking it shows the victim among the top destinations; clicking the victim's row and
//! then the download link saves a pcap whose packets are exactly those tshark selects from the
//! replayed file for the victim (and the bytes `trawl packets` writes for the same window and
//! filter). Screenshots of each step are kept in the test's scratch directory (printed).
//!
//! The flow database stores a 5-minute block when it ends (plus 40 s): the test waits for the
//! flood's block before the flows can show, so it takes between one and six minutes.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::api::Served;

const VICTIM: &str = "10.66.0.1";
/// The name WebDriver gives element references in JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One HTTP/1.1 exchange with chromedriver: the status and the JSON body.
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("chromedriver {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json; \
         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let h = line.trim().to_ascii_lowercase();
        if h.is_empty() {
            break;
        }
        if let Some(v) = h.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        chunked |= h.starts_with("transfer-encoding:") && h.contains("chunked");
    }
    let mut data = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            data.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        data.resize(n, 0);
        r.read_exact(&mut data).unwrap();
    } else {
        r.read_to_end(&mut data).unwrap();
    }
    let v = serde_json::from_slice(&data).unwrap_or(Value::Null);
    (status, v)
}

/// chromedriver and one browser session, ended on drop.
struct Browser {
    driver: Child,
    addr: String,
    session: String,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium that downloads into
    /// `downloads`.
    fn start(downloads: &Path) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/deps.sh installs chromium-driver)");
        let addr = format!("127.0.0.1:{port}");
        let mut b = Browser {
            driver,
            addr,
            session: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&b.addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Debian's chromium, wherever PATH has it.
        let chromium = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
            .expect("chromium on PATH");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--disable-gpu", "--window-size=1280,1100"],
                "prefs": {
                    "download.default_directory": downloads.to_str().unwrap(),
                    "download.prompt_for_download": false,
                },
            },
        }}});
        let (status, v) = http(&b.addr, "POST", "/session", Some(&caps));
        assert_eq!(status, 200, "new session: {v}");
        b.session = v["value"]["sessionId"].as_str().unwrap().to_string();
        b
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        http(
            &self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        )
    }

    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = self.call(method, path, body);
        assert_eq!(status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.ok("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` in the page and returns its value.
    fn eval(&self, script: &str) -> Value {
        self.ok(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// The element `css` selects, when there is one.
    fn find(&self, css: &str) -> Option<String> {
        let (status, v) = self.call(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        (status == 200).then(|| v["value"][ELEMENT].as_str().unwrap().to_string())
    }

    /// Waits up to `secs` for `css` to select an element.
    fn wait_for(&self, css: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(e) = self.find(css) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no {css} after {secs} s; the page says: {}",
                self.eval("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Clicks what `css` selects as a user would (WebDriver's element click: scrolled into
    /// view, the pointer at its centre), finding it again if the page replaced it.
    fn click(&self, css: &str) {
        for _ in 0..5 {
            let e = self.wait_for(css, 10);
            let (status, v) = self.call("POST", &format!("/element/{e}/click"), Some(&json!({})));
            if status == 200 {
                return;
            }
            assert!(
                v["value"]["error"] == "stale element reference",
                "click {css}: {v}"
            );
        }
        panic!("{css} kept being replaced");
    }

    fn type_into(&self, css: &str, text: &str) {
        let e = self.wait_for(css, 10);
        self.ok(
            "POST",
            &format!("/element/{e}/value"),
            Some(&json!({ "text": text })),
        );
    }

    fn attr(&self, css: &str, name: &str) -> Option<String> {
        let e = self.wait_for(css, 10);
        self.ok("GET", &format!("/element/{e}/attribute/{name}"), None)
            .as_str()
            .map(str::to_string)
    }

    /// A screenshot of the page, saved as `dir/name`.
    fn screenshot(&self, dir: &Path, name: &str) {
        let png = base64(self.ok("GET", "/screenshot", None).as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(dir.join(name), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", "", None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (WebDriver's screenshots).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for group in digits.chunks(4) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | u32::from(*d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..group.len()]);
    }
    out
}

/// The value of `name` in the query string of `url`, decoded (`+` is a space, as
/// URLSearchParams writes it).
fn param(url: &str, name: &str) -> String {
    let query = url.split_once('?').expect("a query string").1;
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {url}"));
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                out.push(u8::from_str_radix(&raw[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// Where the screenshots and the downloaded file are kept after the test.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-e2e");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("downloads")).unwrap();
    dir
}

/// Waits while the current 5-minute block has less than `needed` seconds left, so that the
/// replayed traffic lies in one block, and returns when that block ends (Unix seconds).
fn start_early_in_a_block(needed: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let left = 300 - now % 300;
    if left < needed {
        std::thread::sleep(Duration::from_secs(left + 1));
        return now + left + 300;
    }
    now + left
}

/// Every file under `dir` (for a failure's message).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// What `trawl packets ARGS -w -` writes.
fn trawl_packets(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .arg("packets")
        .args(args)
        .args(["-w", "-", "--summary", "none"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The packets of a pcap file in memory, with their times.
fn packets_with_times(pcap: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pcap).unwrap();
    let mut src = trawl_capture::FileSource::open(file.path()).expect("a capture file");
    let mut v = Vec::new();
    while let Some(b) = trawl_capture::PacketSource::next_batch(&mut src).expect("read") {
        v.extend(b.iter().map(|p| (p.ts_ns, p.data.to_vec())));
    }
    v
}

/// The one file Chromium finished downloading into `dir`.
fn downloaded(dir: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if let [f] = files.as_slice() {
            if f.extension().is_some_and(|x| x == "pcap") {
                return f.clone();
            }
        }
        assert!(Instant::now() < deadline, "no download: {files:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn console_alarm_to_flows_to_packets_in_a_real_browser() {
    for tool in ["chromium", "chromedriver", "tshark"] {
        if !trawl_testkit::needs::require_tool(tool) {
            return;
        }
    }
    let art = artifacts();
    eprintln!(
        "console test: screenshots and the download in {}",
        art.display()
    );
    let dir = tempfile::tempdir().unwrap();
    // android.pcap with 500 SYN/s to the victim for 10 s from 40 s in; replayed 20 times
    // faster it takes 5 s.
    let replayed = dir.path().join("replayed.pcap");
    crate::detect::with_flood(&replayed, [10, 66, 0, 1], 500, 40, 10);
    let lab = crate::live::lab();
    let token = "browser-t0ken-of-32-characters-x";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let (db, pk) = (dir.path().join("db"), dir.path().join("pk"));
    let served = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "run",
            "-i",
            &lab.host,
            "--no-ring",
            "--db",
            db.to_str().unwrap(),
            "--dump",
            pk.to_str().unwrap(),
            "--api",
            "127.0.0.1:0",
            "--api-token-file",
            token_file.to_str().unwrap(),
            "--summary",
            "json",
        ]),
        "HTTP API on ",
        "http://",
    );
    let browser = Browser::start(&art.join("downloads"));

    // The page asks for the token once.
    browser.goto(&served.url("/"));
    browser.type_into("#token-input", token);
    browser.click("#token-submit");
    browser.wait_for("#main:not([hidden])", 10);

    // 150 s before the block ends: the flood's flows end (idle, 30 s) and are published (10 s)
    // long before, so they must be queryable while their block is still open.
    let block_end = start_early_in_a_block(150);
    let sent = lab
        .replay_into_host(&replayed, &["--multiplier", "4"])
        .expect("tcpreplay");
    assert!(sent > 5000);

    // Step 1: the alarm on the chart.
    let flag = format!("#chart .flag[data-detector=\"synflood\"][data-victim=\"{VICTIM}\"]");
    browser.wait_for(&flag, 30);
    browser.screenshot(&art, "1-alarm-on-the-chart.png");

    // Step 2: its flows, the victim first among the top destinations (by packets), once the
    // flood's flows have ended and the monitor published them (the flow store's recent parts):
    // before their 5-minute block is written (the test asks again until then).
    browser.click(&flag);
    let victim_row = format!("#q-table tr[data-dst_ip=\"{VICTIM}\"].victim");
    let answered = "#q-message:not([data-state=\"running\"])";
    loop {
        browser.wait_for(answered, 60);
        if browser.find(&victim_row).is_some() {
            break;
        }
        let state = browser.attr("#q-message", "data-state");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(
            // Before the flood's flows end (idle, 30 s) the answer holds only android.pcap's
            // ended flows ("done"), or none yet ("pending", "empty").
            now < block_end && matches!(state.as_deref(), Some("pending" | "empty" | "done")),
            "no victim row before the flood's block was written (recent parts); the page says: {}\nthe database: {:?}",
            browser.eval("return document.getElementById('query-panel').innerText"),
            walk(&db)
        );
        if state.as_deref() == Some("pending") {
            browser.screenshot(&art, "2-flows-not-stored-yet.png");
        }
        std::thread::sleep(Duration::from_secs(5));
        browser.click("#q-run");
    }
    assert_eq!(
        browser.attr("#q-row-0", "data-dst_ip").as_deref(),
        Some(VICTIM)
    );
    browser.screenshot(&art, "3-victim-among-top-destinations.png");

    // Step 3: the victim's row gives its packets of the alarm's window.
    browser.click(&victim_row);
    let href = browser.attr("#download", "href").unwrap();
    assert_eq!(param(&href, "filter"), format!("host {VICTIM}"));
    browser.screenshot(&art, "4-download-link.png");

    // Step 4: the download (fetched with the token, saved by the browser).
    browser.click("#download");
    let file = downloaded(&art.join("downloads"));
    browser.wait_for("#p-state[data-state=\"done\"]", 30);
    browser.screenshot(&art, "5-downloaded.png");
    drop(browser);

    // The victim's packets the probe captured are what tshark selects from the replayed
    // file, in order; the download holds exactly those of them in the alarm's window (the
    // flood, or its part that alarm covers when a slow replay made two); and its bytes are
    // those `trawl packets` writes for the link's window and filter.
    let expected = dir.path().join("expected.pcap");
    let status = Command::new("tshark")
        .args(["-r", replayed.to_str().unwrap()])
        .args(["-Y", &format!("ip.addr == {VICTIM}"), "-F", "pcap", "-w"])
        .arg(&expected)
        .stdout(Stdio::null())
        .status()
        .expect("tshark");
    assert!(status.success());
    let tshark = crate::live::file_packets(&expected);
    assert_eq!(tshark.len(), 5000);
    let pk = pk.to_str().unwrap();
    let (from, to, filter) = (
        param(&href, "from"),
        param(&href, "to"),
        param(&href, "filter"),
    );
    let captured = packets_with_times(&trawl_packets(&["-r", pk, "-f", &filter, "-i", &lab.host]));
    let data: Vec<Vec<u8>> = captured.iter().map(|(_, d)| d.clone()).collect();
    assert!(
        data == tshark,
        "the captured victim packets differ from tshark's"
    );
    let ns = |t: &str| trawl_time::parse_instant(t, 0).unwrap();
    let window = ns(&from)..ns(&to);
    let in_window: Vec<Vec<u8>> = captured
        .iter()
        .filter(|(ts, _)| window.contains(ts))
        .map(|(_, d)| d.clone())
        .collect();
    assert!(
        in_window.len() > 100,
        "the window misses the flood: {from} to {to}"
    );
    let got = packets_with_times(&std::fs::read(&file).unwrap());
    let got: Vec<Vec<u8>> = got.into_iter().map(|(_, d)| d).collect();
    assert!(
        got == in_window,
        "the download is not the victim's packets of the window"
    );
    let cli = trawl_packets(&[
        "-r", pk, "--from", &from, "--to", &to, "-f", &filter, "-i", &lab.host,
    ]);
    assert!(
        cli == std::fs::read(&file).unwrap(),
        "not trawl packets' bytes"
    );
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    eprintln!("console test: screenshots in {}", art.display());
}
