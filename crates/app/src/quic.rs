//! QUIC Initial packets: the TLS hellos a passive monitor can read from a QUIC connection.
//!
//! A client's Initial packets are protected with keys derived from the Destination Connection ID
//! of its first Initial and a salt published for each version (RFC 9001 section 5.2, RFC 9369
//! for v2), and so are the server's: anyone who saw the client's first Initial can remove the
//! protection (AES header protection, AES-128-GCM; HKDF-SHA256 from `ring`). The CRYPTO frames
//! of each side's Initials are put back in offset order ([`CryptoStream`], bounded) and the
//! hello they carry is parsed by [`crate::tls::parse_hello`].
//!
//! [`Connection`] is one connection's two sides; [`classify`] says whether a datagram starts
//! with an Initial packet worth a connection. Versions: v1, v2, IETF drafts 22 to 34, the
//! forced-negotiation versions `0x?a?a?a?a` (draft-29 salt, as Wireshark), Facebook's mvfst
//! (`0xfaceb00x`) and Google's TLS-based `T050`/`T051`. Google QUIC with its own crypto
//! (`Q0xx`) is counted as not decryptable.
//!
//! ```
//! use trawl_app::quic::{classify, Datagram};
//! // A v1 long header Initial (type bits 00), 8-byte DCID, empty SCID.
//! let d = [0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x41, 0x00];
//! assert_eq!(classify(&d), Datagram::Initial(1));
//! assert_eq!(classify(b"\x0dhello"), Datagram::NotQuic);
//! ```
use ring::aead::{self, quic::HeaderProtectionKey, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

use crate::tls::{parse_hello, Hello, HelloKind};
use crate::{Error, QuicErrorKind};

/// Largest hello (handshake message with its header) read from a CRYPTO stream: real
/// ClientHellos are a few KiB, post-quantum key shares included. Data past it is refused.
pub const MAX_CRYPTO_LEN: usize = 16 * 1024;
/// Separate ranges a CRYPTO stream may hold while waiting for the bytes between them.
const MAX_RANGES: usize = 64;

/// QUIC v1 (RFC 9000).
pub const VERSION_1: u32 = 0x0000_0001;
/// QUIC v2 (RFC 9369).
pub const VERSION_2: u32 = 0x6b33_43cf;

const SALT_V1: [u8; 20] = hex20(b"38762cf7f55934b34d179ae6a4c80cadccbb7f0a");
const SALT_V2: [u8; 20] = hex20(b"0dede3def700a6db819381be6e269dcbf9bd2ed9");
const SALT_DRAFT_22: [u8; 20] = hex20(b"7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a");
const SALT_DRAFT_23: [u8; 20] = hex20(b"c3eef712c72ebb5a11a7d2432bb46365bef9f502");
const SALT_DRAFT_29: [u8; 20] = hex20(b"afbfec289993d24c9e9786f19c6111e04390a899");
const SALT_T050: [u8; 20] = hex20(b"7ff579e5acd072915580304c43a2367c60488310");
const SALT_T051: [u8; 20] = hex20(b"7a4edef4e7ccee5fa4506c19124fc8ccda6e033d");

/// 40 lowercase hex digits as 20 bytes, at compile time (a bad digit fails the build).
const fn hex20(s: &[u8; 40]) -> [u8; 20] {
    let mut out = [0u8; 20];
    let mut i = 0;
    while i < 40 {
        let c = s[i];
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not a hex digit"),
        };
        out[i / 2] |= if i % 2 == 0 { v << 4 } else { v };
        i += 1;
    }
    out
}

/// Which end of the connection sent a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client (sent the first Initial).
    Client = 0,
    /// The server.
    Server = 1,
}

/// How a version protects its Initial packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    salt: &'static [u8; 20],
    /// v2's labels (`quicv2 key`, ...) and packet type bits.
    v2: bool,
    /// The CRYPTO frame's type: 0x06, but 0x08 in Google's T050/T051.
    crypto: u64,
}

/// The salt and labels of `version`, `None` when its Initials cannot be decrypted.
fn params(version: u32) -> Option<Params> {
    let v1 = |salt| {
        Some(Params {
            salt,
            v2: false,
            crypto: 0x06,
        })
    };
    let google = |salt| {
        Some(Params {
            salt,
            v2: false,
            crypto: 0x08,
        })
    };
    match version {
        VERSION_1 => v1(&SALT_V1),
        VERSION_2 => Some(Params {
            salt: &SALT_V2,
            v2: true,
            crypto: 0x06,
        }),
        // IETF drafts: 22 alone, 23-28, 29-32, then v1's salt (33, 34).
        0xff00_0016 => v1(&SALT_DRAFT_22),
        0xff00_0017..=0xff00_001c => v1(&SALT_DRAFT_23),
        0xff00_001d..=0xff00_0020 => v1(&SALT_DRAFT_29),
        0xff00_0021..=0xff00_0022 => v1(&SALT_V1),
        // mvfst: draft 22, draft 27, and its experimental version (draft 27 too).
        0xface_b001 => v1(&SALT_DRAFT_22),
        0xface_b002 | 0xface_b00e => v1(&SALT_DRAFT_23),
        // Google's QUIC with TLS: T050 and T051.
        0x5430_3530 => google(&SALT_T050),
        0x5430_3531 => google(&SALT_T051),
        // Versions that force negotiation (RFC 9000 section 15): draft-29 keys, as Wireshark.
        v if v & 0x0f0f_0f0f == 0x0a0a_0a0a => v1(&SALT_DRAFT_29),
        _ => None,
    }
}

/// True for versions that are QUIC of some kind: those with keys, other IETF drafts, mvfst,
/// and Google's `Q0xx`/`T0xx`. Other long headers are taken for other protocols (RTP's first
/// byte is 0x80 too).
fn quic_like(version: u32) -> bool {
    let [a, b, _, _] = version.to_be_bytes();
    params(version).is_some()
        || version >> 8 == 0xff_0000
        || version >> 8 == 0xfa_ceb0
        || (matches!(a, b'Q' | b'T') && b == b'0')
}

/// What a datagram is, as far as the QUIC reader cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datagram {
    /// Not QUIC, or a short header, Version Negotiation or another long header packet.
    NotQuic,
    /// An Initial of this version, whose keys are known.
    Initial(u32),
    /// QUIC whose Initials cannot be decrypted: Google QUIC (`Q0xx`, its public header or long
    /// header), an unknown draft or vendor version.
    Undecryptable(u32),
}

/// Says what the datagram's first packet is.
pub fn classify(d: &[u8]) -> Datagram {
    // Google QUIC's public header: version flag and an 8-byte connection ID, then `Q0..`.
    if d.len() > 13 && d[0] & 0x89 == 0x09 && d[9] == b'Q' && d[10] == b'0' {
        return Datagram::Undecryptable(u32::from_be_bytes([d[9], d[10], d[11], d[12]]));
    }
    // The fixed bit (0x40) may be greased (RFC 9287): only the form bit says long header.
    if d.len() < 7 || d[0] & 0x80 == 0 {
        return Datagram::NotQuic;
    }
    let version = u32::from_be_bytes([d[1], d[2], d[3], d[4]]);
    if version == 0 || !quic_like(version) {
        return Datagram::NotQuic;
    }
    match params(version) {
        Some(p) if packet_type(d[0], p) == Type::Initial => Datagram::Initial(version),
        Some(_) => Datagram::NotQuic,
        // Their long headers' type bits are not known for sure: every one is counted.
        None => Datagram::Undecryptable(version),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Initial,
    Retry,
    Other,
}

/// The long header type bits (RFC 9000 17.2, RFC 9369 3.2: v2 rotates them).
fn packet_type(first: u8, p: Params) -> Type {
    match ((first >> 4) & 3, p.v2) {
        (0, false) | (1, true) => Type::Initial,
        (3, false) | (0, true) => Type::Retry,
        _ => Type::Other,
    }
}

fn quic_err(offset: usize, field: &'static str, kind: QuicErrorKind) -> Error {
    Error::Quic {
        offset,
        field,
        kind,
    }
}

/// A variable-length integer (RFC 9000 16) at `*pos`, which moves past it.
fn varint(b: &[u8], pos: &mut usize, field: &'static str) -> Result<u64, Error> {
    let first = *b
        .get(*pos)
        .ok_or(quic_err(*pos, field, QuicErrorKind::Truncated))?;
    let len = 1usize << (first >> 6);
    let bytes = b
        .get(*pos..*pos + len)
        .ok_or(quic_err(*pos, field, QuicErrorKind::Truncated))?;
    let mut v = u64::from(first & 0x3f);
    for &x in &bytes[1..] {
        v = (v << 8) | u64::from(x);
    }
    *pos += len;
    Ok(v)
}

/// A long header packet's fields, before header protection is removed.
#[derive(Clone, Copy, Debug)]
struct LongHeader<'a> {
    version: u32,
    ty: Type,
    dcid: &'a [u8],
    /// Offset of the (protected) packet number.
    pn_offset: usize,
    /// End of the packet in the datagram (coalesced packets follow).
    end: usize,
}

/// Reads the long header at the start of `p` (a version with keys).
fn long_header(p: &[u8], params: Params) -> Result<LongHeader<'_>, Error> {
    let trunc = |at, field| quic_err(at, field, QuicErrorKind::Truncated);
    if p.len() < 7 {
        return Err(trunc(0, "header"));
    }
    let version = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
    let ty = packet_type(p[0], params);
    let mut pos = 5;
    let dcid_len = usize::from(p[pos]);
    if dcid_len > 20 {
        return Err(quic_err(pos, "dcid.length", QuicErrorKind::Malformed));
    }
    let dcid = p
        .get(pos + 1..pos + 1 + dcid_len)
        .ok_or(trunc(pos, "dcid"))?;
    pos += 1 + dcid_len;
    let scid_len = usize::from(*p.get(pos).ok_or(trunc(pos, "scid.length"))?);
    p.get(pos + 1..pos + 1 + scid_len)
        .ok_or(trunc(pos, "scid"))?;
    pos += 1 + scid_len;
    if ty == Type::Retry {
        return Ok(LongHeader {
            version,
            ty,
            dcid,
            pn_offset: pos,
            end: p.len(),
        });
    }
    if ty == Type::Initial {
        let at = pos;
        let token = varint(p, &mut pos, "token.length")?;
        pos = usize::try_from(token)
            .ok()
            .and_then(|t| pos.checked_add(t))
            .filter(|&e| e <= p.len())
            .ok_or(trunc(at, "token"))?;
    }
    let at = pos;
    let len = varint(p, &mut pos, "length")?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&e| e <= p.len())
        .ok_or(trunc(at, "length"))?;
    Ok(LongHeader {
        version,
        ty,
        dcid,
        pn_offset: pos,
        end,
    })
}

/// The `Len` of an HKDF output, as ring wants it.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 7.1) with an empty context.
fn expand_label(prk: &hkdf::Prk, label: &[u8], out: &mut [u8]) {
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [6 + label.len() as u8];
    let info = [&len[..], &label_len, b"tls13 ", label, &[0]];
    // Lengths here are 12 to 32 bytes, far below HKDF's 255 * 32: expansion cannot fail.
    prk.expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF output within bounds");
}

/// The keys protecting one side's Initial packets.
struct InitialKeys {
    aead: LessSafeKey,
    iv: [u8; 12],
    hp: HeaderProtectionKey,
}

impl InitialKeys {
    fn new(params: Params, dcid: &[u8], side: Side) -> Self {
        let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, params.salt).extract(dcid);
        let mut secret = [0u8; 32];
        let label: &[u8] = match side {
            Side::Client => b"client in",
            Side::Server => b"server in",
        };
        expand_label(&initial, label, &mut secret);
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &secret);
        let (key_l, iv_l, hp_l): (&[u8], &[u8], &[u8]) = if params.v2 {
            (b"quicv2 key", b"quicv2 iv", b"quicv2 hp")
        } else {
            (b"quic key", b"quic iv", b"quic hp")
        };
        let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
        expand_label(&prk, key_l, &mut key);
        expand_label(&prk, iv_l, &mut iv);
        expand_label(&prk, hp_l, &mut hp);
        // 16-byte keys are what AES-128 takes: these cannot fail.
        let aead = LessSafeKey::new(
            UnboundKey::new(&aead::AES_128_GCM, &key).expect("AES-128 key length"),
        );
        let hp = HeaderProtectionKey::new(&aead::quic::AES_128, &hp).expect("AES-128 key length");
        InitialKeys { aead, iv, hp }
    }

    /// Removes header and packet protection from the packet `p` (up to `h.end`): its frames.
    fn open(&self, p: &[u8], h: &LongHeader<'_>) -> Result<Vec<u8>, Error> {
        let pn = h.pn_offset;
        let sample = p
            .get(pn + 4..pn + 20)
            .filter(|_| pn + 20 <= h.end)
            .ok_or(quic_err(pn, "sample", QuicErrorKind::Truncated))?;
        let mask = self
            .hp
            .new_mask(sample)
            .map_err(|_| quic_err(pn + 4, "sample", QuicErrorKind::Truncated))?;
        let first = p[0] ^ (mask[0] & 0x0f);
        let pn_len = usize::from(first & 3) + 1;
        let mut header = p[..pn + pn_len].to_vec();
        header[0] = first;
        let mut number = 0u64;
        for i in 0..pn_len {
            header[pn + i] ^= mask[1 + i];
            number = (number << 8) | u64::from(header[pn + i]);
        }
        // Initial packet numbers start at 0 and stay small: the truncated number is the number.
        let mut nonce = self.iv;
        for (n, x) in nonce[4..].iter_mut().zip(number.to_be_bytes()) {
            *n ^= x;
        }
        let mut body = p[pn + pn_len..h.end].to_vec();
        let plain = self
            .aead
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&header[..]),
                &mut body,
            )
            .map_err(|_| quic_err(pn + pn_len, "payload", QuicErrorKind::Decryption))?;
        let n = plain.len();
        body.truncate(n);
        Ok(body)
    }
}

/// The CRYPTO frames of an Initial's plaintext, as (offset, data), in packet order.
///
/// # Errors
/// [`QuicErrorKind::Truncated`] when a frame runs past the payload,
/// [`QuicErrorKind::Malformed`] for a frame type an Initial may not carry.
pub fn crypto_frames(plain: &[u8]) -> Result<Vec<(u64, &[u8])>, Error> {
    let mut out = Vec::new();
    walk_frames(plain, 0x06, &mut out)?;
    Ok(out)
}

/// [`crypto_frames`] with CRYPTO frames of type `crypto`, keeping the frames read before a
/// fault.
fn crypto_frames_lossy(plain: &[u8], crypto: u64) -> (Vec<(u64, &[u8])>, Option<Error>) {
    let mut out = Vec::new();
    let err = walk_frames(plain, crypto, &mut out).err();
    (out, err)
}

fn walk_frames<'a>(
    plain: &'a [u8],
    crypto: u64,
    out: &mut Vec<(u64, &'a [u8])>,
) -> Result<(), Error> {
    let mut pos = 0;
    while pos < plain.len() {
        let at = pos;
        match varint(plain, &mut pos, "frame.type")? {
            // PADDING, PING.
            0x00 | 0x01 => {}
            // ACK (with ECN counts for 0x03).
            ty @ (0x02 | 0x03) => {
                varint(plain, &mut pos, "ack.largest")?;
                varint(plain, &mut pos, "ack.delay")?;
                let ranges = varint(plain, &mut pos, "ack.range_count")?;
                varint(plain, &mut pos, "ack.first_range")?;
                // Each range is two varints of at least a byte: a count past the payload is
                // truncation, found without looping that often.
                if ranges > (plain.len() - pos) as u64 {
                    return Err(quic_err(pos, "ack.ranges", QuicErrorKind::Truncated));
                }
                for _ in 0..ranges * 2 {
                    varint(plain, &mut pos, "ack.ranges")?;
                }
                if ty == 0x03 {
                    for _ in 0..3 {
                        varint(plain, &mut pos, "ack.ecn")?;
                    }
                }
            }
            // CRYPTO.
            ty if ty == crypto => {
                let offset = varint(plain, &mut pos, "crypto.offset")?;
                let len_at = pos;
                let len = varint(plain, &mut pos, "crypto.length")?;
                let data = usize::try_from(len)
                    .ok()
                    .and_then(|l| plain.get(pos..pos.checked_add(l)?))
                    .ok_or(quic_err(len_at, "crypto.length", QuicErrorKind::Truncated))?;
                pos += data.len();
                out.push((offset, data));
            }
            // CONNECTION_CLOSE (transport: with the frame type; application).
            ty @ (0x1c | 0x1d) => {
                varint(plain, &mut pos, "close.error_code")?;
                if ty == 0x1c {
                    varint(plain, &mut pos, "close.frame_type")?;
                }
                let len_at = pos;
                let len = varint(plain, &mut pos, "close.reason_length")?;
                pos = usize::try_from(len)
                    .ok()
                    .and_then(|l| pos.checked_add(l))
                    .filter(|&e| e <= plain.len())
                    .ok_or(quic_err(len_at, "close.reason", QuicErrorKind::Truncated))?;
            }
            _ => return Err(quic_err(at, "frame.type", QuicErrorKind::Malformed)),
        }
    }
    Ok(())
}

/// One side's CRYPTO stream at the Initial level, put back in offset order: data seen first
/// wins, at most [`MAX_CRYPTO_LEN`] bytes and 64 separate ranges are held.
#[derive(Debug, Default)]
pub struct CryptoStream {
    buf: Vec<u8>,
    /// Received ranges, sorted and disjoint (adjacent ones merged).
    have: Vec<(usize, usize)>,
}

impl CryptoStream {
    /// Takes a CRYPTO frame's data at `offset`.
    ///
    /// # Errors
    /// [`QuicErrorKind::TooLarge`] when the data ends past [`MAX_CRYPTO_LEN`] or would be the
    /// 65th separate range; nothing of it is kept then.
    pub fn insert(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        let too_large = || {
            quic_err(
                usize::try_from(offset).unwrap_or(usize::MAX),
                "crypto.offset",
                QuicErrorKind::TooLarge,
            )
        };
        let start = usize::try_from(offset).map_err(|_| too_large())?;
        let end = start
            .checked_add(data.len())
            .filter(|&e| e <= MAX_CRYPTO_LEN)
            .ok_or_else(too_large)?;
        if start == end {
            return Ok(());
        }
        if self.have.len() >= MAX_RANGES && !self.have.iter().any(|&(s, e)| s <= end && start <= e)
        {
            return Err(too_large());
        }
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        // Fill only the holes: bytes already held win.
        let mut at = start;
        for &(s, e) in &self.have {
            if e <= at || s >= end {
                continue;
            }
            if s > at {
                self.buf[at..s].copy_from_slice(&data[at - start..s - start]);
            }
            at = at.max(e);
        }
        if at < end {
            self.buf[at..end].copy_from_slice(&data[at - start..]);
        }
        self.have.push((start, end));
        self.have.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.have.len());
        for &(s, e) in &self.have {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.have = merged;
        Ok(())
    }

    /// The bytes held from offset 0 on without a hole.
    pub fn prefix(&self) -> &[u8] {
        match self.have.first() {
            Some(&(0, e)) => &self.buf[..e],
            _ => &[],
        }
    }

    /// The length of the first handshake message (header included), once its header is
    /// held.
    fn message_len(&self) -> Option<usize> {
        let hs = self.prefix().get(..4)?;
        Some(4 + ((usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3])))
    }

    /// True when no data was taken.
    pub fn is_empty(&self) -> bool {
        self.have.is_empty()
    }

    /// The first handshake message once whole: `None` while bytes are missing; an error when
    /// it is not the hello `kind` or too large to be held.
    pub fn hello(&self, kind: HelloKind) -> Option<Result<Hello, Error>> {
        let hs = self.prefix();
        let want = match kind {
            HelloKind::Client => 1,
            HelloKind::Server => 2,
        };
        if *hs.first()? != want {
            return Some(Err(quic_err(0, "handshake.type", QuicErrorKind::Malformed)));
        }
        if hs.len() < 4 {
            return None;
        }
        let len = (usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3]);
        if 4 + len > MAX_CRYPTO_LEN {
            return Some(Err(quic_err(
                1,
                "handshake.length",
                QuicErrorKind::TooLarge,
            )));
        }
        let body = hs.get(4..4 + len)?;
        Some(parse_hello(kind, body))
    }
}

/// What the QUIC reader counted (summed over connections by the caller).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicStats {
    /// Initial packets whose protection was removed.
    pub decrypted: u64,
    /// Initial packets that could not be decrypted (no client Initial seen for a server's,
    /// authentication failed, header truncated).
    pub decrypt_errors: u64,
    /// Decrypted Initials with a malformed frame.
    pub frame_errors: u64,
    /// CRYPTO data refused past the bounds.
    pub capped: u64,
}

/// How one side's hello reading stands.
#[derive(Debug, Default)]
pub struct SideState {
    /// The side's Initial-level CRYPTO stream (emptied once the hello is read).
    pub stream: CryptoStream,
    /// The hello, or why there is none, once known.
    pub outcome: Option<Result<Hello, Error>>,
    /// The version of the side's first decrypted Initial.
    pub version: Option<u32>,
    /// The client's second ClientHello (after a HelloRetryRequest), or why there is none,
    /// once known.
    pub second: Option<Result<Hello, Error>>,
    /// The client's: the server's hello was a HelloRetryRequest, the second hello is read.
    pub wants_second: bool,
    /// CRYPTO stream offset where the first hello ended (`stream` then holds what follows).
    hello_end: u64,
}

impl SideState {
    /// Adds a decrypted Initial's CRYPTO frames to the stream (those of the second hello after
    /// the first, their offsets counted from its end); false when they do not fit (`outcome`
    /// or `second` then says why).
    fn take(&mut self, frames: Vec<(u64, &[u8])>) -> bool {
        for (offset, data) in frames {
            // Bytes of the first hello sent again after it was read: not the second's.
            let skip = self.hello_end.saturating_sub(offset);
            let Some(data) = usize::try_from(skip).ok().and_then(|n| data.get(n..)) else {
                continue;
            };
            let at = offset.max(self.hello_end) - self.hello_end;
            if let Err(e) = self.stream.insert(at, data) {
                match self.outcome {
                    None => self.outcome = Some(Err(e)),
                    Some(_) => self.second = Some(Err(e)),
                }
                return false;
            }
        }
        true
    }

    /// Reads the hello the stream holds (the second one once the first is read).
    fn read_hello(&mut self, kind: HelloKind) {
        let quic = |r: Result<Hello, Error>| {
            r.map(|mut h| {
                h.quic = true;
                h
            })
        };
        if self.outcome.is_none() {
            let len = self.stream.message_len();
            self.outcome = self.stream.hello(kind).map(quic);
            if let (Some(Ok(_)), Some(len)) = (&self.outcome, len) {
                self.hello_end = len as u64;
            }
        } else if self.wants_second && self.second.is_none() {
            self.second = self.stream.hello(kind).map(quic);
        } else {
            return;
        }
        if self.outcome.is_some() && (self.second.is_some() || !self.wants_second) {
            // Emptied: from here on it holds what follows the first hello (or nothing).
            self.stream = CryptoStream::default();
        }
    }

    /// True once nothing more is read from this side.
    fn finished(&self) -> bool {
        self.outcome.is_some() && (!self.wants_second || self.second.is_some())
    }
}

/// One QUIC connection: the client's and the server's Initial-level hellos.
#[derive(Debug, Default)]
pub struct Connection {
    /// The Destination Connection ID the Initial keys come from: the client's first Initial's,
    /// or its Initial's after a Retry.
    dcid: Option<Vec<u8>>,
    /// The client's and the server's.
    pub sides: [SideState; 2],
}

impl Connection {
    /// A connection before its first packet.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once both sides' hellos are read (or failed), and after a HelloRetryRequest the
    /// client's second one.
    pub fn done(&self) -> bool {
        self.sides.iter().all(SideState::finished)
    }

    /// Takes a UDP payload sent by `side`: each coalesced long header packet is read, Initials
    /// decrypted and their CRYPTO frames added to the side's stream.
    pub fn datagram(&mut self, side: Side, d: &[u8], stats: &mut QuicStats) {
        let mut pos = 0;
        // A datagram holds a few packets: the bound only guards against a loop.
        for _ in 0..16 {
            let p = &d[pos..];
            if p.len() < 7 || p[0] & 0x80 == 0 {
                return;
            }
            let Some(params) = params(u32::from_be_bytes([p[1], p[2], p[3], p[4]])) else {
                return;
            };
            let initial = packet_type(p[0], params) == Type::Initial;
            if initial && side == Side::Client && self.dcid.is_none() {
                // Kept even when the packet cannot be read (a capture cut by its snap length):
                // the server's Initials need only this.
                let dcid = p.get(6..6 + usize::from(p[5]).min(20));
                self.dcid = dcid.map(<[u8]>::to_vec);
            }
            let h = match long_header(p, params) {
                Ok(h) => h,
                Err(_) => {
                    stats.decrypt_errors += u64::from(initial);
                    return;
                }
            };
            match h.ty {
                Type::Initial => self.initial(side, p, &h, params, stats),
                Type::Retry => {
                    // New keys: from the DCID of the client's next Initial.
                    if side == Side::Server {
                        self.dcid = None;
                    }
                    return;
                }
                // Handshake and 0-RTT packets: skipped by their length.
                Type::Other => {}
            }
            pos += h.end;
            if pos >= d.len() {
                return;
            }
        }
    }

    /// One Initial packet `p` of `side`.
    fn initial(
        &mut self,
        side: Side,
        p: &[u8],
        h: &LongHeader<'_>,
        params: Params,
        stats: &mut QuicStats,
    ) {
        let Some(dcid) = &self.dcid else {
            stats.decrypt_errors += 1;
            return;
        };
        let mut plain = InitialKeys::new(params, dcid, side).open(p, h);
        if plain.is_err() && side == Side::Client && dcid[..] != *h.dcid {
            // A client that changed its DCID without a Retry we saw (the Retry was lost, or
            // the capture starts late): its own DCID gives the keys.
            plain = InitialKeys::new(params, h.dcid, side).open(p, h);
            if plain.is_ok() {
                self.dcid = Some(h.dcid.to_vec());
            }
        }
        let Ok(plain) = plain else {
            stats.decrypt_errors += 1;
            return;
        };
        stats.decrypted += 1;
        let s = &mut self.sides[side as usize];
        s.version.get_or_insert(h.version);
        if s.finished() {
            return;
        }
        let (frames, err) = crypto_frames_lossy(&plain, params.crypto);
        if err.is_some() {
            stats.frame_errors += 1;
        }
        if !s.take(frames) {
            stats.capped += 1;
        }
        let kind = match side {
            Side::Client => HelloKind::Client,
            Side::Server => HelloKind::Server,
        };
        s.read_hello(kind);
        let retry = matches!(&s.outcome, Some(Ok(h)) if h.retry_request);
        let client = &mut self.sides[Side::Client as usize];
        if side == Side::Server && retry && matches!(client.outcome, Some(Ok(_))) {
            // The client answers with a second ClientHello in its next Initials.
            client.wants_second = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        s.chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn salts_are_the_published_ones() {
        assert_eq!(
            SALT_V1[..],
            unhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
        );
        assert_eq!(
            SALT_T050[..],
            unhex("7ff579e5acd072915580304c43a2367c60488310")
        );
    }

    /// RFC 9001 appendix A.1: the client's keys for DCID 0x8394c8f03e515708.
    #[test]
    fn rfc9001_client_initial_keys() {
        let p = params(VERSION_1).unwrap();
        let dcid = unhex("8394c8f03e515708");
        let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, p.salt).extract(&dcid);
        let mut secret = [0u8; 32];
        expand_label(&initial, b"client in", &mut secret);
        assert_eq!(
            secret[..],
            unhex("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
        );
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &secret);
        let mut key = [0u8; 16];
        expand_label(&prk, b"quic key", &mut key);
        assert_eq!(key[..], unhex("1f369613dd76d5467730efcbe3b1a22d"));
        let mut iv = [0u8; 12];
        expand_label(&prk, b"quic iv", &mut iv);
        assert_eq!(iv[..], unhex("fa044b2f42a3fd3b46fb255c"));
    }

    /// RFC 9001 appendix A.3: the server's Initial (a ServerHello and an ACK) decrypts with
    /// the server keys of the client's DCID.
    #[test]
    fn rfc9001_server_initial_decrypts() {
        let packet = unhex(
            "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a
             5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3
             dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84
             022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4
             2158407dd074ee",
        );
        let mut conn = Connection::new();
        conn.dcid = Some(unhex("8394c8f03e515708"));
        let mut stats = QuicStats::default();
        conn.datagram(Side::Server, &packet, &mut stats);
        assert_eq!(stats.decrypted, 1, "{stats:?}");
        let hello = conn.sides[1].outcome.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(hello.ciphers, [0x1301]);
        assert_eq!(hello.supported_versions, [0x0304]);
    }

    #[test]
    fn crypto_stream_reassembles_out_of_order_first_wins() {
        let mut s = CryptoStream::default();
        s.insert(4, b"efgh").unwrap();
        assert_eq!(s.prefix(), b"");
        s.insert(0, b"abcdXX").unwrap();
        assert_eq!(s.prefix(), b"abcdefgh");
        s.insert(2, b"ZZZZZZZZ").unwrap();
        assert_eq!(s.prefix(), b"abcdefghZZ");
        assert!(s.insert(MAX_CRYPTO_LEN as u64, b"x").is_err());
        assert!(s.insert(u64::MAX, b"x").is_err());
        for i in 0..MAX_RANGES - 1 {
            s.insert(100 + 10 * i as u64, b"y").unwrap();
        }
        assert!(s.insert(5000, b"y").is_err(), "{} ranges", s.have.len());
    }

    #[test]
    fn frames_truncated_are_named() {
        assert_eq!(crypto_frames(&[0, 0, 1]).unwrap(), vec![]);
        assert_eq!(
            crypto_frames(&[6, 0, 2, b'a', b'b']).unwrap(),
            vec![(0, &b"ab"[..])]
        );
        assert_eq!(
            crypto_frames(&[6, 0, 9, b'a']),
            Err(quic_err(2, "crypto.length", QuicErrorKind::Truncated))
        );
        assert_eq!(
            crypto_frames(&[0x08]),
            Err(quic_err(0, "frame.type", QuicErrorKind::Malformed))
        );
        // An ACK whose range count is far past the payload.
        assert!(crypto_frames(&[2, 0, 0, 0x80, 0xff, 0xff, 0xff, 0]).is_err());
    }

    #[test]
    fn versions() {
        assert_eq!(
            classify(b"\x0d\x01\x02\x03\x04\x05\x06\x07\x08Q046\x01"),
            Datagram::Undecryptable(0x5130_3436)
        );
        let mut d = vec![0xc0, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(classify(&d), Datagram::Initial(1));
        d[0] = 0xe0; // Handshake
        assert_eq!(classify(&d), Datagram::NotQuic);
        d[1..5].copy_from_slice(&VERSION_2.to_be_bytes());
        d[0] = 0xd0; // v2 Initial
        assert_eq!(classify(&d), Datagram::Initial(VERSION_2));
        d[1..5].copy_from_slice(b"Q050");
        assert_eq!(classify(&d), Datagram::Undecryptable(0x5130_3530));
        d[1..5].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]); // RTP-like
        assert_eq!(classify(&d), Datagram::NotQuic);
        assert_eq!(params(0x1a2a_3a4a).unwrap().salt, &SALT_DRAFT_29);
    }
}
