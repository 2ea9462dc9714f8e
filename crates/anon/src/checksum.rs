//! Incremental Internet-checksum updates (RFC 1624) for bytes rewritten inside a packet.
//!
//! Every rewrite goes through [`Edits::write`], which adds the change of the rewritten bytes
//! to each open checksum [`Scope`] whose ranges cover them (the transport header's range and
//! its pseudo-header addresses; an ICMP message's range around a quoted header; a GRE
//! checksum's range). Closing a scope writes its checksum field, again through `write`, so the
//! field's own change reaches the scopes around it (an outer UDP checksum over a tunnelled
//! packet, an ICMP checksum over a quoted header). Updating instead of recomputing needs only
//! the changed bytes (a truncated segment keeps a checksum that is right for the whole
//! segment), and a checksum that was wrong in the input stays wrong by the same amount.

/// What a checksum field of all zeros means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Zero {
    /// A checksum like any other (IPv4 header, TCP, ICMP, GRE).
    Value,
    /// UDP: zero means "no checksum" (left alone), a computed zero is sent as 0xffff.
    Absent,
}

/// One checksum field and the byte ranges it covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scope {
    /// Absolute position of the 2-byte field.
    field: usize,
    zero: Zero,
    /// `(start, end, base)`: bytes `start..end` count, 16-bit words aligned on `base`.
    ranges: [(usize, usize, usize); 2],
    /// Ones'-complement sum of the changes so far (unfolded).
    delta: u64,
}

impl Scope {
    /// A checksum at `field` over `range` (words aligned on its start) and, for transport
    /// checksums, the pseudo-header addresses `pseudo` (source and destination, contiguous).
    pub(crate) fn new(
        field: usize,
        zero: Zero,
        range: (usize, usize),
        pseudo: Option<(usize, usize)>,
    ) -> Scope {
        let pseudo = pseudo.unwrap_or((0, 0));
        Scope {
            field,
            zero,
            ranges: [(range.0, range.1, range.0), (pseudo.0, pseudo.1, pseudo.0)],
            delta: 0,
        }
    }
}

/// A packet being rewritten, with its open checksum scopes (innermost last).
pub(crate) struct Edits<'a> {
    pub(crate) buf: &'a mut [u8],
    scopes: &'a mut Vec<Scope>,
}

impl<'a> Edits<'a> {
    pub(crate) fn new(buf: &'a mut [u8], scopes: &'a mut Vec<Scope>) -> Edits<'a> {
        scopes.clear();
        Edits { buf, scopes }
    }

    /// Opens a checksum scope when its field was captured (and, for UDP, is in use); returns
    /// a token for [`Edits::close`].
    pub(crate) fn open(&mut self, scope: Scope) -> Option<usize> {
        let field = self.buf.get(scope.field..scope.field + 2)?;
        if scope.zero == Zero::Absent && field == [0, 0] {
            return None;
        }
        self.scopes.push(scope);
        Some(self.scopes.len() - 1)
    }

    /// Writes the scope's updated checksum (RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')) and
    /// forgets it and every scope opened after it.
    pub(crate) fn close(&mut self, token: Option<usize>) {
        let Some(index) = token else { return };
        // Inner scopes left open (a walk that stopped early) close first.
        while self.scopes.len() > index + 1 {
            let last = self.scopes.len() - 1;
            self.close(Some(last));
        }
        let Some(scope) = self.scopes.pop() else {
            return;
        };
        let old = u16::from_be_bytes([self.buf[scope.field], self.buf[scope.field + 1]]);
        let mut new = !fold(u64::from(!old) + scope.delta);
        if new == 0 && scope.zero == Zero::Absent {
            new = 0xffff;
        }
        self.write(scope.field, &new.to_be_bytes());
    }

    /// Replaces the bytes at `pos` with `new` (which must fit), accounting the change in
    /// every open scope that covers them.
    pub(crate) fn write(&mut self, pos: usize, new: &[u8]) {
        let old = &self.buf[pos..pos + new.len()];
        for scope in self.scopes.iter_mut() {
            for &(start, end, base) in &scope.ranges {
                for (i, (&o, &n)) in old.iter().zip(new).enumerate() {
                    let p = pos + i;
                    if p >= start && p < end {
                        let shift = if (p - base).is_multiple_of(2) { 8 } else { 0 };
                        scope.delta +=
                            u64::from(!(u16::from(o) << shift)) + (u64::from(n) << shift);
                    }
                }
            }
        }
        self.buf[pos..pos + new.len()].copy_from_slice(new);
    }
}

/// Folds a ones'-complement sum to 16 bits.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The Internet checksum of `data` (for tests: the full computation the updates must match).
#[cfg(test)]
pub(crate) fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum = 0u64;
    for chunk in data.chunks(2) {
        sum += u64::from(u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]));
    }
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_matches_recomputation_at_odd_and_even_offsets() {
        let mut data: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37)).collect();
        data[6] = 0;
        data[7] = 0;
        let c = internet_checksum(&data);
        data[6..8].copy_from_slice(&c.to_be_bytes());
        let mut scopes = Vec::new();
        let mut edits = Edits::new(&mut data, &mut scopes);
        let token = edits.open(Scope::new(6, Zero::Value, (0, 40), None));
        edits.write(13, &[0xde, 0xad, 0xbe]);
        edits.write(30, &[0xff, 0x00, 0x12, 0x34]);
        edits.close(token);
        let c = u16::from_be_bytes([data[6], data[7]]);
        data[6] = 0;
        data[7] = 0;
        assert_eq!(c, internet_checksum(&data));
    }
}
