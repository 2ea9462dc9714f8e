//! Several capture files read as one stream in packet-time order, as mergecap merges them: the
//! two directions of a link captured by two taps, several interfaces captured apart, or a
//! rotated capture given in any order all read as the traffic they recorded.
//!
//! Each file's first packet time is read first (the file is then closed again); files are
//! opened when the merge reaches their first packet, and closed at their end, so a day of
//! rotated files keeps one or two open, not all. Among the open files the packet with the
//! earliest time goes next; a file's own order is kept (its reordered packets are not sorted).
//! Ties go to the file given first.
//!
//! Interfaces are merged as mergecap merges pcapng interfaces: each file's interfaces get
//! places of their own in one table ([`MergedFiles::interfaces`]), in the order the merge
//! meets them, and records carry their index in that table.
use std::path::{Path, PathBuf};

use crate::{
    FileSource, FileSourceConfig, Interface, PacketRecord, PacketSource, RecordMeta, SharedBytes,
    SourceStats,
};

/// An input file waiting for the merge to reach its first packet.
struct Pending {
    /// Position in the list of files (ties between equal times go to the earlier file).
    order: usize,
    path: PathBuf,
    first_ts: u64,
}

/// What a record's file is, for callers that treat files apart (a filter compiled per file).
#[derive(Clone, Copy, Debug)]
pub struct MergedFile<'a> {
    /// Position in the list of files given to [`MergedFiles::open`].
    pub order: usize,
    /// The file.
    pub path: &'a Path,
    /// The file's byte order (BSD loopback headers follow it).
    pub big_endian: bool,
}

/// An open file: the batch it read last (metadata copied, bytes shared with the reader, so
/// the reader can go on while these records are still in use).
struct Cursor {
    order: usize,
    path: PathBuf,
    source: FileSource,
    metas: Vec<RecordMeta>,
    bytes: SharedBytes,
    /// The file's interfaces: index in the merged table, and link type.
    interfaces: Vec<(u16, Interface)>,
}

impl Cursor {
    /// Reads the next batch; false at the end of the file (an error ends it too, reported).
    /// New interfaces of the file are added to `table` (named after `unnamed` where the file
    /// names none).
    fn refill(
        &mut self,
        table: &mut Vec<Interface>,
        unnamed: Option<&str>,
        errors: &mut Vec<String>,
    ) -> bool {
        loop {
            match self.source.next_shared_batch() {
                Ok(Some((batch, _))) if batch.is_empty() => continue,
                Ok(Some((batch, bytes))) => {
                    self.metas.clear();
                    self.metas.extend_from_slice(batch.metas());
                    for new in batch
                        .interfaces()
                        .get(self.interfaces.len()..)
                        .unwrap_or(&[])
                    {
                        let mut new = new.clone();
                        if let Some(pattern) = unnamed {
                            name_unnamed(&mut new, pattern, self.interfaces.len());
                        }
                        // More than 65536 interfaces over all files: the rest share the
                        // last place (their link types still come from their own file).
                        let place = u16::try_from(table.len()).unwrap_or(u16::MAX);
                        if table.len() <= usize::from(u16::MAX) {
                            table.push(new.clone());
                        }
                        self.interfaces.push((place, new));
                    }
                    self.bytes = bytes;
                    return true;
                }
                Ok(None) => return false,
                Err(e) => {
                    errors.push(e.to_string());
                    return false;
                }
            }
        }
    }

    fn record(&self, i: usize) -> PacketRecord<'_> {
        let m = &self.metas[i];
        let (place, iface) = &self.interfaces[usize::from(m.iface)];
        PacketRecord {
            ts_ns: m.ts_ns,
            wire_len: m.wire_len,
            iface: *place,
            direction: m.direction,
            link_type: iface.link_type,
            data: &self.bytes[m.offset..m.offset + m.caplen as usize],
        }
    }

    fn file(&self) -> MergedFile<'_> {
        MergedFile {
            order: self.order,
            path: &self.path,
            big_endian: self.source.big_endian(),
        }
    }
}

/// Names interface `index` of a file after `pattern` if the file names it not (pcap files,
/// pcapng without `if_name`): `{}` in the pattern is replaced by the index (`if{}`: `if0`,
/// `if1`, ...); a pattern without it names the file's first interface as it is and the others
/// with their index appended (`eth0`, `eth01`, ...), as `trawl dump --iface` always did. Each
/// file counts its own interfaces, so the first interface of every file gets the same name.
pub fn name_unnamed(iface: &mut Interface, pattern: &str, index: usize) {
    if iface.name.is_some() {
        return;
    }
    iface.name = Some(if pattern.contains("{}") {
        pattern.replace("{}", &index.to_string())
    } else if index == 0 {
        pattern.to_string()
    } else {
        format!("{pattern}{index}")
    });
}

/// The first packet time of a file (`None` for a file without packets), and its counters
/// when that is all it holds.
fn first_time(
    path: &Path,
    config: &FileSourceConfig,
) -> Result<(Option<u64>, SourceStats), String> {
    let mut source = FileSource::with_config(path, config.clone()).map_err(|e| e.to_string())?;
    loop {
        match source.next_batch() {
            Ok(Some(b)) if b.is_empty() => continue,
            Ok(Some(b)) => return Ok((Some(b.metas()[0].ts_ns), SourceStats::default())),
            Ok(None) => return Ok((None, source.stats())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Capture files read as one stream in packet-time order.
pub struct MergedFiles {
    config: FileSourceConfig,
    /// Latest first, so the next file to open is popped off the end.
    pending: Vec<Pending>,
    // Open files and their read positions, kept apart so that a batch can borrow the
    // cursors' bytes while positions move.
    open: Vec<Cursor>,
    pos: Vec<usize>,
    /// A file whose batch the last call used up: read on at the next call (the records handed
    /// out borrowed that batch).
    exhausted: Option<usize>,
    interfaces: Vec<Interface>,
    /// How interfaces that their file leaves unnamed are named ([`name_unnamed`]).
    unnamed: Option<String>,
    finished: SourceStats,
    finished_len: u64,
    total_len: u64,
    /// Files opened (including those without packets).
    pub files_read: usize,
    /// Files that could not be opened.
    pub files_failed: usize,
    /// Errors of files that could not be opened or read to their end.
    pub errors: Vec<String>,
}

impl MergedFiles {
    /// Looks at each file's first packet (standard input cannot be one of them: it cannot be
    /// read twice). Files that cannot be opened are counted and reported, not fatal.
    pub fn open(files: &[PathBuf], config: &FileSourceConfig) -> Self {
        let mut m = MergedFiles {
            config: config.clone(),
            pending: Vec::new(),
            open: Vec::new(),
            pos: Vec::new(),
            exhausted: None,
            interfaces: Vec::new(),
            unnamed: None,
            finished: SourceStats::default(),
            finished_len: 0,
            total_len: 0,
            files_read: 0,
            files_failed: 0,
            errors: Vec::new(),
        };
        for (order, path) in files.iter().enumerate() {
            match first_time(path, config) {
                Ok((Some(first_ts), _)) => {
                    m.total_len += std::fs::metadata(path).map_or(0, |md| md.len());
                    m.pending.push(Pending {
                        order,
                        path: path.clone(),
                        first_ts,
                    });
                }
                Ok((None, stats)) => {
                    m.files_read += 1;
                    m.finished.add(&stats);
                }
                Err(e) => {
                    m.files_failed += 1;
                    m.errors.push(e);
                }
            }
        }
        m.pending
            .sort_by_key(|p| std::cmp::Reverse((p.first_ts, p.order)));
        m
    }

    /// Names the interfaces that their file leaves unnamed after `pattern` (see
    /// [`name_unnamed`]) as the merge meets them; by default they stay unnamed.
    pub fn name_unnamed(&mut self, pattern: Option<String>) {
        self.unnamed = pattern;
    }

    /// Fills `out` (emptied first) with the next packets in time order that `keep` says yes
    /// to: up to the configuration's batch size (fewer where a file's batch ends, possibly
    /// none). Returns the interface table the records index, `None` once every file is read.
    pub fn next_batch<'a>(
        &'a mut self,
        out: &mut Vec<PacketRecord<'a>>,
        mut keep: impl FnMut(&PacketRecord<'_>, MergedFile<'_>) -> bool,
    ) -> Option<&'a [Interface]> {
        out.clear();
        if let Some(i) = self.exhausted.take() {
            self.pos[i] = 0;
            let unnamed = self.unnamed.as_deref();
            if !self.open[i].refill(&mut self.interfaces, unnamed, &mut self.errors) {
                let c = self.open.swap_remove(i);
                self.pos.swap_remove(i);
                self.finished.add(&c.source.stats());
                self.finished_len += c.source.progress().map_or(0, |(_, total)| total);
            }
        }
        self.open_due();
        if self.open.is_empty() {
            return None;
        }
        let next_pending = self.pending.last().map(|p| p.first_ts);
        let limit = self.config.batch_size.max(1);
        let MergedFiles {
            open,
            pos,
            interfaces,
            ..
        } = self;
        let open: &'a [Cursor] = open;
        while out.len() < limit {
            let mut best = 0;
            for i in 1..open.len() {
                let (a, b) = (&open[i], &open[best]);
                if (a.metas[pos[i]].ts_ns, a.order) < (b.metas[pos[best]].ts_ns, b.order) {
                    best = i;
                }
            }
            let ts = open[best].metas[pos[best]].ts_ns;
            if next_pending.is_some_and(|t| t <= ts) {
                break; // a file not open yet starts earlier (or as early: it opens first)
            }
            let pkt = open[best].record(pos[best]);
            pos[best] += 1;
            if keep(&pkt, open[best].file()) {
                out.push(pkt);
            }
            if pos[best] == open[best].metas.len() {
                self.exhausted = Some(best);
                break;
            }
        }
        Some(interfaces)
    }

    /// Opens every file whose first packet is not later than the earliest open packet (the
    /// earliest pending file when none is open).
    fn open_due(&mut self) {
        loop {
            let earliest_open = (0..self.open.len())
                .map(|i| self.open[i].metas[self.pos[i]].ts_ns)
                .min();
            let Some(p) = self.pending.last() else { return };
            if earliest_open.is_some_and(|t| p.first_ts > t) {
                return;
            }
            let p = self.pending.pop().expect("just seen");
            let source = match FileSource::with_config(&p.path, self.config.clone()) {
                Ok(s) => s,
                Err(e) => {
                    self.files_failed += 1;
                    self.errors.push(e.to_string());
                    continue;
                }
            };
            self.files_read += 1;
            let mut c = Cursor {
                order: p.order,
                path: p.path,
                source,
                metas: Vec::new(),
                bytes: SharedBytes::default(),
                interfaces: Vec::new(),
            };
            if !c.refill(
                &mut self.interfaces,
                self.unnamed.as_deref(),
                &mut self.errors,
            ) {
                self.finished.add(&c.source.stats());
                continue;
            }
            self.open.push(c);
            self.pos.push(0);
        }
    }

    /// Interfaces of every file opened so far; records' `iface` fields index this table.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// Counters of every file so far.
    pub fn stats(&self) -> SourceStats {
        let mut s = self.finished;
        for c in &self.open {
            s.add(&c.source.stats());
        }
        s
    }

    /// Bytes read of all files' bytes, for progress displays.
    pub fn progress(&self) -> (u64, u64) {
        let done = self.finished_len
            + self
                .open
                .iter()
                .map(|c| c.source.progress().map_or(0, |(d, _)| d))
                .sum::<u64>();
        (done, self.total_len)
    }
}

#[cfg(test)]
mod tests {
    use super::name_unnamed;
    use crate::{Interface, LinkType};

    fn named(pattern: &str, index: usize, given: Option<&str>) -> Option<String> {
        let mut i = Interface {
            link_type: LinkType::ETHERNET,
            snaplen: 0,
            name: given.map(str::to_string),
        };
        name_unnamed(&mut i, pattern, index);
        i.name
    }

    #[test]
    fn unnamed_interfaces_are_named_after_the_pattern_and_their_place_in_the_file() {
        assert_eq!(named("eth0", 0, None).as_deref(), Some("eth0"));
        assert_eq!(named("eth0", 2, None).as_deref(), Some("eth02"));
        assert_eq!(named("if{}", 0, None).as_deref(), Some("if0"));
        assert_eq!(named("if{}", 3, None).as_deref(), Some("if3"));
        assert_eq!(named("if{}", 3, Some("en0")).as_deref(), Some("en0"));
    }
}
