//! The message types trawl's blocks exchange, and the gate types that name them.
use std::sync::Arc;

use trawl_capture::live::BlockLease;
use trawl_capture::{Batch, Interface, PacketRecord, RecordMeta};
use trawl_compose::{MsgType, Payload};
use trawl_flow::FlowRecord;
use trawl_series::SeriesRow;

/// Gates carrying [`PacketBatch`].
pub const PACKETS: MsgType = MsgType::of::<PacketBatch>("packets");
/// Gates carrying [`FlowBatch`].
pub const FLOWS: MsgType = MsgType::of::<FlowBatch>("flows");
/// Gates carrying [`SeriesBatch`].
pub const SERIES: MsgType = MsgType::of::<SeriesBatch>("series");
/// Gates carrying [`Events`].
pub const EVENTS: MsgType = MsgType::of::<Events>("events");

/// Packets: the records' bytes in one buffer, their metadata, and the interface table their
/// `iface` fields index. Pooled by the source that fills it, so buffers keep their capacity.
#[derive(Default)]
pub struct PacketBatch {
    /// Captured bytes of every record, back to back (when the batch owns its bytes).
    pub bytes: Vec<u8>,
    /// The source's own buffer the records point into, when the batch shares it instead of
    /// owning a copy (see [`PacketBatch::fill_shared`]).
    pub shared: Option<Shared>,
    /// One entry per record; offsets index `bytes`.
    pub metas: Vec<RecordMeta>,
    /// The source's interfaces (shared, replaced only when the table changes).
    pub interfaces: Arc<[Interface]>,
    /// The source's byte order (BSD loopback headers follow it; filters need it).
    pub big_endian: bool,
    /// Packets from a live capture: when they stop coming, receivers may move their clocks on
    /// by wall time (files never do, so a replay gives the same results as live).
    pub live: bool,
    /// Which source block sent it: its position in the composition (parallel chains,
    /// and several sources into one dumper or ring, tell their packets apart by it).
    pub stream: u32,
    /// Set by `packet_lanes` only (empty otherwise): the lane of each record (one per entry of
    /// `metas`), `0..lane_count`, so that the `flow_meter` of each lane meters its own.
    pub lanes: Vec<u8>,
    /// How many lanes `lanes` spreads the records over (0 when it is empty).
    pub lane_count: u8,
}

impl Payload for PacketBatch {
    fn items(&self) -> usize {
        self.metas.len()
    }
}

/// A source's buffer that batches share instead of copying the records' bytes out of it.
#[derive(Clone, Debug)]
pub enum Shared {
    /// A file source's read buffer (`FileSource::next_shared_batch`).
    File(Arc<Vec<u8>>),
    /// A live capture's ring block, lent (`LiveSource::next_lent_batch`): the kernel gets it
    /// back only after every batch sharing it is dropped, so a block that keeps batches (a
    /// pool) lets go of spent ones' leases (`Pool::for_each_unheld`) before its next poll.
    Ring(BlockLease),
}

impl Shared {
    /// The bytes the records' offsets index.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match self {
            Shared::File(b) => b,
            Shared::Ring(lease) => lease.bytes(),
        }
    }
}

impl From<Arc<Vec<u8>>> for Shared {
    fn from(b: Arc<Vec<u8>>) -> Shared {
        Shared::File(b)
    }
}

impl From<BlockLease> for Shared {
    fn from(lease: BlockLease) -> Shared {
        Shared::Ring(lease)
    }
}

impl PacketBatch {
    /// The records as a capture [`Batch`] (what the flow meter, filters and writers read).
    #[inline]
    pub fn batch(&self) -> Batch<'_> {
        let bytes = self.shared.as_ref().map_or(&self.bytes[..], Shared::bytes);
        Batch::new(&self.metas, bytes, &self.interfaces)
    }

    /// Replaces the contents with the records of `batch` without copying their bytes:
    /// `buffer` is the source buffer they point into, shared for as long as this batch holds
    /// it. [`PacketBatch::retain`] filters them after.
    pub fn fill_shared(&mut self, batch: &Batch<'_>, buffer: impl Into<Shared>) {
        let buffer = buffer.into();
        debug_assert!(batch.bytes().len() <= buffer.bytes().len());
        self.metas.clear();
        self.metas.extend_from_slice(batch.metas());
        self.bytes.clear();
        self.shared = Some(buffer);
        self.clear_lanes();
    }

    /// Replaces the contents with copies of `records` (from several buffers: files merged by
    /// time).
    pub fn fill_records(&mut self, records: &[PacketRecord<'_>]) {
        self.metas.clear();
        self.bytes.clear();
        self.shared = None;
        self.clear_lanes();
        // Sized once: growing by doubling while copying took several allocations each time a
        // pooled batch met larger packets than before.
        self.metas.reserve(records.len());
        self.bytes
            .reserve(records.iter().map(|r| r.data.len()).sum::<usize>());
        for r in records {
            self.push(r);
        }
    }

    /// Forgets the records' lanes (new records have none until `packet_lanes` gives them).
    fn clear_lanes(&mut self) {
        self.lanes.clear();
        self.lane_count = 0;
    }

    /// The lanes of the records when `packet_lanes` gave them into `count` lanes (and the
    /// records are still those it tagged).
    pub fn lanes_of(&self, count: usize) -> Option<&[u8]> {
        (usize::from(self.lane_count) == count && self.lanes.len() == self.metas.len())
            .then_some(&self.lanes[..])
    }

    /// Appends a copy of `r` to a batch that owns its bytes (filled by [`Self::fill_records`]
    /// or by pushes after `clear`).
    pub fn push(&mut self, r: &PacketRecord<'_>) {
        debug_assert!(self.shared.is_none(), "push into a batch sharing a buffer");
        self.metas.push(RecordMeta {
            ts_ns: r.ts_ns,
            offset: self.bytes.len(),
            caplen: r.data.len() as u32,
            wire_len: r.wire_len,
            iface: r.iface,
            direction: r.direction,
        });
        self.bytes.extend_from_slice(r.data);
    }

    /// Keeps only the records `keep` says yes to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&PacketRecord<'_>) -> bool) {
        let bytes = self.shared.as_ref().map_or(&self.bytes[..], Shared::bytes);
        let interfaces = &self.interfaces;
        self.metas.retain(|m| {
            keep(&PacketRecord {
                ts_ns: m.ts_ns,
                wire_len: m.wire_len,
                iface: m.iface,
                direction: m.direction,
                link_type: interfaces[m.iface as usize].link_type,
                data: &bytes[m.offset..m.offset + m.caplen as usize],
            })
        });
    }

    /// Replaces the contents with `records` (all of them, or those `keep` says yes to),
    /// copying their bytes into this batch's buffer. The copy is one `memcpy` of the span the
    /// kept records occupy in the source's buffer when they are contiguous, which they are
    /// for every source trawl has.
    pub fn fill(&mut self, batch: &Batch<'_>, mut keep: impl FnMut(&PacketRecord<'_>) -> bool) {
        self.metas.clear();
        self.bytes.clear();
        self.shared = None;
        self.clear_lanes();
        let metas = batch.metas();
        let (Some(first), Some(last)) = (metas.first(), metas.last()) else {
            return;
        };
        let lo = first.offset;
        let hi = last.offset + last.caplen as usize;
        let contiguous = hi >= lo
            && metas
                .iter()
                .all(|m| m.offset >= lo && m.offset + m.caplen as usize <= hi);
        if contiguous {
            self.bytes.extend_from_slice(&batch.bytes()[lo..hi]);
            for (i, m) in metas.iter().enumerate() {
                if keep(&batch.get(i)) {
                    self.metas.push(RecordMeta {
                        offset: m.offset - lo,
                        ..*m
                    });
                }
            }
        } else {
            for (i, m) in metas.iter().enumerate() {
                let pkt = batch.get(i);
                if keep(&pkt) {
                    self.metas.push(RecordMeta {
                        offset: self.bytes.len(),
                        ..*m
                    });
                    self.bytes.extend_from_slice(pkt.data);
                }
            }
        }
    }
}

/// Flow records, initiator to responder. Their payload bytes (when the meter keeps them,
/// `flow_meter`'s `payload_bytes`) travel beside them: read the records through
/// [`FlowBatch::with_payload`] to have them.
#[derive(Default)]
pub struct FlowBatch {
    /// The records, in emission order, with empty payloads.
    pub records: Vec<FlowRecord<'static>>,
    /// The payload bytes of every record, forward then reverse, back to back (empty when the
    /// meter keeps none).
    pub payload: Vec<u8>,
    /// Per record, the lengths of its forward and reverse payload in [`FlowBatch::payload`];
    /// empty when the meter keeps none.
    pub payload_lens: Vec<[u32; 2]>,
    /// Packet time (ns) up to which the meter had processed packets when it sent these: later
    /// records come from packets at or after it (or are late packets' flows), so stores can
    /// close their time blocks behind it with a grace time. 0 claims nothing (the records of
    /// the end-of-input flush).
    pub clock_ns: u64,
    /// Which meter sent them: its position in the composition.
    pub stream: u32,
    /// The interface their packets were captured on: set when the meter's packets come from
    /// live capture on one named interface, `None` for files and for a meter fed by several
    /// interfaces (writers then name none).
    pub iface: Option<Arc<str>>,
    /// Where collected records came from (`ipfix_source`: `exp-ADDRESS-DOMAIN` for an
    /// exporter's observation domain, a name for a file): a `flow_store` without an `iface`
    /// of its own stores them under it. Writers do not print it (the records' own fields
    /// stay what the exporter sent).
    pub origin: Option<Arc<str>>,
}

impl Payload for FlowBatch {
    fn items(&self) -> usize {
        self.records.len()
    }
}

impl FlowBatch {
    /// Whether the records carry payload bytes.
    pub fn has_payload(&self) -> bool {
        !self.payload_lens.is_empty()
    }

    /// The records with their payload bytes, in emission order.
    pub fn with_payload(&self) -> impl Iterator<Item = FlowRecord<'_>> + '_ {
        let mut at = 0usize;
        self.records
            .iter()
            .zip(&self.payload_lens)
            .map(move |(r, [fwd, rev])| {
                let (fwd, rev) = (*fwd as usize, *rev as usize);
                let fwd_payload = &self.payload[at..at + fwd];
                let rev_payload = &self.payload[at + fwd..at + fwd + rev];
                at += fwd + rev;
                FlowRecord {
                    fwd_payload,
                    rev_payload,
                    ..*r
                }
            })
    }

    /// Appends a record, keeping its payload bytes when `payload` is set.
    #[inline]
    pub fn push(&mut self, r: &FlowRecord<'_>, payload: bool) {
        self.records.push(FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        });
        if payload {
            self.payload.extend_from_slice(r.fwd_payload);
            self.payload.extend_from_slice(r.rev_payload);
            self.payload_lens
                .push([r.fwd_payload.len() as u32, r.rev_payload.len() as u32]);
        }
    }

    /// Empties the batch, keeping its buffers' capacity.
    pub fn clear(&mut self) {
        self.records.clear();
        self.payload.clear();
        self.payload_lens.clear();
    }
}

/// Per-second rows of one counter, with how far that counter has got.
#[derive(Default)]
pub struct SeriesBatch {
    /// Rows, oldest first.
    pub rows: Vec<SeriesRow>,
    /// Which counter sent them.
    pub stream: u32,
    /// This counter will send no row for a second before this one (merging waits for every
    /// counter's watermark).
    pub watermark: u64,
    /// Set on a counter's last batch: it sends nothing after.
    pub last: bool,
    /// The interface the rows' packets were captured on, as [`FlowBatch::iface`]: set when
    /// they all come from live capture on one named interface (a `series_merge` keeps it
    /// when every counter it sums names the same one), `None` otherwise.
    pub iface: Option<Arc<str>>,
}

impl Payload for SeriesBatch {
    fn items(&self) -> usize {
        self.rows.len()
    }
}

/// Events of monitoring applications (alarms, reports, call records), each one JSON object:
/// as a `serde_json::Value` ([`Events::events`]) or already written as JSON text
/// ([`Events::lines`]: records of which a run writes millions, `rtp_calls`'). Readers take
/// both through [`Events::iter`].
#[derive(Default)]
pub struct Events {
    /// The events, oldest first.
    pub events: Vec<Event>,
    /// Events written as JSON text, after [`Events::events`].
    pub lines: JsonLines,
}

impl Events {
    /// Empties both lists (a pooled batch being refilled).
    pub fn clear(&mut self) {
        self.events.clear();
        self.lines.clear();
    }

    /// Every event, those of [`Events::events`] first.
    pub fn iter(&self) -> impl Iterator<Item = EventRef<'_>> {
        self.events.iter().map(EventRef::Value).chain(
            self.lines
                .iter()
                .map(|(ts_ns, json)| EventRef::Text(ts_ns, json)),
        )
    }
}

/// Events as JSON text: objects back to back in one buffer, each with its time.
#[derive(Default)]
pub struct JsonLines {
    bytes: Vec<u8>,
    /// Per event: its time and where its text ends in `bytes`.
    ends: Vec<(u64, usize)>,
}

impl JsonLines {
    /// Adds an event of time `ts_ns` whose JSON object `write` appends to the buffer it is
    /// given (one object, no newline).
    pub fn push(&mut self, ts_ns: u64, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.ends.push((ts_ns, self.bytes.len()));
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of text held.
    pub fn text_len(&self) -> usize {
        self.bytes.len()
    }

    /// Removes them all (the buffers keep their capacity).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Each event's time and text.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        self.ends
            .iter()
            .zip(starts)
            .map(|(&(ts_ns, end), start)| (ts_ns, &self.bytes[start..end]))
    }
}

/// One event of [`Events`], in either form.
#[derive(Clone, Copy, Debug)]
pub enum EventRef<'a> {
    /// An event held as a `Value`.
    Value(&'a Event),
    /// An event held as JSON text (its time, its object).
    Text(u64, &'a [u8]),
}

impl EventRef<'_> {
    /// Packet time the event refers to (ns).
    pub fn ts_ns(&self) -> u64 {
        match self {
            EventRef::Value(e) => e.ts_ns,
            EventRef::Text(ts_ns, _) => *ts_ns,
        }
    }

    /// The event as a [`Event`] (text is parsed: for readers of a few events, such as the
    /// alarm store; writers use [`EventRef::write_json`]).
    pub fn to_event(&self) -> Event {
        match self {
            EventRef::Value(e) => (*e).clone(),
            EventRef::Text(ts_ns, text) => Event {
                ts_ns: *ts_ns,
                json: serde_json::from_slice(text).unwrap_or_default(),
            },
        }
    }

    /// Appends the event's JSON object (no newline), with its top-level `*_ns` integers as
    /// RFC 3339 text when `rfc3339_times` (`time_format = "rfc3339"`).
    pub fn write_json(&self, rfc3339_times: bool, out: &mut Vec<u8>) {
        // Writing JSON into a Vec cannot fail.
        match (self, rfc3339_times) {
            (EventRef::Value(e), false) => {
                let _ = serde_json::to_writer(&mut *out, &e.json);
            }
            (EventRef::Value(e), true) => {
                let _ = serde_json::to_writer(&mut *out, &crate::write::rfc3339_instants(&e.json));
            }
            (EventRef::Text(_, text), false) => out.extend_from_slice(text),
            (EventRef::Text(_, text), true) => crate::write::rfc3339_instants_text(text, out),
        }
    }
}

/// One event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Packet time the event refers to (ns).
    pub ts_ns: u64,
    /// The event as one JSON object (what writers print, one per line).
    pub json: serde_json::Value,
}

impl Payload for Events {
    fn items(&self) -> usize {
        self.events.len() + self.lines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_batches_give_each_record_its_own_payload_bytes() {
        let r = trawl_export::decode::empty_record();
        let mut b = FlowBatch::default();
        let (a_fwd, a_rev, c_rev) = (
            b"GET /".to_vec(),
            b"HTTP/1.1".to_vec(),
            b"\x16\x03".to_vec(),
        );
        for (fwd, rev) in [
            (&a_fwd[..], &a_rev[..]),
            (&[][..], &[][..]),
            (&[][..], &c_rev[..]),
        ] {
            b.push(
                &FlowRecord {
                    fwd_payload: fwd,
                    rev_payload: rev,
                    ..r
                },
                true,
            );
        }
        assert!(b.has_payload());
        let got: Vec<(&[u8], &[u8])> = b
            .with_payload()
            .map(|r| (r.fwd_payload, r.rev_payload))
            .collect();
        assert_eq!(
            got,
            vec![
                (&a_fwd[..], &a_rev[..]),
                (&[][..], &[][..]),
                (&[][..], &c_rev[..])
            ]
        );
        assert!(b.records.iter().all(|r| r.fwd_payload.is_empty()));
        b.clear();
        b.push(&r, false);
        assert!(!b.has_payload(), "a meter without payload bytes sends none");
    }
}
