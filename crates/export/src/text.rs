//! Addresses as the text the JSON lines give them, written straight into a message buffer:
//! the Protobuf and Avro encoders put an IPv4 address and two MACs in every record, and
//! `fmt` machinery for them was a fifth of the encoders' time. IPv6 keeps the standard
//! library's RFC 5952 form (through `fmt`, into a stack buffer: rarer, and its zero-run
//! compression is not worth a second implementation).
use std::net::{IpAddr, Ipv4Addr};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The longest text of an address: an IPv6 address with an embedded IPv4 one.
pub const MAX_IP_TEXT: usize = 45;

/// Where the encoders append bytes: a growing `Vec`, or a record's room sized in advance
/// (the Protobuf flow encoder's cursor, which needs no capacity check and length update at
/// each byte).
pub trait Out {
    /// Appends one byte.
    fn put(&mut self, b: u8);
    /// Appends `s`.
    fn put_slice(&mut self, s: &[u8]);
}

/// Bytes written front to back into room sized in advance (a record's): one bounds check per
/// write, where `Vec::push` checks the capacity and reloads and stores the length at every
/// byte. Writing past the room panics: the room is an upper bound (the IPFIX and Protobuf
/// flow encoders each test their largest record against theirs).
pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a mut [u8],
    /// Bytes written so far.
    pub(crate) pos: usize,
}

impl Out for Cursor<'_> {
    #[inline(always)]
    fn put(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline(always)]
    fn put_slice(&mut self, s: &[u8]) {
        self.buf[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }
}

impl Out for Vec<u8> {
    #[inline]
    fn put(&mut self, b: u8) {
        self.push(b);
    }

    #[inline]
    fn put_slice(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }
}

/// Appends `a` in dotted-decimal form (`10.0.0.1`).
#[inline]
pub fn ipv4<O: Out>(a: Ipv4Addr, out: &mut O) {
    for (i, o) in a.octets().into_iter().enumerate() {
        if i > 0 {
            out.put(b'.');
        }
        if o >= 100 {
            out.put(b'0' + o / 100);
        }
        if o >= 10 {
            out.put(b'0' + o / 10 % 10);
        }
        out.put(b'0' + o % 10);
    }
}

/// Appends `a`'s text, as `Display` writes it.
#[inline]
pub fn ip<O: Out>(a: IpAddr, out: &mut O) {
    match a {
        IpAddr::V4(v4) => ipv4(v4, out),
        IpAddr::V6(v6) => {
            use std::io::Write;
            const ROOM: usize = MAX_IP_TEXT + 3;
            let mut tmp = [0u8; ROOM];
            let mut w = &mut tmp[..];
            // An IPv6 text form is at most 45 bytes: writing into 48 cannot fail.
            let _ = write!(w, "{v6}");
            let n = ROOM - w.len();
            out.put_slice(&tmp[..n]);
        }
    }
}

/// Appends `m` as six lowercase hex pairs separated by `:`.
#[inline]
pub fn mac<O: Out>(m: &[u8; 6], out: &mut O) {
    let mut t = [b':'; 17];
    for (i, b) in m.iter().enumerate() {
        t[i * 3] = HEX[usize::from(b >> 4)];
        t[i * 3 + 1] = HEX[usize::from(b & 15)];
    }
    out.put_slice(&t);
}

/// Appends `v` in decimal.
// Only the Kafka exporter's flow keys write numbers as text.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
pub fn uint(v: u64, out: &mut Vec<u8>) {
    let mut t = [0u8; 20];
    let mut i = t.len();
    let mut v = v;
    loop {
        i -= 1;
        t[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&t[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text is `Display`'s, byte for byte, for the edge values of each octet and for
    /// IPv6 forms with and without zero runs and embedded IPv4.
    #[test]
    fn emit_same_text_as_display() {
        let mut out = Vec::new();
        for o in [0u8, 1, 9, 10, 99, 100, 199, 200, 255] {
            for a in [
                Ipv4Addr::new(o, 0, 255, o),
                Ipv4Addr::new(10, o, o, 1),
                Ipv4Addr::new(255, 255, o, 9),
            ] {
                out.clear();
                ip(a.into(), &mut out);
                assert_eq!(out, a.to_string().as_bytes());
            }
        }
        for s in [
            "::",
            "::1",
            "2001:db8::2",
            "fe80::1:2:3:4",
            "2001:db8:0:0:1:0:0:1",
            "::ffff:10.0.0.1",
            "1:2:3:4:5:6:7:8",
            "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
        ] {
            let a: IpAddr = s.parse().unwrap();
            out.clear();
            ip(a, &mut out);
            assert_eq!(out, a.to_string().as_bytes(), "{s}");
        }
        out.clear();
        mac(&[0, 0x1f, 0xa0, 0xff, 0x09, 0xbc], &mut out);
        assert_eq!(out, b"00:1f:a0:ff:09:bc");
        for v in [0u64, 7, 10, 65535, u64::MAX] {
            out.clear();
            uint(v, &mut out);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }
}
