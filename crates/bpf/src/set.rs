//! One expression, compiled once per link type met.

use crate::error::Error;
use crate::{ByteOrder, Filter};
use trawl_capture::LinkType;

/// What the set knows about one link type.
#[derive(Clone, Debug)]
enum Entry {
    Ready(Filter),
    /// libpcap could not compile the expression for this link type; the error was returned
    /// once, packets of this type now never match.
    Failed,
}

/// A filter expression compiled lazily for each link type it meets.
///
/// pcapng files may mix link types across interfaces, and a BPF program only makes sense for
/// the link type it was compiled for. `FilterSet` compiles the expression the first time a link
/// type shows up and keeps the result in a table indexed by the link type value, so the hot
/// path is a slice lookup plus the interpreter.
///
/// When libpcap cannot compile the expression for a link type (`ether host ...` on raw IP),
/// the first [`FilterSet::matches`] for that link type returns the error and the caller
/// decides: stop, or carry on. Carrying on, packets of that link type never match; they are
/// counted in [`FilterSet::unsupported_packets`].
#[derive(Clone, Debug)]
pub struct FilterSet {
    expr: String,
    snaplen: u32,
    order: ByteOrder,
    /// `slot[link_type]`: 0 = not met yet, n = `entries[n - 1]`.
    slot: Vec<u32>,
    entries: Vec<Entry>,
    unsupported_packets: u64,
}

impl FilterSet {
    /// A set for `expr`; nothing is compiled until a link type is met. `snaplen` as in
    /// [`Filter::compile`].
    pub fn new(expr: &str, snaplen: u32) -> FilterSet {
        FilterSet::new_for(expr, snaplen, ByteOrder::Little)
    }

    /// A set for packets of a capture file written in byte order `order` (see
    /// [`Filter::compile_for`]).
    pub fn new_for(expr: &str, snaplen: u32, order: ByteOrder) -> FilterSet {
        FilterSet {
            expr: expr.to_owned(),
            snaplen,
            order,
            slot: Vec::new(),
            entries: Vec::new(),
            unsupported_packets: 0,
        }
    }

    /// The expression.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Compiles for `link_type` now, if not done yet (to report errors before the first
    /// packet). Returns the error only the first time, like [`FilterSet::matches`].
    pub fn prepare(&mut self, link_type: LinkType) -> Result<(), Error> {
        if self.entry_index(link_type).is_none() {
            self.compile(link_type)?;
        }
        Ok(())
    }

    /// The compiled filter for `link_type`, if it was met and compiled.
    pub fn filter(&self, link_type: LinkType) -> Option<&Filter> {
        match self.entries.get(self.entry_index(link_type)?)? {
            Entry::Ready(f) => Some(f),
            Entry::Failed => None,
        }
    }

    /// Whether the packet matches. `Err` only the first time a link type the expression
    /// cannot be compiled for is met; afterwards such packets give `Ok(false)`.
    #[inline]
    pub fn matches(
        &mut self,
        link_type: LinkType,
        packet: &[u8],
        wire_len: u32,
    ) -> Result<bool, Error> {
        let index = match self.entry_index(link_type) {
            Some(i) => i,
            None => self.compile(link_type)?,
        };
        match self.entries.get(index) {
            Some(Entry::Ready(f)) => Ok(f.matches(packet, wire_len)),
            _ => {
                self.unsupported_packets += 1;
                Ok(false)
            }
        }
    }

    /// Packets that did not match because the expression does not compile for their link type
    /// (the packet that returned the error included).
    pub fn unsupported_packets(&self) -> u64 {
        self.unsupported_packets
    }

    #[inline]
    fn entry_index(&self, link_type: LinkType) -> Option<usize> {
        match self.slot.get(usize::from(link_type.0)) {
            Some(&n) if n != 0 => Some(n as usize - 1),
            _ => None,
        }
    }

    #[cold]
    fn compile(&mut self, link_type: LinkType) -> Result<usize, Error> {
        let lt = usize::from(link_type.0);
        if self.slot.len() <= lt {
            self.slot.resize(lt + 1, 0);
        }
        let (entry, result) =
            match Filter::compile_for(&self.expr, link_type, self.snaplen, self.order) {
                Ok(f) => (Entry::Ready(f), Ok(())),
                Err(e) => {
                    self.unsupported_packets += 1;
                    (Entry::Failed, Err(e))
                }
            };
        self.entries.push(entry);
        // At most 65536 link types, so the count fits.
        self.slot[lt] = self.entries.len() as u32;
        result.map(|()| self.entries.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ethernet II, IPv4, TCP 1234 -> 80, no payload (54 bytes).
    //   dst mac           src mac           type
    const ETH_TCP80: [u8; 54] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, //
        // IPv4: ver/ihl tos len id flags/frag ttl proto=6 csum src dst
        0x45, 0x00, 0x00, 0x28, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00, //
        192, 168, 1, 1, 10, 0, 0, 1, //
        // TCP: sport 1234 dport 80 seq ack off/flags=SYN win csum urg
        0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];

    #[test]
    fn compiles_once_per_link_type() {
        let mut set = FilterSet::new("tcp port 80", 0);
        assert!(set.filter(LinkType::ETHERNET).is_none());
        assert!(set.matches(LinkType::ETHERNET, &ETH_TCP80, 54).unwrap());
        // The same bytes read as raw IP start with a MAC address: no match.
        assert!(!set.matches(LinkType::RAW, &ETH_TCP80, 54).unwrap());
        // ... but the IP part does.
        assert!(set.matches(LinkType::RAW, &ETH_TCP80[14..], 40).unwrap());
        assert_eq!(set.entries.len(), 2);
        assert!(set.filter(LinkType::ETHERNET).is_some());
        assert_eq!(set.unsupported_packets(), 0);
    }

    #[test]
    fn unsupported_link_type_errors_once() {
        let mut set = FilterSet::new("ether host 00:11:22:33:44:55", 0);
        assert!(set.matches(LinkType::ETHERNET, &ETH_TCP80, 54).unwrap());
        let err = set
            .matches(LinkType::RAW, &ETH_TCP80[14..], 40)
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Compile {
                    link_type: LinkType::RAW,
                    ..
                }
            ),
            "{err}"
        );
        assert!(!set.matches(LinkType::RAW, &ETH_TCP80[14..], 40).unwrap());
        assert_eq!(set.unsupported_packets(), 2);
        assert!(set.filter(LinkType::RAW).is_none());
        assert!(set.prepare(LinkType::RAW).is_ok(), "error is reported once");
        // Ethernet still works.
        assert!(set.matches(LinkType::ETHERNET, &ETH_TCP80, 54).unwrap());
    }

    #[test]
    fn prepare_reports_syntax_errors_early() {
        let mut set = FilterSet::new("tcp port", 0);
        assert!(set.prepare(LinkType::ETHERNET).is_err());
    }

    #[test]
    fn large_link_type_values() {
        let mut set = FilterSet::new("", 0);
        // 65535 is not a link type libpcap knows; whatever it says, no panic and one entry.
        let _ = set.matches(LinkType(u16::MAX), &[], 0);
        assert_eq!(set.slot.len(), 65536);
        assert_eq!(set.entries.len(), 1);
    }
}

/// One expression compiled for each file of several read as one input (files merged by
/// time): each file's set follows its byte order, and is compiled when the file's first
/// packet is checked.
#[derive(Debug)]
pub struct FileFilters {
    expr: String,
    snaplen: u32,
    sets: Vec<Option<FilterSet>>,
}

impl FileFilters {
    /// Filters by `expr` for files yet to come.
    pub fn new(expr: &str, snaplen: u32) -> FileFilters {
        FileFilters {
            expr: expr.to_owned(),
            snaplen,
            sets: Vec::new(),
        }
    }

    /// The set for file `file` (its position among the files) written in the order
    /// `big_endian` says.
    pub fn for_file(&mut self, file: usize, big_endian: bool) -> &mut FilterSet {
        if self.sets.len() <= file {
            self.sets.resize_with(file + 1, || None);
        }
        let (expr, snaplen) = (&self.expr, self.snaplen);
        self.sets[file].get_or_insert_with(|| {
            FilterSet::new_for(expr, snaplen, ByteOrder::of_file(big_endian))
        })
    }
}
