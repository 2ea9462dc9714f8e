//! X.509 certificates as the TLS log shows them: subject and issuer (RFC 4514 strings, as Zeek's
//! x509.log), validity (ISO 8601 UTC), serial (hex) and SAN DNS names, read by a small bounded
//! DER reader ([`parse_certificate`]): lengths are checked against their enclosing element,
//! nesting is fixed by the structure walked, and nothing is followed or allocated beyond the
//! certificate's own bytes.
//!
//! ```
//! use trawl_app::x509::rfc4514_escape;
//! assert_eq!(rfc4514_escape("a,b"), "a\\,b");
//! ```
use crate::{Error, X509ErrorKind};

/// Largest certificate read (DER bytes).
pub const MAX_CERT_LEN: usize = 64 * 1024;

/// What the log keeps of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// Subject distinguished name, RFC 4514 (most specific RDN first, as Zeek's x509.log).
    pub subject: String,
    /// Issuer distinguished name, RFC 4514.
    pub issuer: String,
    /// notBefore, `YYYY-MM-DDTHH:MM:SSZ`.
    pub not_before: String,
    /// notAfter, `YYYY-MM-DDTHH:MM:SSZ`.
    pub not_after: String,
    /// The serial number's content bytes in uppercase hex (as Zeek).
    pub serial: String,
    /// subjectAltName dNSName entries, in order.
    pub san_dns: Vec<String>,
}

fn x509_err(offset: usize, field: &'static str, kind: X509ErrorKind) -> Error {
    Error::X509 {
        offset,
        field,
        kind,
    }
}

/// One DER element: tag, content (absolute offset of the content for errors).
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    at: usize,
}

/// A reader over the elements of one constructed element's content.
struct Der<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Absolute offset of `buf[0]` in the certificate.
    base: usize,
}

impl<'a> Der<'a> {
    fn new(t: Tlv<'a>) -> Self {
        Der {
            buf: t.content,
            pos: 0,
            base: t.at,
        }
    }

    fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn peek_tag(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// The next element (low-tag-number form; definite lengths of up to 4 bytes).
    fn next(&mut self, field: &'static str) -> Result<Tlv<'a>, Error> {
        let at = self.base + self.pos;
        let trunc = |o| x509_err(o, field, X509ErrorKind::Truncated);
        let tag = *self.buf.get(self.pos).ok_or(trunc(at))?;
        if tag & 0x1f == 0x1f {
            return Err(x509_err(at, field, X509ErrorKind::Malformed));
        }
        let first = *self.buf.get(self.pos + 1).ok_or(trunc(at + 1))?;
        let mut p = self.pos + 2;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                // Indefinite lengths are BER, not DER; more than 4 bytes is past any bound.
                return Err(x509_err(at + 1, field, X509ErrorKind::Malformed));
            }
            let bytes = self.buf.get(p..p + n).ok_or(trunc(at + 2))?;
            p += n;
            bytes.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b))
        };
        let content = self
            .buf
            .get(p..)
            .and_then(|r| r.get(..len))
            .ok_or(trunc(at))?;
        self.pos = p + len;
        Ok(Tlv {
            tag,
            content,
            at: self.base + p,
        })
    }

    /// The next element, which must have `tag`.
    fn expect(&mut self, tag: u8, field: &'static str) -> Result<Tlv<'a>, Error> {
        let t = self.next(field)?;
        if t.tag != tag {
            return Err(x509_err(t.at, field, X509ErrorKind::Malformed));
        }
        Ok(t)
    }
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// Reads a DER certificate (the first of a TLS Certificate message).
///
/// # Errors
/// [`Error::X509`] naming the field and its offset in the certificate: an element past its
/// enclosing one (`Truncated`), an unexpected tag, a bad time or length form (`Malformed`),
/// a certificate over [`MAX_CERT_LEN`] (`TooLarge`).
pub fn parse_certificate(der: &[u8]) -> Result<Certificate, Error> {
    if der.len() > MAX_CERT_LEN {
        return Err(x509_err(0, "certificate", X509ErrorKind::TooLarge));
    }
    let mut top = Der {
        buf: der,
        pos: 0,
        base: 0,
    };
    let cert = top.expect(SEQUENCE, "certificate")?;
    let tbs = Der::new(cert).expect(SEQUENCE, "tbsCertificate")?;
    let mut t = Der::new(tbs);
    if t.peek_tag() == Some(0xa0) {
        t.next("version")?;
    }
    let serial = t.expect(INTEGER, "serialNumber")?;
    t.expect(SEQUENCE, "signature")?;
    let issuer = name(t.expect(SEQUENCE, "issuer")?)?;
    let validity = t.expect(SEQUENCE, "validity")?;
    let mut v = Der::new(validity);
    let not_before = time(v.next("notBefore")?, "notBefore")?;
    let not_after = time(v.next("notAfter")?, "notAfter")?;
    let subject = name(t.expect(SEQUENCE, "subject")?)?;
    t.expect(SEQUENCE, "subjectPublicKeyInfo")?;
    let mut san_dns = Vec::new();
    while !t.is_empty() {
        let e = t.next("extensions")?;
        if e.tag == 0xa3 {
            san_dns = subject_alt_dns(e)?;
        }
    }
    Ok(Certificate {
        subject,
        issuer,
        not_before,
        not_after,
        serial: serial.content.iter().map(|b| format!("{b:02X}")).collect(),
        san_dns,
    })
}

/// The dNSNames of the subjectAltName extension in `[3] Extensions`.
fn subject_alt_dns(e: Tlv<'_>) -> Result<Vec<String>, Error> {
    let list = Der::new(e).expect(SEQUENCE, "extensions")?;
    let mut l = Der::new(list);
    while !l.is_empty() {
        let ext = l.expect(SEQUENCE, "extension")?;
        let mut x = Der::new(ext);
        let oid = x.expect(OID, "extension.id")?;
        // 2.5.29.17 subjectAltName.
        if oid.content != [0x55, 0x1d, 0x11] {
            continue;
        }
        let mut value = x.next("extension.critical")?;
        if value.tag == 0x01 {
            value = x.next("extension.value")?;
        }
        if value.tag != OCTET_STRING {
            return Err(x509_err(
                value.at,
                "extension.value",
                X509ErrorKind::Malformed,
            ));
        }
        let mut inner = Der {
            buf: value.content,
            pos: 0,
            base: value.at,
        };
        let names = inner.expect(SEQUENCE, "subjectAltName")?;
        let mut n = Der::new(names);
        let mut out = Vec::new();
        while !n.is_empty() {
            let g = n.next("generalName")?;
            // [2] IMPLICIT IA5String.
            if g.tag == 0x82 {
                out.push(String::from_utf8_lossy(g.content).into_owned());
            }
        }
        return Ok(out);
    }
    Ok(Vec::new())
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 50-99 are 19xx) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) as
/// ISO 8601.
fn time(t: Tlv<'_>, field: &'static str) -> Result<String, Error> {
    let bad = || x509_err(t.at, field, X509ErrorKind::Malformed);
    let s = t.content;
    let (year, rest) = match (t.tag, s.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&s[..2]).ok_or_else(bad)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &s[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&s[..4]).ok_or_else(bad)?, &s[4..]),
        _ => return Err(bad()),
    };
    if rest[10] != b'Z' {
        return Err(bad());
    }
    let f: Vec<u32> = rest[..10]
        .chunks(2)
        .map(digits)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    Ok(format!(
        "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        f[0], f[1], f[2], f[3], f[4]
    ))
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |a, &c| {
        c.is_ascii_digit().then(|| a * 10 + u32::from(c - b'0'))
    })
}

/// A Name (RDNSequence) as RFC 4514: RDNs last to first, joined by `,`; several attributes of
/// one RDN joined by `+`.
fn name(seq: Tlv<'_>) -> Result<String, Error> {
    let mut rdns = Vec::new();
    let mut r = Der::new(seq);
    while !r.is_empty() {
        let set = r.expect(SET, "rdn")?;
        let mut s = Der::new(set);
        let mut atts = Vec::new();
        while !s.is_empty() {
            let atv = s.expect(SEQUENCE, "attributeTypeAndValue")?;
            let mut a = Der::new(atv);
            let oid = a.expect(OID, "attribute.type")?;
            let value = a.next("attribute.value")?;
            atts.push(attribute(oid.content, value));
        }
        rdns.push(atts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

/// `TYPE=value`: the short names of RFC 4514 (and OpenSSL's `emailAddress`), else the dotted
/// OID with the value's DER in hex (`#...`).
fn attribute(oid: &[u8], value: Tlv<'_>) -> String {
    let short = match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x09] => Some("STREET"),
        [0x55, 0x04, 0x0a] => Some("O"),
        [0x55, 0x04, 0x0b] => Some("OU"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => Some("emailAddress"),
        _ => None,
    };
    let text = match value.tag {
        // UTF8String, PrintableString, TeletexString (as Latin-1), IA5String.
        0x0c | 0x13 | 0x16 => Some(String::from_utf8_lossy(value.content).into_owned()),
        0x14 => Some(value.content.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UTF-16BE.
        0x1e => Some(String::from_utf16_lossy(
            &value
                .content
                .chunks_exact(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect::<Vec<_>>(),
        )),
        _ => None,
    };
    match (short, text) {
        (Some(s), Some(t)) => format!("{s}={}", rfc4514_escape(&t)),
        (short, _) => {
            let ty = short.map_or_else(|| dotted(oid), str::to_string);
            let mut hex = format!("#{:02x}{:02x}", value.tag, value.content.len().min(255));
            for b in value.content {
                hex.push_str(&format!("{b:02x}"));
            }
            format!("{ty}={hex}")
        }
    }
}

/// An OID's content bytes as dotted decimal.
fn dotted(oid: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut v: u64 = 0;
    for (i, &b) in oid.iter().enumerate() {
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                let first = (v / 40).min(2);
                parts.push(first.to_string());
                parts.push((v - first * 40).to_string());
            } else {
                parts.push(v.to_string());
            }
            v = 0;
        } else if i == oid.len() - 1 || v > u64::MAX >> 8 {
            break;
        }
    }
    parts.join(".")
}

/// Escapes an attribute value as RFC 4514 section 2.4 asks: `"+,;<>\` and NUL anywhere, a
/// leading `#` or space, a trailing space.
pub fn rfc4514_escape(s: &str) -> String {
    let n = s.chars().count();
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i + 1 == n => out.push_str("\\ "),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 128 {
            v.push(content.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(content);
        v
    }

    fn rdn(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        let atv = [tlv(OID, oid), tlv(tag, value.as_bytes())].concat();
        tlv(SET, &tlv(SEQUENCE, &atv))
    }

    /// A certificate built element by element (CN=www.example.org, serial 009A0B).
    pub(crate) fn sample() -> Vec<u8> {
        let issuer = tlv(
            SEQUENCE,
            &[
                rdn(&[0x55, 4, 6], 0x13, "US"),
                rdn(&[0x55, 4, 10], 0x13, "Example, Inc."),
                rdn(&[0x55, 4, 3], 0x0c, "Example CA"),
            ]
            .concat(),
        );
        let subject = tlv(SEQUENCE, &rdn(&[0x55, 4, 3], 0x0c, "www.example.org"));
        let san = tlv(
            SEQUENCE,
            &[
                tlv(0x82, b"www.example.org"),
                tlv(0x87, &[1, 2, 3, 4]),
                tlv(0x82, b"example.org"),
            ]
            .concat(),
        );
        let ext = tlv(
            SEQUENCE,
            &[tlv(OID, &[0x55, 0x1d, 0x11]), tlv(OCTET_STRING, &san)].concat(),
        );
        let tbs = tlv(
            SEQUENCE,
            &[
                tlv(0xa0, &tlv(INTEGER, &[2])),
                tlv(INTEGER, &[0x00, 0x9a, 0x0b]),
                tlv(SEQUENCE, &tlv(OID, &[0x2a, 0x86, 0x48])),
                issuer,
                tlv(
                    SEQUENCE,
                    &[
                        tlv(UTC_TIME, b"491231235959Z"),
                        tlv(GENERALIZED_TIME, b"20500101000000Z"),
                    ]
                    .concat(),
                ),
                subject,
                tlv(SEQUENCE, &tlv(0x03, &[0; 10])),
                tlv(0xa3, &tlv(SEQUENCE, &ext)),
            ]
            .concat(),
        );
        tlv(
            SEQUENCE,
            &[tbs, tlv(SEQUENCE, &[]), tlv(0x03, &[0; 4])].concat(),
        )
    }

    #[test]
    fn parse_every_field() {
        let c = parse_certificate(&sample()).unwrap();
        assert_eq!(c.subject, "CN=www.example.org");
        assert_eq!(c.issuer, "CN=Example CA,O=Example\\, Inc.,C=US");
        assert_eq!(c.not_before, "2049-12-31T23:59:59Z");
        assert_eq!(c.not_after, "2050-01-01T00:00:00Z");
        assert_eq!(c.serial, "009A0B");
        assert_eq!(c.san_dns, ["www.example.org", "example.org"]);
    }

    #[test]
    fn truncated_anywhere_is_an_error_never_a_panic() {
        let der = sample();
        for n in 0..der.len() {
            assert!(parse_certificate(&der[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn dotted_oids_and_escapes() {
        assert_eq!(dotted(&[0x55, 0x04, 0x03]), "2.5.4.3");
        assert_eq!(
            dotted(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]),
            "1.2.840.113549"
        );
        assert_eq!(rfc4514_escape(" #a "), "\\ #a\\ ");
        assert_eq!(rfc4514_escape("#a"), "\\#a");
    }
}
