//! A real Kafka cluster for tests: `scripts/services.sh` (Apache Kafka 4.x in KRaft mode on
//! loopback) in a scratch directory of its own, stopped when the [`Cluster`] is dropped, also
//! when the test fails; and the topic read back with `kcat`, independent of trawl's client.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::repo_root;

/// A running cluster; dropping it stops every broker and removes its data.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    /// The bootstrap list, `127.0.0.1:P1,127.0.0.1:P2,...`.
    pub bootstrap: String,
    /// One cluster per test process at a time: its directory and ports are the process's.
    _one: MutexGuard<'static, ()>,
}

/// Held by the cluster of this process (tests of one binary run on threads of one process).
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn services(dir: &Path, port: u16, args: &[&str]) -> String {
    let out = Command::new(repo_root().join("scripts/services.sh"))
        .args(args)
        .env("TRAWL_SERVICES_DIR", dir)
        .env("TRAWL_KAFKA_PORT", port.to_string())
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

impl Cluster {
    /// Starts `brokers` nodes in a new directory under `base` (the test binary's
    /// `CARGO_TARGET_TMPDIR`), once the process's previous cluster (another test's) is gone. Kafka's jars are fetched once into `base/kafka-jars` and shared
    /// by later runs.
    ///
    /// # Panics
    /// Panics when `java`/`mvn` cannot be installed or a broker does not answer: a Kafka test
    /// cannot pass without brokers.
    pub fn start(base: &Path, brokers: u32) -> Cluster {
        // A test that panicked with a cluster let go of it when unwinding dropped it.
        let one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        let jars = base.join("kafka-jars");
        std::fs::create_dir_all(&jars).expect("create the jar directory");
        // Ports of this process's own (node I: PORT + 2(I-1) and the next, for the controller),
        // and of this cluster's: a test binary may run up to three at once.
        static STARTED: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        let k = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 3;
        let dir = base.join(format!("kafka-run-{}-{k}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        // services.sh keeps the jars in DIR/kafka-VERSION: every run points there.
        std::os::unix::fs::symlink(&jars, dir.join("kafka-4.3.1")).expect("link the jars");
        let port = 21000 + (std::process::id() % 400) as u16 * 10 + k * 4000;
        let bootstrap = services(
            &dir,
            port,
            &["start", "kafka", "--brokers", &brokers.to_string()],
        );
        Cluster {
            dir,
            port,
            bootstrap,
            _one: one,
        }
    }

    /// Creates `topic` (one partition, replicated on every node) with the topic settings
    /// `configs` (`NAME=VALUE`, e.g. `max.message.bytes=200`), with Kafka's own tool.
    ///
    /// # Panics
    /// Panics when the tool fails.
    pub fn create_topic(&self, topic: &str, configs: &[&str]) {
        let nodes = self.bootstrap.split(',').count().to_string();
        let mut cmd = Command::new("java");
        cmd.arg("-cp")
            .arg(self.dir.join("kafka-4.3.1/libs/*"))
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.join("kafka/log4j2.properties").display()
            ))
            .arg(format!(
                "-Dkafka.logs.dir={}",
                self.dir.join("kafka").display()
            ))
            .args(["org.apache.kafka.tools.TopicCommand", "--create"])
            .args(["--bootstrap-server", &self.bootstrap, "--topic", topic])
            .args(["--partitions", "1", "--replication-factor", &nodes]);
        for c in configs {
            cmd.args(["--config", c]);
        }
        let out = cmd
            .output()
            .expect("run java (scripts/services.sh installs it)");
        assert!(
            out.status.success(),
            "creating topic {topic}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops node `i` (1-based); its data stays, [`Cluster::start_all`] brings it back.
    pub fn stop_node(&self, i: u32) {
        services(
            &self.dir,
            self.port,
            &["stop", "kafka", "--node", &i.to_string()],
        );
    }

    /// Stops every node.
    pub fn stop_all(&self) {
        services(&self.dir, self.port, &["stop", "kafka"]);
    }

    /// Starts every stopped node again.
    pub fn start_all(&self) {
        let n = std::fs::read_to_string(self.dir.join("kafka/brokers")).expect("brokers file");
        services(
            &self.dir,
            self.port,
            &["start", "kafka", "--brokers", n.trim()],
        );
    }

    /// Every message value of `topic` (from the start, until the end at the time of asking),
    /// as text lines; waits until at least `at_least` are there or `wait` has passed.
    pub fn consume_lines(&self, topic: &str, at_least: usize, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        loop {
            let out = Command::new("kcat")
                .args([
                    "-C",
                    "-b",
                    &self.bootstrap,
                    "-t",
                    topic,
                    "-o",
                    "beginning",
                    "-e",
                    "-q",
                ])
                .args(["-f", "%s\n"])
                .output()
                .expect("run kcat (apt install kcat)");
            let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect();
            if lines.len() >= at_least || Instant::now() >= deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The node that leads partition 0 of `topic`, waiting up to 30 s for the topic to exist
    /// and have a leader (a topic the producer just created may have none yet).
    pub fn leader(&self, topic: &str) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("kcat")
                .args(["-L", "-b", &self.bootstrap, "-t", topic])
                .output()
                .expect("run kcat (apt install kcat)");
            let text = String::from_utf8_lossy(&out.stdout);
            let leader = text
                .split("leader ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.trim().parse().ok());
            match leader {
                Some(n) => return n,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
                None => panic!("no leader of {topic} in kcat -L after 30 s: {text}"),
            }
        }
    }

    /// The value of message `offset` of partition 0 of `topic`, as bytes.
    pub fn consume_one(&self, topic: &str, offset: u64) -> Vec<u8> {
        let out = Command::new("kcat")
            .args(["-C", "-b", &self.bootstrap, "-t", topic, "-p", "0", "-o"])
            .arg(offset.to_string())
            .args(["-c", "1", "-e", "-q", "-f", "%s"])
            .output()
            .expect("run kcat (apt install kcat)");
        out.stdout
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/services.sh"))
            .args(["stop", "kafka"])
            .env("TRAWL_SERVICES_DIR", &self.dir)
            .env("TRAWL_KAFKA_PORT", self.port.to_string())
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How `got` covers `want` (both multisets of lines).
#[derive(Debug, Default)]
pub struct Coverage {
    /// Lines of `want` missing from `got`, as many times as they are missing.
    pub missing: Vec<String>,
    /// Lines of `got` beyond `want`'s count of them (lines `want` has).
    pub duplicates: usize,
    /// Lines of `got` that `want` does not have at all.
    pub unexpected: Vec<String>,
}

/// Compares what a topic held (`got`) with what was exported (`want`).
pub fn coverage(want: &[String], got: &[String]) -> Coverage {
    let mut count: HashMap<&str, i64> = HashMap::new();
    for l in want {
        *count.entry(l).or_default() -= 1;
    }
    let mut c = Coverage::default();
    for l in got {
        match count.get_mut(l.as_str()) {
            Some(n) => {
                if *n >= 0 {
                    c.duplicates += 1;
                }
                *n += 1;
            }
            None => c.unexpected.push(l.clone()),
        }
    }
    for (l, n) in count {
        if n < 0 {
            c.missing
                .extend(std::iter::repeat_n(l.to_string(), (-n) as usize));
        }
    }
    c
}
