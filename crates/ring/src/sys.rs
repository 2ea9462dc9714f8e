//! The few system calls the ring needs: futex wait/wake on a word of the mapping, and asking
//! whether a process is still alive.
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout`. Returns early on a wake, a signal, or
/// when the word no longer holds `expected` (the caller re-checks its condition either way).
/// The futex is *shared* (no `FUTEX_PRIVATE_FLAG`), so waiters and wakers may be different
/// processes mapping the same file.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 32-bit word for the duration of the call (it is borrowed),
    // and `ts` outlives the call. FUTEX_WAIT only reads the word and the timespec; its result
    // (0, ETIMEDOUT, EAGAIN, EINTR) needs no handling because every caller re-checks.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter sleeping on `word`.
pub(crate) fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned 32-bit word; FUTEX_WAKE does not access memory beyond
    // using the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// This process's id.
pub(crate) fn own_pid() -> u32 {
    std::process::id()
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, clock ticks since boot), which
/// tells a process from a later one that reuses its pid. `None` when `/proc` cannot say.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces and ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts with " S ppid ..." : field 3 is the first token, field 22 the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` (started at `start`, 0 if unknown) is gone: it does not exist
/// (`kill(pid, 0)` fails with ESRCH), is a zombie waiting to be reaped, or its pid now belongs
/// to a process started at another time.
pub(crate) fn process_gone(pid: u32, start: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    // It exists (or we may not signal it: EPERM). A zombie, or a reused pid, is gone too.
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        if let Some(i) = stat.rfind(')') {
            let mut fields = stat[i + 1..].split_ascii_whitespace();
            if matches!(fields.next(), Some("Z" | "X" | "x")) {
                return true;
            }
            if start != 0 {
                if let Some(s) = fields.nth(18).and_then(|s| s.parse::<u64>().ok()) {
                    return s != start;
                }
            }
        }
    }
    false
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive() {
        let start = process_start(own_pid()).unwrap();
        assert!(start > 0);
        assert!(!process_gone(own_pid(), start));
        assert!(
            process_gone(own_pid(), start + 1),
            "another start time is another process"
        );
    }

    #[test]
    fn reaped_child_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(process_gone(pid, 0));
    }
}
