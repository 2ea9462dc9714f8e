//! A bounded on-disk spool of Kafka messages that could not be delivered: brokers down or
//! unreachable. Messages are appended to numbered segment files in one directory; when the
//! brokers answer again the oldest segment is sent first and deleted once every message of it
//! was either acknowledged or spooled again. When the spool would grow past its size, its
//! oldest segment is deleted and its messages counted as dropped: the spool never blocks the
//! exporter, and so never capture. Segments survive a restart, which sends them.
//!
//! Format (`docs/specs/kafka.md`): a segment `NNNNNNNNNNNNNNNNNNNN.spool` (its sequence
//! number, 20 digits) starts with the 8 bytes `TRWLSPL1`, then holds entries back to back:
//! topic length (u16 LE), key length (u32 LE), value length (u32 LE), topic, key, value. A
//! torn last entry (a crash during a write) is ignored and counted.
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"TRWLSPL1";
/// Bytes of an entry before its topic, key and value.
const ENTRY_HEADER: usize = 2 + 4 + 4;
/// A spool holds at least this many segments' worth of bytes, so that dropping the oldest
/// segment drops a fraction of it, not all.
const SEGMENTS: u64 = 8;

/// One spooled message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The topic it goes to.
    pub topic: String,
    /// The message key.
    pub key: Vec<u8>,
    /// The message value.
    pub value: Vec<u8>,
}

/// A closed or open segment file.
#[derive(Debug)]
struct Segment {
    seq: u64,
    bytes: u64,
    entries: u64,
}

/// Counters of a spool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpoolStats {
    /// Messages written to the spool.
    pub spooled: u64,
    /// Messages dropped: their segment was the oldest when the spool was full.
    pub dropped: u64,
    /// Torn entries found at the end of a segment (a crash during a write), skipped.
    pub torn: u64,
}

/// The spool of one exporter: a directory of segments, at most `max_bytes` in all.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    /// Oldest first; the last one is open for appending when `open` is set.
    segments: Vec<Segment>,
    open: Option<BufWriter<File>>,
    next_seq: u64,
    stats: SpoolStats,
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.spool"))
}

impl Spool {
    /// Opens (creates) the spool in `dir`, holding at most `max_bytes` (at least 64 KiB per
    /// segment), and takes in the segments a previous run left there.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Spool> {
        fs::create_dir_all(dir)?;
        let mut seqs: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".spool")?.parse().ok()
            })
            .collect();
        seqs.sort_unstable();
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            max_bytes,
            segment_bytes: (max_bytes / SEGMENTS).max(64 << 10),
            segments: Vec::new(),
            open: None,
            next_seq: seqs.last().map_or(1, |s| s + 1),
            stats: SpoolStats::default(),
        };
        for seq in seqs {
            let path = segment_path(dir, seq);
            let (entries, torn) = read_segment(&path)?;
            spool.stats.torn += torn;
            spool.segments.push(Segment {
                seq,
                bytes: fs::metadata(&path)?.len(),
                entries: entries.len() as u64,
            });
        }
        Ok(spool)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Counters so far.
    pub fn stats(&self) -> SpoolStats {
        self.stats
    }

    /// Messages in the spool now.
    pub fn pending(&self) -> u64 {
        self.segments.iter().map(|s| s.entries).sum()
    }

    /// Bytes of the spool's segments now.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Appends a message; drops the oldest segments not in `busy` (being sent) while the
    /// spool would be over its size. A message that finds no room even then is dropped.
    pub fn append(
        &mut self,
        topic: &str,
        key: &[u8],
        value: &[u8],
        busy: &[u64],
    ) -> io::Result<()> {
        let len = (ENTRY_HEADER + topic.len() + key.len() + value.len()) as u64;
        while self.bytes() + len > self.max_bytes {
            if !self.drop_oldest(busy)? {
                self.stats.dropped += 1;
                return Ok(());
            }
        }
        if self.open.is_none()
            || self
                .segments
                .last()
                .is_some_and(|s| s.bytes >= self.segment_bytes)
        {
            self.start_segment()?;
        }
        let w = self.open.as_mut().expect("a segment was just opened");
        let too_long = |what| io::Error::new(io::ErrorKind::InvalidInput, what);
        let tl =
            u16::try_from(topic.len()).map_err(|_| too_long("topic longer than 65535 bytes"))?;
        let kl = u32::try_from(key.len()).map_err(|_| too_long("key longer than 4 GiB"))?;
        let vl = u32::try_from(value.len()).map_err(|_| too_long("value longer than 4 GiB"))?;
        w.write_all(&tl.to_le_bytes())?;
        w.write_all(&kl.to_le_bytes())?;
        w.write_all(&vl.to_le_bytes())?;
        w.write_all(topic.as_bytes())?;
        w.write_all(key)?;
        w.write_all(value)?;
        let seg = self.segments.last_mut().expect("open segment");
        seg.bytes += len;
        seg.entries += 1;
        self.stats.spooled += 1;
        Ok(())
    }

    fn start_segment(&mut self) -> io::Result<()> {
        self.close()?;
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut w = BufWriter::with_capacity(1 << 16, File::create(segment_path(&self.dir, seq))?);
        w.write_all(MAGIC)?;
        self.open = Some(w);
        self.segments.push(Segment {
            seq,
            bytes: MAGIC.len() as u64,
            entries: 0,
        });
        Ok(())
    }

    /// Deletes the oldest segment not in `busy`, counting its messages as dropped; false when
    /// there is none to delete.
    fn drop_oldest(&mut self, busy: &[u64]) -> io::Result<bool> {
        let Some(i) = self.segments.iter().position(|s| !busy.contains(&s.seq)) else {
            return Ok(false);
        };
        if i + 1 == self.segments.len() && self.open.is_some() {
            self.open = None;
        }
        let s = self.segments.remove(i);
        self.stats.dropped += s.entries;
        fs::remove_file(segment_path(&self.dir, s.seq))?;
        Ok(true)
    }

    /// Writes out what is buffered and closes the open segment: the next append starts a
    /// new one.
    pub fn close(&mut self) -> io::Result<()> {
        if let Some(mut w) = self.open.take() {
            w.flush()?;
        }
        Ok(())
    }

    /// Writes out what is buffered (the open segment stays open).
    pub fn flush(&mut self) -> io::Result<()> {
        match self.open.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }

    /// The oldest segment not in `busy`, with its messages, to be sent (closed first if it
    /// is the open one). `None` when there is none.
    pub fn take_oldest(&mut self, busy: &[u64]) -> io::Result<Option<(u64, Vec<Entry>)>> {
        let Some(i) = self.segments.iter().position(|s| !busy.contains(&s.seq)) else {
            return Ok(None);
        };
        if i + 1 == self.segments.len() {
            self.close()?;
        }
        let seq = self.segments[i].seq;
        let (entries, torn) = read_segment(&segment_path(&self.dir, seq))?;
        self.stats.torn += torn;
        Ok(Some((seq, entries)))
    }

    /// Deletes segment `seq` (every message of it was acknowledged or spooled again).
    pub fn remove(&mut self, seq: u64) -> io::Result<()> {
        if let Some(i) = self.segments.iter().position(|s| s.seq == seq) {
            if i + 1 == self.segments.len() {
                self.close()?;
            }
            self.segments.remove(i);
            fs::remove_file(segment_path(&self.dir, seq))?;
        }
        Ok(())
    }
}

/// The entries of a segment, and 1 when its last entry is torn.
fn read_segment(path: &Path) -> io::Result<(Vec<Entry>, u64)> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        // A segment cut before its magic was written holds nothing.
        return Ok((Vec::new(), u64::from(!bytes.is_empty())));
    }
    let mut entries = Vec::new();
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let Some(e) = parse_entry(&bytes[at..]) else {
            return Ok((entries, 1));
        };
        at += ENTRY_HEADER + e.topic.len() + e.key.len() + e.value.len();
        entries.push(e);
    }
    Ok((entries, 0))
}

fn parse_entry(b: &[u8]) -> Option<Entry> {
    let head = b.get(..ENTRY_HEADER)?;
    let tl = usize::from(u16::from_le_bytes([head[0], head[1]]));
    let kl = u32::from_le_bytes(head[2..6].try_into().ok()?) as usize;
    let vl = u32::from_le_bytes(head[6..10].try_into().ok()?) as usize;
    let body = b.get(ENTRY_HEADER..ENTRY_HEADER + tl + kl + vl)?;
    Some(Entry {
        topic: String::from_utf8(body[..tl].to_vec()).ok()?,
        key: body[tl..tl + kl].to_vec(),
        value: body[tl + kl..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_reopen_take_remove() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        s.append("flows", b"probe", b"{\"a\":1}", &[]).unwrap();
        s.append("flows-alarms", b"", b"x", &[]).unwrap();
        s.flush().unwrap();
        drop(s);
        // A restart finds both, and a torn tail is skipped and counted.
        let seg = dir.path().join(format!("{:020}.spool", 1));
        fs::OpenOptions::new()
            .append(true)
            .open(&seg)
            .unwrap()
            .write_all(&[5, 0, 0])
            .unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.pending(), 2);
        assert_eq!(s.stats().torn, 1);
        let (seq, entries) = s.take_oldest(&[]).unwrap().unwrap();
        assert_eq!(seq, 1);
        assert_eq!(entries[0].topic, "flows");
        assert_eq!(entries[0].key, b"probe");
        assert_eq!(entries[1].value, b"x");
        assert!(s.take_oldest(&[seq]).unwrap().is_none());
        s.remove(seq).unwrap();
        assert_eq!(s.pending(), 0);
        assert!(!seg.exists());
    }

    #[test]
    fn full_spool_drops_oldest_segment() {
        let dir = tempfile::tempdir().unwrap();
        // 64 KiB segments (the least), 256 KiB in all.
        let mut s = Spool::open(dir.path(), 256 << 10).unwrap();
        let value = vec![7u8; 1000];
        for i in 0..1000u32 {
            s.append("t", &i.to_be_bytes(), &value, &[]).unwrap();
        }
        let st = s.stats();
        assert_eq!(st.spooled, 1000);
        assert!(st.dropped > 0, "{st:?}");
        assert_eq!(s.pending() + st.dropped, 1000);
        assert!(s.bytes() <= 256 << 10);
        // What is left is the newest: the oldest key left follows the last one dropped.
        let (_, entries) = s.take_oldest(&[]).unwrap().unwrap();
        assert_eq!(entries[0].key, (st.dropped as u32).to_be_bytes());
    }
}
