//! Real network namespaces and veth pairs for capture tests (`ip netns`, `ip link`), torn down
//! on drop. Traffic is sent with tcpreplay, an independent tool, so a test checks trawl against
//! what was really put on the wire.
//!
//! IPv6 is disabled on both ends before they come up, so the kernel sends no router
//! solicitations or neighbour discovery of its own and packet counts stay exact.
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Whether `/proc/net/packet` text (a header, then `sk RefCnt Type Proto Iface R Rmem User
/// Inode` per socket) holds a socket bound to interface `index` or to every interface (0).
fn bound_to(table: &str, index: &str) -> bool {
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(4))
        .any(|i| i == index || i == "0")
}

/// A veth pair: `host` stays in this (the test's) namespace, `peer` lives in a fresh namespace.
#[derive(Debug)]
pub struct VethLab {
    /// The namespace holding `peer`.
    pub ns: String,
    /// The end in the test's namespace (capture here).
    pub host: String,
    /// The end inside `ns` (send from here to make inbound traffic on `host`).
    pub peer: String,
}

/// Why a lab could not be made; tests print it and fail (root is a documented requirement).
pub type LabError = String;

fn run(cmd: &mut Command) -> Result<Output, LabError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

fn ip(args: &[&str]) -> Result<Output, LabError> {
    run(Command::new("ip").args(args))
}

impl VethLab {
    /// Creates the namespace and the pair, both ends up, IPv6 off, MTU `mtu`.
    pub fn new(mtu: u32) -> Result<VethLab, LabError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}{}", std::process::id() % 100_000, n);
        let lab = VethLab {
            ns: format!("trawl-test-{id}"),
            host: format!("tw{id}a"),
            peer: format!("tw{id}b"),
        };
        ip(&["netns", "add", &lab.ns])?;
        // From here on Drop cleans up whatever was made.
        let mtu = mtu.to_string();
        ip(&[
            "link", "add", &lab.host, "mtu", &mtu, "type", "veth", "peer", "name", &lab.peer,
            "mtu", &mtu,
        ])?;
        ip(&["link", "set", &lab.peer, "netns", &lab.ns])?;
        // IPv6 off unless a test asks for it: no router solicitations or neighbour discovery
        // in the captures.
        lab.set_ipv6(false)?;
        for (netns, dev) in lab.ends() {
            let mut up = vec![];
            if let Some(ns) = netns {
                up.extend(["-n", ns]);
            }
            up.extend(["link", "set", dev, "addrgenmode", "none", "up"]);
            ip(&up)?;
        }
        Ok(lab)
    }

    /// Each end with the namespace it lives in (`None`: this one).
    fn ends(&self) -> [(Option<&str>, &str); 2] {
        [(None, &self.host), (Some(&self.ns), &self.peer)]
    }

    /// Turns IPv6 on or off at both ends (off after [`VethLab::new`]). With it on, the ends
    /// still have no link-local address (`addrgenmode none`): only what a test adds.
    pub fn set_ipv6(&self, on: bool) -> Result<(), LabError> {
        for (netns, dev) in self.ends() {
            let sysctl = format!("net.ipv6.conf.{dev}.disable_ipv6={}", u8::from(!on));
            let mut c = match netns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "sysctl"]);
                    c
                }
                None => Command::new("sysctl"),
            };
            run(c.args(["-qw", &sysctl]))?;
        }
        Ok(())
    }

    /// Brings the host end down or up.
    pub fn set_host_up(&self, up: bool) -> Result<(), LabError> {
        ip(&["link", "set", &self.host, if up { "up" } else { "down" }]).map(|_| ())
    }

    /// Waits (at most 15 s) until a packet socket is bound to either end of the pair: to
    /// `host` (or to every interface) in the test's namespace, or to `peer` (or to every
    /// interface) inside `ns`. A capturer started just before says nothing when its capture
    /// begins, and on a loaded machine it may take seconds to get there; packets replayed
    /// before would be missed. Without any capturer it returns after the 15 s (some tests
    /// replay with none).
    pub fn wait_for_capture(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            if self.capture_bound() {
                // Bound comes before the filter and the ring are in place: a moment for them.
                std::thread::sleep(std::time::Duration::from_millis(100));
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Whether a packet socket is bound to `host` here or to `peer` inside `ns`.
    fn capture_bound(&self) -> bool {
        let host = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", self.host));
        let table = std::fs::read_to_string("/proc/net/packet").unwrap_or_default();
        if host.is_ok_and(|index| bound_to(&table, index.trim())) {
            return true;
        }
        // Inside the namespace: its own /proc/net/packet and ifindex, read from there.
        let inside = Command::new("ip")
            .args(["netns", "exec", &self.ns, "sh", "-c"])
            .arg(format!(
                "cat /sys/class/net/{}/ifindex /proc/net/packet",
                self.peer
            ))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let Ok(inside) = inside else { return false };
        let text = String::from_utf8_lossy(&inside.stdout);
        let mut lines = text.lines();
        match lines.next() {
            Some(index) => bound_to(&lines.collect::<Vec<_>>().join("\n"), index.trim()),
            None => false,
        }
    }

    /// Replays `pcap` out of the peer end (inbound on `host`) with tcpreplay, once a capturer
    /// listens on `host` ([`VethLab::wait_for_capture`]); `extra` adds options such as
    /// `--topspeed` or `--pps=N`. Returns tcpreplay's count of packets sent.
    pub fn replay_into_host(&self, pcap: &Path, extra: &[&str]) -> Result<u64, LabError> {
        self.wait_for_capture();
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.ns,
            "tcpreplay",
            "-q",
            "-i",
            &self.peer,
        ]);
        c.args(extra).arg(pcap);
        sent_count(run(&mut c)?)
    }

    /// Replays `pcap` out of the host end (outbound on `host`), once a capturer listens.
    pub fn replay_out_of_host(&self, pcap: &Path, extra: &[&str]) -> Result<u64, LabError> {
        self.wait_for_capture();
        let mut c = Command::new("tcpreplay");
        c.args(["-q", "-i", &self.host]).args(extra).arg(pcap);
        sent_count(run(&mut c)?)
    }
}

/// A fresh network namespace with only its loopback interface, up: traffic on `lo` there is
/// the test's alone.
#[derive(Debug)]
pub struct LoopbackLab {
    /// The namespace.
    pub ns: String,
}

impl LoopbackLab {
    /// Creates the namespace and brings its `lo` up.
    pub fn new() -> Result<LoopbackLab, LabError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let lab = LoopbackLab {
            ns: format!("trawl-lo-{}{}", std::process::id() % 100_000, n),
        };
        ip(&["netns", "add", &lab.ns])?;
        // From here on Drop deletes the namespace.
        ip(&["-n", &lab.ns, "link", "set", "lo", "up"])?;
        Ok(lab)
    }

    /// `program` run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).arg(program);
        c
    }

    /// Replays `pcap` onto the namespace's `lo` with tcpreplay; returns the packets sent.
    pub fn replay_on_lo(&self, pcap: &Path, extra: &[&str]) -> Result<u64, LabError> {
        let mut c = self.command("tcpreplay");
        c.args(["-q", "-i", "lo"]).args(extra).arg(pcap);
        sent_count(run(&mut c)?)
    }
}

impl Drop for LoopbackLab {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// tcpreplay prints "Actual: N packets (...) sent in ..." on success.
fn sent_count(out: Output) -> Result<u64, LabError> {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Actual: ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .ok_or_else(|| format!("no 'Actual:' line in tcpreplay output: {text}"))
}

impl Drop for VethLab {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both; the namespace goes last.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// Whether this process can make labs (root, `ip` and `tcpreplay` present). Capture tests
/// need it; CI runs as root.
pub fn lab_available() -> Result<(), LabError> {
    // The effective uid, from /proc, so the test kit needs no libc.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?");
    if euid != "0" {
        return Err(format!("capture tests need root (effective uid {euid})"));
    }
    for tool in ["ip", "tcpreplay"] {
        if Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            return Err(format!(
                "capture tests need `{tool}` (scripts/deps.sh installs it)"
            ));
        }
    }
    Ok(())
}
