//! Record files of a monitor: opened to append (a restarted monitor keeps what the previous run
//! wrote), a CSV header written only into an empty file and checked against one already there,
//! and reopened at their path on SIGHUP so logrotate can move them away.
//!
//! The writer blocks (`flow_writer`, `series_writer`, `event_writer`) and `trawl run --flows
//! / --series` share this; one-shot commands (`trawl flows -o F`) truncate, as `tcpdump -w`
//! does.
//!
//! [`OutputFile`] is trawl's one buffered output, of blocks and commands alike: it collects
//! writes into 1 MiB chunks, keeps the first write error, and knows a reader that went away
//! (EPIPE: `trawl ... | head`), which ends a run cleanly, from a real failure.
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// Text formats of records, rows and events: the writer blocks' `format` and the command
/// line's `--format` (one enum for both, with clap's traits under the `clap` feature).
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum TextFormat {
    /// One JSON object per line: the default of every writer, block or command (`trawl flows`,
    /// `trawl series`, `flow_writer`, `series_writer`), so a composition printed from flags
    /// and one written by hand write the same thing.
    #[default]
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

impl TextFormat {
    /// Its name in compositions.
    pub fn name(self) -> &'static str {
        match self {
            TextFormat::Json => "json",
            TextFormat::Csv => "csv",
        }
    }
}

/// How writers put times (`first_ns`, `last_ns`, a series row's `second`) into JSON and
/// CSV: the writer blocks' `time_format` and the command line's `--time-format`.
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum TimeFormat {
    /// Integers: ns since the epoch (series: seconds), as the specs define the fields.
    #[default]
    Ns,
    /// RFC 3339 text in UTC (records with nanoseconds), under the same names.
    Rfc3339,
}

impl TimeFormat {
    /// Its name in compositions.
    pub fn name(self) -> &'static str {
        match self {
            TimeFormat::Ns => "ns",
            TimeFormat::Rfc3339 => "rfc3339",
        }
    }
}

/// What a writer does with a file that already holds data.
#[derive(Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FileMode {
    /// Add to its end (the default: a restarted monitor loses nothing).
    #[default]
    Append,
    /// Empty it first.
    Truncate,
}

/// A file opened for records.
pub struct OpenedFile {
    /// Positioned at the end (appending) or empty.
    pub file: File,
    /// The first line of what the file held (appending to a file with data), without its
    /// newline: the header a CSV writer must match. `None` for an empty file.
    pub first_line: Option<String>,
}

/// Opens (creating if needed) `path` for records.
pub fn open(path: &Path, mode: FileMode) -> io::Result<OpenedFile> {
    let mut o = OpenOptions::new();
    o.create(true);
    match mode {
        FileMode::Append => o.append(true),
        FileMode::Truncate => o.write(true).truncate(true),
    };
    let file = o.open(path)?;
    let first_line = first_line(path)?;
    Ok(OpenedFile { file, first_line })
}

/// The first line of `path` if it exists and holds data, without creating or changing it: for
/// checking a header before anything else starts.
pub fn first_line(path: &Path) -> io::Result<Option<String>> {
    match File::open(path) {
        Ok(f) if f.metadata()?.len() > 0 => {
            let mut line = String::new();
            // A header is short; a file without a newline in its first 64 KiB has none anyway.
            io::BufReader::new(f.take(64 << 10)).read_line(&mut line)?;
            Ok(Some(line.trim_end_matches(['\n', '\r']).to_string()))
        }
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks that CSV rows with header `header` (one line, newline included) may be appended to
/// `path`, whose first line is `first_line`: refused when the columns differ, rather than
/// mixing two sets of columns in one file. An empty `header` (JSON lines) checks nothing.
pub fn check_header(path: &str, first_line: Option<&str>, header: &[u8]) -> Result<(), String> {
    if header.is_empty() {
        return Ok(());
    }
    let wanted = String::from_utf8_lossy(header);
    let wanted = wanted.trim_end_matches(['\n', '\r']);
    match first_line {
        None => Ok(()),
        Some(line) if line == wanted => Ok(()),
        Some(line) => Err(format!(
            "cannot append to {path}: its first line is not the header of these CSV columns \
             (found `{}`, expected `{}`); move the file away or give another path",
            shorten(line),
            shorten(wanted)
        )),
    }
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

/// Tells whether SIGHUP arrived since it was last asked (each watcher sees every signal).
pub struct Hangup {
    flag: Arc<AtomicBool>,
    id: signal_hook::SigId,
}

impl Hangup {
    /// Starts watching SIGHUP (which then no longer ends the process).
    pub fn watch() -> io::Result<Hangup> {
        let flag = Arc::new(AtomicBool::new(false));
        let id = signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone())?;
        Ok(Hangup { flag, id })
    }

    /// Whether SIGHUP arrived since the last call.
    pub fn take(&self) -> bool {
        self.flag.swap(false, Ordering::Relaxed)
    }
}

impl Drop for Hangup {
    fn drop(&mut self) {
        signal_hook::low_level::unregister(self.id);
    }
}

/// Bytes collected before a write: large enough that writing costs one syscall per MiB.
const CHUNK: usize = 1 << 20;

/// Longest that written output waits in the buffer ([`OutputFile::flush_if_stale`]).
pub const FLUSH_AFTER: Duration = Duration::from_secs(1);

/// A buffered output file (or standard output for `-`) that keeps the first write error
/// instead of failing each write, so a block can report it once; files opened with
/// [`OutputFile::open`] reopen at their path on SIGHUP ([`OutputFile::reopen_if_asked`]).
///
/// It is also an [`io::Write`] (for `writeln!` and the capture file writers): a write after
/// the first error fails with that error's kind, so a loop stops at the first write into a
/// closed pipe.
pub struct OutputFile {
    buf: Vec<u8>,
    inner: Box<dyn Write + Send>,
    pub(crate) error: Option<io::Error>,
    path: String,
    first_line: Option<String>,
    hangup: Option<Hangup>,
    /// When the buffer was last written out (or the file opened).
    flushed_at: Instant,
}

impl OutputFile {
    /// Opens `path` in `mode` (see [`open`]); `-` is standard output. Files are reopened on
    /// SIGHUP.
    pub fn open(path: &str, mode: FileMode) -> Result<OutputFile, String> {
        let (inner, first_line, hangup): (Box<dyn Write + Send>, _, _) = if path == "-" {
            (Box::new(io::stdout()), None, None)
        } else {
            let o = open(Path::new(path), mode).map_err(|e| format!("cannot open {path}: {e}"))?;
            let hangup = Hangup::watch().map_err(|e| format!("cannot watch SIGHUP: {e}"))?;
            (Box::new(o.file), o.first_line, Some(hangup))
        };
        Ok(OutputFile {
            buf: Vec::with_capacity(CHUNK * 2),
            inner,
            error: None,
            path: path.to_string(),
            first_line,
            hangup,
            flushed_at: Instant::now(),
        })
    }

    /// A one-shot command's output: `path` created (or truncated), or standard output for
    /// `-`; no SIGHUP reopening (the signal keeps its default meaning).
    pub fn create(path: &Path) -> io::Result<OutputFile> {
        let inner: Box<dyn Write + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(File::create(path)?)
        };
        Ok(OutputFile {
            buf: Vec::with_capacity(CHUNK * 2),
            inner,
            error: None,
            path: path.display().to_string(),
            first_line: None,
            hangup: None,
            flushed_at: Instant::now(),
        })
    }

    /// Writes out what is buffered and says how writing went: a reader that went away
    /// (EPIPE) is no error, as everything it wanted was written.
    pub fn finish(mut self) -> io::Result<()> {
        let _ = OutputFile::flush(&mut self);
        match self.error.take() {
            Some(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e),
            _ => Ok(()),
        }
    }

    /// The first line the file held when it was (re)opened; `None` when it was empty (a
    /// header belongs at its start) or is standard output.
    pub fn first_line(&self) -> Option<&str> {
        self.first_line.as_deref()
    }

    /// The path, as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the file reopens on SIGHUP (standard output does not).
    pub fn reopens(&self) -> bool {
        self.hangup.is_some()
    }

    /// After SIGHUP: writes out what is buffered (into the file as it was, perhaps renamed),
    /// then opens the path again, appending. Returns true when it reopened: the caller writes
    /// its header if [`OutputFile::first_line`] is `None` (a new, empty file).
    pub fn reopen_if_asked(&mut self) -> Result<bool, String> {
        if !self.hangup.as_ref().is_some_and(Hangup::take) {
            return Ok(false);
        }
        self.flush()?;
        let o = open(Path::new(&self.path), FileMode::Append)
            .map_err(|e| format!("cannot reopen {}: {e}", self.path))?;
        self.inner = Box::new(o.file);
        self.first_line = o.first_line;
        Ok(true)
    }

    /// The buffer to append to; call [`OutputFile::written`] after.
    #[inline]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Writes the buffer out once it is large enough. Returns the error once, the first time.
    pub fn written(&mut self) -> Result<(), String> {
        if self.buf.len() >= CHUNK {
            return self.flush();
        }
        Ok(())
    }

    /// Whether writing failed because the reader went away (EPIPE: `trawl flows | head`).
    pub fn closed(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    }

    /// What a writer block does with an error of [`OutputFile::written`] or
    /// [`OutputFile::flush`]: a reader that went away stops the run cleanly (there is no one
    /// left to write for, and that is not a failure: exit 0, as tcpdump); any other error
    /// fails it.
    pub fn settle(&self, result: Result<(), String>, ctx: &mut trawl_compose::Ctx<'_>) {
        match result {
            Ok(()) => {}
            Err(_) if self.closed() => ctx.stop(),
            Err(e) => ctx.fail(e),
        }
    }

    /// A writer block's timer: [`OutputFile::flush_if_stale`], its error settled as
    /// [`OutputFile::settle`] says.
    pub fn flush_stale(&mut self, ctx: &mut trawl_compose::Ctx<'_>) {
        let flushed = self.flush_if_stale();
        self.settle(flushed, ctx);
    }

    /// Writes out what has waited in the buffer for [`FLUSH_AFTER`] or longer: a writer
    /// calls it from its timer, so a reader of the file (`tail -f` on a collector's output)
    /// sees records within a second while few arrive, as it would with every write flushed.
    pub fn flush_if_stale(&mut self) -> Result<(), String> {
        if self.buf.is_empty() || self.flushed_at.elapsed() < FLUSH_AFTER {
            return Ok(());
        }
        self.flush()
    }

    /// Writes everything buffered.
    pub fn flush(&mut self) -> Result<(), String> {
        self.flushed_at = Instant::now();
        if self.error.is_none() {
            if let Err(e) = self
                .inner
                .write_all(&self.buf)
                .and_then(|_| self.inner.flush())
            {
                self.buf.clear();
                let msg = format!("cannot write {}: {e}", self.path);
                self.error = Some(e);
                return Err(msg);
            }
        }
        self.buf.clear();
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if let Some(e) = &self.error {
            return Err(e.kind().into());
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush_io()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_io()
    }
}

impl OutputFile {
    /// [`OutputFile::flush`] for [`io::Write`]: the error with its kind.
    fn flush_io(&mut self) -> io::Result<()> {
        if let Some(e) = &self.error {
            return Err(e.kind().into());
        }
        match OutputFile::flush(self) {
            Ok(()) => Ok(()),
            Err(msg) => Err(io::Error::new(
                self.error
                    .as_ref()
                    .map_or(io::ErrorKind::Other, io::Error::kind),
                msg,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_ends_writing_without_an_error_and_a_full_disk_is_one() {
        // A reader that went away: the first write that reaches it fails with EPIPE, later
        // writes fail at once (a loop stops), and finishing is no error.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut out = OutputFile::create(Path::new("/dev/null")).unwrap();
        out.inner = Box::new(writer);
        writeln!(out, "a record").unwrap();
        assert_eq!(
            Write::flush(&mut out).unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        assert!(out.closed());
        assert_eq!(
            writeln!(out, "another").unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        out.finish().unwrap();
        // A disk that is full is a failure the command must report.
        let mut out = OutputFile::create(Path::new("/dev/full")).unwrap();
        writeln!(out, "a record").unwrap();
        let e = out.finish().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
    }

    #[test]
    fn writes_gather_into_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut out = OutputFile::create(&path).unwrap();
        for i in 0..100 {
            writeln!(out, "line {i}").unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "",
            "still buffered"
        );
        out.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 100);
    }

    #[test]
    fn append_keeps_data_and_reads_the_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.csv");
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        let mut o = open(&path, FileMode::Append).unwrap();
        assert_eq!(o.first_line.as_deref(), Some("a,b"));
        o.file.write_all(b"3,4\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b\n1,2\n3,4\n");
        let o = open(&path, FileMode::Truncate).unwrap();
        assert_eq!(o.first_line, None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn check_header_refuses_other_columns() {
        assert!(check_header("f", None, b"a,b\n").is_ok());
        assert!(check_header("f", Some("{}"), b"").is_ok());
        assert!(check_header("f", Some("a,b"), b"a,b\n").is_ok());
        let e = check_header("f", Some("a,c"), b"a,b\n").unwrap_err();
        assert!(
            e.contains("cannot append to f") && e.contains("`a,c`"),
            "{e}"
        );
    }
}
