//! The few kernel calls the standard library does not wrap. Every `unsafe` block of the crate
//! is here.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// I/O scheduling class for a reading thread (`ioprio_set(2)`): retrieval must not slow down
/// the dumper writing to the same disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoPriority {
    /// Only when no other process wants the disk (`IOPRIO_CLASS_IDLE`).
    Idle,
    /// Best effort at level 0 (highest) to 7 (lowest).
    BestEffort(u8),
}

/// Sets the I/O priority of the calling thread. Schedulers without priorities (none,
/// mq-deadline) accept and ignore it.
pub fn set_io_priority(p: IoPriority) -> io::Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    let value = match p {
        IoPriority::Idle => 3 << IOPRIO_CLASS_SHIFT,
        IoPriority::BestEffort(level) => (2 << IOPRIO_CLASS_SHIFT) | u32::from(level.min(7)),
    };
    // SAFETY: ioprio_set takes three integers and touches no memory of ours; `who` 0 is the
    // calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            value as libc::c_int,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lowers the CPU priority of the calling thread to at least `nice` (`setpriority(2)` on the
/// thread's id: Linux gives each thread its own nice value); a thread already nicer keeps its
/// value, so this never raises a priority (`nice -n 15 trawl serve` stays at 15). Serving
/// queries and packets must not take CPU from capture, or from what an operator runs
/// interactively on the same machine.
pub fn set_cpu_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid takes no argument and touches no memory.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority returns the nice value, which may be -1: errno tells an error from it.
    // SAFETY: errno is this thread's; getpriority takes two integers and touches no memory.
    let now = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    };
    if now == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
        return Err(io::Error::last_os_error());
    }
    if now >= nice {
        return Ok(());
    }
    // SAFETY: setpriority takes three integers and touches no memory of ours; `who` is the
    // calling thread's id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Advice about a file range (`posix_fadvise(2)`); advisory, so errors are ignored.
pub(crate) fn advise(file: &File, offset: u64, len: u64, advice: libc::c_int) {
    // SAFETY: the descriptor is valid for the borrow of `file`; no memory is passed.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            advice,
        );
    }
}

pub(crate) use libc::{POSIX_FADV_DONTNEED as DONTNEED, POSIX_FADV_SEQUENTIAL as SEQUENTIAL};

/// Starts (or, with `wait`, completes) writeback of a range of a buffered file, so that pages
/// can be dropped from the cache afterwards instead of piling up as dirty memory.
pub(crate) fn writeback(file: &File, offset: u64, len: u64, wait: bool) {
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    // SAFETY: the descriptor is valid for the borrow of `file`; no memory is passed.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            flags,
        );
    }
}

/// Size and free space of the filesystem holding `path`, in bytes.
pub(crate) fn volume_space(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `s` points to writable memory of the struct's
    // size; statvfs fills it completely on success.
    let r = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so the struct is initialised.
    let s = unsafe { s.assume_init() };
    // The field types differ between targets (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    let (frsize, blocks, avail) = (s.f_frsize as u64, s.f_blocks as u64, s.f_bavail as u64);
    Ok((blocks * frsize, avail * frsize))
}

#[cfg(test)]
mod tests {
    /// The nice value of the calling thread, as the kernel shows it (field 19 of its stat).
    fn own_nice() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces: count from its closing parenthesis.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn a_thread_is_made_nicer_never_less_nice() {
        std::thread::spawn(|| {
            let before = own_nice();
            super::set_cpu_nice(before + 5).unwrap();
            assert_eq!(own_nice(), before + 5);
            // Asking for less leaves it as it is (raising a priority is not this call's job).
            super::set_cpu_nice(before).unwrap();
            assert_eq!(own_nice(), before + 5);
        })
        .join()
        .unwrap();
        // Other threads keep theirs.
        let main = own_nice();
        std::thread::spawn(move || assert_eq!(own_nice(), main))
            .join()
            .unwrap();
    }
}
