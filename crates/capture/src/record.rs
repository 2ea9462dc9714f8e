//! The unit every source produces and every stage consumes: a packet record.

/// Nanoseconds since the Unix epoch (UTC). trawl uses this for every timestamp.
pub type TimestampNs = u64;

/// Link-layer header type, numbered as in the tcpdump.org LINKTYPE registry
/// (the value stored in pcap and pcapng headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u16);

impl LinkType {
    /// BSD loopback: 4-byte address family in host byte order of the capturing machine.
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet II / 802.3.
    pub const ETHERNET: LinkType = LinkType(1);
    /// Raw IP, version taken from the first nibble.
    pub const RAW: LinkType = LinkType(101);
    /// OpenBSD loopback: 4-byte address family in network byte order.
    pub const LOOP: LinkType = LinkType(108);
    /// Linux cooked capture v1 (SLL).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// Raw IPv4.
    pub const IPV4: LinkType = LinkType(228);
    /// Raw IPv6.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux cooked capture v2 (SLL2).
    pub const LINUX_SLL2: LinkType = LinkType(276);
    /// The DLT_RAW value some old BSD libpcaps wrote into files instead of 101.
    pub const RAW_BSD: LinkType = LinkType(12);
    /// DLT_RAW as written by OpenBSD (14).
    pub const RAW_OPENBSD: LinkType = LinkType(14);
}

/// Which way a packet crossed the capturing interface, where the source knows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Direction {
    /// The source does not say (most capture files).
    #[default]
    Unknown = 0,
    /// Received by the capturing host's interface.
    Inbound = 1,
    /// Sent by the capturing host.
    Outbound = 2,
}

/// Metadata of one record inside a batch's byte buffer. `Copy`, fixed-size, so a source keeps a
/// reusable `Vec<RecordMeta>` and never allocates per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordMeta {
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: TimestampNs,
    /// Offset of the captured bytes in the batch buffer.
    pub offset: usize,
    /// Number of captured bytes (what the snaplen let through).
    pub caplen: u32,
    /// Length of the packet on the wire (>= caplen for sane input; not trusted).
    pub wire_len: u32,
    /// Index into the source's interface table.
    pub iface: u16,
    /// Direction, where known.
    pub direction: Direction,
}

/// One interface of a source: pcap files have one, pcapng files may have many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Link-layer type of this interface's packets.
    pub link_type: LinkType,
    /// Snap length declared for this interface (0 if unknown).
    pub snaplen: u32,
    /// Name (pcapng `if_name`, live interface name), if known.
    pub name: Option<String>,
}

/// A packet as consumers see it: borrowed bytes plus metadata. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct PacketRecord<'a> {
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: TimestampNs,
    /// Length on the wire (the frame length tshark calls `frame.len`).
    pub wire_len: u32,
    /// Interface index within the source.
    pub iface: u16,
    /// Direction, where known.
    pub direction: Direction,
    /// Link-layer type of `data`.
    pub link_type: LinkType,
    /// The captured bytes (`data.len()` is the caplen).
    pub data: &'a [u8],
}

/// A batch of records borrowed from a source's buffer. Valid until the next call to
/// [`crate::PacketSource::next_batch`].
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    metas: &'a [RecordMeta],
    bytes: &'a [u8],
    interfaces: &'a [Interface],
}

impl<'a> Batch<'a> {
    /// Assembles a batch. Every meta's `offset..offset+caplen` must lie inside `bytes` and every
    /// `iface` must index `interfaces`.
    ///
    /// # Panics
    /// Panics (in debug builds) if a record points outside `bytes` or names a missing interface:
    /// that is a bug in the source, not bad input.
    pub fn new(metas: &'a [RecordMeta], bytes: &'a [u8], interfaces: &'a [Interface]) -> Self {
        debug_assert!(metas
            .iter()
            .all(|m| m.offset + m.caplen as usize <= bytes.len()
                && (m.iface as usize) < interfaces.len()));
        Batch {
            metas,
            bytes,
            interfaces,
        }
    }

    /// Number of records.
    #[inline]
    pub fn len(&self) -> usize {
        self.metas.len()
    }

    /// True when the batch holds no record.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// The record metadata, in arrival order.
    #[inline]
    pub fn metas(&self) -> &'a [RecordMeta] {
        self.metas
    }

    /// The `i`-th record.
    ///
    /// # Panics
    /// Panics if `i >= self.len()`.
    #[inline]
    pub fn get(&self, i: usize) -> PacketRecord<'a> {
        self.record(&self.metas[i])
    }

    #[inline]
    fn record(&self, m: &RecordMeta) -> PacketRecord<'a> {
        PacketRecord {
            ts_ns: m.ts_ns,
            wire_len: m.wire_len,
            iface: m.iface,
            direction: m.direction,
            link_type: self.interfaces[m.iface as usize].link_type,
            data: &self.bytes[m.offset..m.offset + m.caplen as usize],
        }
    }

    /// Iterates over the records in arrival order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = PacketRecord<'a>> + '_ {
        self.metas.iter().map(move |m| self.record(m))
    }

    /// The raw byte buffer the records point into (for block writers).
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The interface table the records' `iface` fields index.
    #[inline]
    pub fn interfaces(&self) -> &'a [Interface] {
        self.interfaces
    }
}

/// Empties a vector of records and hands its allocation to a vector of another lifetime: the
/// records borrow one batch, the allocation outlives them. The in-place `collect` reuses the
/// buffer, so a per-batch selection of records costs no allocation.
pub fn reuse_records<'b>(mut v: Vec<PacketRecord<'_>>) -> Vec<PacketRecord<'b>> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_records_keeps_the_allocation() {
        let v: Vec<PacketRecord<'static>> = Vec::with_capacity(256);
        let ptr = v.as_ptr() as usize;
        let w: Vec<PacketRecord<'_>> = reuse_records(v);
        assert!(w.capacity() >= 256);
        assert_eq!(w.as_ptr() as usize, ptr);
    }
}
