//! systemd's service notifications (sd_notify(3)) for `trawl run` under `Type=notify`, without
//! libsystemd: the protocol is one datagram of `KEY=VALUE` lines to the Unix socket named by
//! `$NOTIFY_SOCKET` (a path, or an abstract name written `@name`).
//!
//! `trawl run` says `READY=1` once every block is built (capture sockets open, rings and
//! stores created), `STATUS=` with each status line, `WATCHDOG=1` at half the interval
//! systemd gives in `$WATCHDOG_USEC` (from the supervisor loop, so a wedged monitor stops
//! pinging and systemd restarts it), and `STOPPING=1` when asked to stop. Without
//! `$NOTIFY_SOCKET` (not started by systemd) nothing is sent.
use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// Where the notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Path(std::path::PathBuf),
    /// An abstract socket name (Linux), without the leading `@`.
    Abstract(Vec<u8>),
}

impl Target {
    /// `$NOTIFY_SOCKET`'s value: an absolute path, or `@name` for the abstract namespace.
    fn parse(value: &std::ffi::OsStr) -> Option<Target> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = value.as_bytes();
        match bytes.first()? {
            b'/' => Some(Target::Path(value.into())),
            b'@' => Some(Target::Abstract(bytes[1..].to_vec())),
            _ => None,
        }
    }
}

/// A connection to systemd's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    target: Target,
    /// Half the watchdog interval, when systemd asked for pings.
    ping_every: Option<Duration>,
    last_ping: Instant,
    stopping: bool,
}

impl Notifier {
    /// The notifier systemd's environment asks for, or `None` when not run by systemd (no or
    /// an unusable `$NOTIFY_SOCKET`). The variables are removed, so processes trawl starts do
    /// not notify in its name.
    pub fn from_env() -> Option<Notifier> {
        let value = std::env::var_os("NOTIFY_SOCKET")?;
        let watchdog = watchdog_interval(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        // Read once, before the composition starts any thread.
        std::env::remove_var("NOTIFY_SOCKET");
        std::env::remove_var("WATCHDOG_USEC");
        std::env::remove_var("WATCHDOG_PID");
        let target = Target::parse(&value)?;
        let socket = UnixDatagram::unbound().ok()?;
        Some(Notifier {
            socket,
            target,
            ping_every: watchdog.map(|d| d / 2),
            last_ping: Instant::now(),
            stopping: false,
        })
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments) in one datagram.
    pub fn send(&self, state: &str) -> io::Result<()> {
        match &self.target {
            Target::Path(p) => self.socket.send_to(state.as_bytes(), p).map(|_| ()),
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                self.socket
                    .send_to_addr(state.as_bytes(), &addr)
                    .map(|_| ())
            }
        }
    }

    /// Every block is up: systemd considers the service started.
    pub fn ready(&mut self) {
        self.last_ping = Instant::now();
        self.report(self.send("READY=1\nSTATUS=running"));
    }

    /// A status line for `systemctl status`.
    pub fn status(&self, line: &str) {
        // One line: systemd shows the whole value.
        let line = line.replace('\n', " ");
        self.report(self.send(&format!("STATUS={line}")));
    }

    /// Called often (the supervisor's loop): pings the watchdog when half its interval has
    /// passed since the last ping.
    pub fn tick(&mut self) {
        if let Some(every) = self.ping_every {
            if self.last_ping.elapsed() >= every {
                self.last_ping = Instant::now();
                self.report(self.send("WATCHDOG=1"));
            }
        }
    }

    /// The run was asked to stop (SIGTERM, SIGINT, the duration or count reached): the
    /// flush may take a while, and systemd should not take that for a hang.
    pub fn stopping(&mut self) {
        if !self.stopping {
            self.stopping = true;
            self.report(self.send("STOPPING=1\nSTATUS=stopping: flushing flows and closing files"));
        }
    }

    fn report(&self, sent: io::Result<()>) {
        if let Err(e) = sent {
            tracing::debug!(message = "cannot notify systemd", target = ?self.target, %e);
        }
    }
}

/// The watchdog interval systemd set for this process: `$WATCHDOG_USEC` microseconds, when
/// `$WATCHDOG_PID` is unset or names `pid`.
fn watchdog_interval(usec: Option<&str>, for_pid: Option<&str>, pid: u32) -> Option<Duration> {
    if let Some(p) = for_pid {
        if p.trim().parse::<u32>().ok()? != pid {
            return None;
        }
    }
    let us: u64 = usec?.trim().parse().ok()?;
    (us > 0).then(|| Duration::from_micros(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_socket_forms() {
        assert_eq!(
            Target::parse("/run/systemd/notify".as_ref()),
            Some(Target::Path("/run/systemd/notify".into()))
        );
        assert_eq!(
            Target::parse("@/org/x".as_ref()),
            Some(Target::Abstract(b"/org/x".to_vec()))
        );
        assert_eq!(Target::parse("relative".as_ref()), None);
        assert_eq!(Target::parse("".as_ref()), None);
    }

    #[test]
    fn watchdog_only_for_this_process() {
        let s = Some(Duration::from_secs(30));
        assert_eq!(watchdog_interval(Some("30000000"), None, 7), s);
        assert_eq!(watchdog_interval(Some("30000000"), Some("7"), 7), s);
        assert_eq!(watchdog_interval(Some("30000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(None, None, 7), None);
        assert_eq!(watchdog_interval(Some("x"), None, 7), None);
    }
}
