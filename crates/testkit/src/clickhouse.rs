//! A real ClickHouse server for tests: `scripts/services.sh` (Debian's `clickhouse-server`,
//! 18.16 here) with its data in a scratch directory of its own, stopped when the
//! [`ClickHouse`] is dropped, also when the test fails; queried with `curl`, independent of
//! trawl's client.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use crate::repo_root;

/// Running servers (one per shard); dropping it stops them and removes their data.
#[derive(Debug)]
pub struct ClickHouse {
    dir: PathBuf,
    port: u16,
    shards: u32,
    /// The HTTP URL of the first server, `http://127.0.0.1:P`.
    pub url: String,
    /// One set of servers per test process at a time: its directory and ports are the
    /// process's.
    _one: MutexGuard<'static, ()>,
}

static ONE_SERVER: Mutex<()> = Mutex::new(());

fn services(dir: &Path, port: u16, args: &[&str]) -> String {
    let out = Command::new(repo_root().join("scripts/services.sh"))
        .args(args)
        .env("TRAWL_SERVICES_DIR", dir)
        .env("TRAWL_CLICKHOUSE_PORT", port.to_string())
        .output()
        .expect("run scripts/services.sh");
    assert!(
        out.status.success(),
        "services.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

impl ClickHouse {
    /// Starts `shards` servers (the cluster `trawl`, one single-replica shard each) in a new
    /// directory under `base` (the test binary's `CARGO_TARGET_TMPDIR`).
    ///
    /// # Panics
    /// Panics when the server cannot be installed or does not answer.
    pub fn start(base: &Path, shards: u32) -> ClickHouse {
        let one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
        let dir = base.join(format!("clickhouse-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the server directory");
        // Ports of this process's own: HTTP P, P+1, ...; native P+900+I.
        let port = 40000 + (std::process::id() % 2000) as u16 * 2;
        let url = services(
            &dir,
            port,
            &["start", "clickhouse", "--shards", &shards.to_string()],
        );
        ClickHouse {
            dir,
            port,
            shards,
            url,
            _one: one,
        }
    }

    /// The HTTP URL of shard `i` (1-based).
    pub fn url_of(&self, i: u32) -> String {
        assert!((1..=self.shards).contains(&i));
        format!("http://127.0.0.1:{}", self.port + i as u16 - 1)
    }

    /// Runs `sql` on shard `i` (1-based) and returns the answer's text.
    ///
    /// # Panics
    /// Panics when the server answers with an error.
    pub fn query_on(&self, i: u32, sql: &str) -> String {
        let out = Command::new("curl")
            .args(["-sS", "--fail-with-body", "--data-binary", "@-"])
            .arg(format!("{}/", self.url_of(i)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(sql.as_bytes())?;
                c.wait_with_output()
            })
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "ClickHouse refused {sql}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Runs `sql` on the first server.
    pub fn query(&self, sql: &str) -> String {
        self.query_on(1, sql)
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/services.sh"))
            .args(["stop", "clickhouse"])
            .env("TRAWL_SERVICES_DIR", &self.dir)
            .env("TRAWL_CLICKHOUSE_PORT", self.port.to_string())
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `sql` (several statements separated by `;`) in chDB, a current ClickHouse engine
/// (PyPI `chdb`, installed by `scripts/deps.sh`), in a session kept in `dir`; returns the
/// last statement's answer as TabSeparated text.
///
/// # Panics
/// Panics when chdb is missing or refuses a statement.
pub fn chdb(dir: &Path, sql: &str) -> String {
    const SCRIPT: &str = r#"
import sys
from chdb import session
s = session.Session(sys.argv[1])
out = ""
for st in sys.stdin.read().split(";\n"):
    if st.strip():
        out = str(s.query(st, "TabSeparated"))
sys.stdout.write(out)
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chdb (pip install chdb; scripts/deps.sh) refused the SQL: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
