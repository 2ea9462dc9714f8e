//! [`Object`]: a JSON object written straight into a byte buffer, field by field, for the
//! records of `calls.jsonl` and `rtp.jsonl` ([`crate::CallRecord::write_json`]). A run at an
//! operator's scale writes hundreds of thousands of records; building a `serde_json::Value`
//! map for each (36 heap keys and values) was a quarter of the CPU and most of the memory
//! (bench/RESULTS.md, "VoIP at an operator's scale").
//!
//! The bytes are those `serde_json` writes for the record's `Value` (which the files held
//! before): the callers give keys in `Value`'s order (sorted), numbers are written as
//! `serde_json` writes them (its own float formatter, `null` for NaN and infinities) and
//! strings escaped by its rules. A test in `record.rs` holds the two to the same bytes.
use serde_json::ser::{CompactFormatter, Formatter};

/// One JSON object being written into `out`; [`Object::end`] closes it.
pub(crate) struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    /// Opens an object at the end of `out`.
    #[inline]
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, first: true }
    }

    /// The separator and `"key":` (keys are literals that need no escaping).
    #[inline]
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    pub(crate) fn str(&mut self, key: &str, v: &str) {
        let out = self.key(key);
        string(v, out);
    }

    pub(crate) fn opt_str(&mut self, key: &str, v: Option<&str>) {
        match v {
            Some(v) => self.str(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    pub(crate) fn bool(&mut self, key: &str, v: bool) {
        let text: &[u8] = if v { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    pub(crate) fn uint(&mut self, key: &str, v: u64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    pub(crate) fn int(&mut self, key: &str, v: i64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    pub(crate) fn opt_uint(&mut self, key: &str, v: Option<u64>) {
        match v {
            Some(v) => self.uint(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    pub(crate) fn opt_int(&mut self, key: &str, v: Option<i64>) {
        match v {
            Some(v) => self.int(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    pub(crate) fn float(&mut self, key: &str, v: f64) {
        let out = self.key(key);
        float(v, out);
    }

    pub(crate) fn opt_float(&mut self, key: &str, v: Option<f64>) {
        match v {
            Some(v) => self.float(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    pub(crate) fn uint_list(&mut self, key: &str, values: impl Iterator<Item = u64>) {
        let out = self.key(key);
        out.push(b'[');
        for (i, v) in values.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        }
        out.push(b']');
    }

    /// Closes the object.
    #[inline]
    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

/// `v` as `serde_json` writes an `f64`: its shortest form, `null` when not finite.
#[inline]
fn float(v: f64, out: &mut Vec<u8>) {
    if v.is_finite() {
        // Writing into a Vec cannot fail.
        let _ = CompactFormatter.write_f64(out, v);
    } else {
        out.extend_from_slice(b"null");
    }
}

/// `s` as a JSON string. Most text of a record (addresses, codecs, SIP URIs) needs no
/// escaping and is copied whole; the rest goes through `serde_json`'s own escaping.
#[inline]
fn string(s: &str, out: &mut Vec<u8>) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Serialising a str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}
