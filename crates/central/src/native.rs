//! `RowBinary` rows as one ClickHouse `Native` block, sorted by the table's sorting key: what
//! `clickhouse_sink` inserts (`INSERT ... FORMAT Native`).
//!
//! Why: for the same rows, ClickHouse 18.16 spends about half the CPU on a Native insert
//! whose rows are already in sorting-key order that it spends on a RowBinary one in arrival
//! order (`bench/clickhouse.sh`, 2026-11-27 late night: 5.7 → 2.7 CPU-s for 2 M flow rows).
//! Native is columnar: the server reads each column in one go instead of calling each
//! column's reader per value; and a block already in key order skips the part's sort (the
//! server checks the order first). The rows are written as RowBinary first
//! ([`crate::rowbinary`], also the format of the tests and of the fallback) and transposed
//! here, on the insert's own thread.
//!
//! The block is what the server's HTTP interface reads and writes as `Native`: the column
//! count and row count (varints), then per column its name, its type name and its values,
//! all of one column together: fixed-width values back to back (little-endian, as
//! RowBinary), strings each after its varint length, and a `Nullable` column as its null map
//! (a byte per row, 1 for null) followed by every row's value (zeros where null). There is
//! no block-info header at the HTTP interface's protocol revision (0). Text columns go as
//! `String` on every server generation: a current server converts them into its
//! `LowCardinality(String)` columns when it reads the block.
use std::cmp::Ordering;

use crate::schema::{ColType, ServerVersion};

/// How one column's value is laid out in a RowBinary row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// So many bytes (numbers, dates, enums, `FixedString`).
    Fixed(usize),
    /// A varint length, then that many bytes.
    Text,
    /// A null flag byte (1: null), then the value of so many bytes when not null.
    Nullable(usize),
}

/// The layout of a column of SQL type `ty` (the 18.16 names of [`ColType`]).
fn layout(ty: &str) -> Option<Layout> {
    if let Some(inner) = ty
        .strip_prefix("Nullable(")
        .and_then(|t| t.strip_suffix(')'))
    {
        return match layout(inner)? {
            Layout::Fixed(w) => Some(Layout::Nullable(w)),
            _ => None,
        };
    }
    if let Some(n) = ty
        .strip_prefix("FixedString(")
        .and_then(|t| t.strip_suffix(')'))
    {
        return n.parse().ok().map(Layout::Fixed);
    }
    Some(match ty {
        "String" => Layout::Text,
        "UInt8" | "Int8" => Layout::Fixed(1),
        "UInt16" | "Int16" | "Date" => Layout::Fixed(2),
        "UInt32" | "Int32" | "DateTime" | "Float32" => Layout::Fixed(4),
        "UInt64" | "Int64" | "Float64" => Layout::Fixed(8),
        t if t.starts_with("Enum8(") => Layout::Fixed(1),
        t if t.starts_with("Enum16(") => Layout::Fixed(2),
        _ => return None,
    })
}

/// How a sorting-key column's values compare, as the server compares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyKind {
    /// Unsigned little-endian integers (`UInt*`, `Date`, `DateTime`) of so many bytes.
    Unsigned(usize),
    /// Bytes, shorter first on a common prefix (`String`, `FixedString`).
    Bytes,
}

fn key_kind(ty: &str, l: Layout) -> Option<KeyKind> {
    match l {
        Layout::Text => Some(KeyKind::Bytes),
        Layout::Fixed(_) if ty.starts_with("FixedString(") => Some(KeyKind::Bytes),
        Layout::Fixed(w) if ty.starts_with("UInt") || ty == "Date" || ty == "DateTime" => {
            Some(KeyKind::Unsigned(w))
        }
        _ => None,
    }
}

/// A varint (LEB128) at `b[at..]`: its value and where it ends.
fn varint(b: &[u8], mut at: usize) -> Option<(usize, usize)> {
    let mut v = 0usize;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(at)?;
        at += 1;
        v |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some((v, at));
        }
    }
    None
}

fn put_varint(mut v: usize, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_string(s: &[u8], out: &mut Vec<u8>) {
    put_varint(s.len(), out);
    out.extend_from_slice(s);
}

/// The bytes of the value at `at` (a string's without its length) and where the next
/// value starts.
fn value(b: &[u8], at: usize, l: Layout) -> Option<(&[u8], usize)> {
    let (start, end) = match l {
        Layout::Fixed(w) => (at, at + w),
        Layout::Text => {
            let (n, start) = varint(b, at)?;
            (start, start.checked_add(n)?)
        }
        Layout::Nullable(w) => match *b.get(at)? {
            0 => (at + 1, at + 1 + w),
            _ => (at + 1, at + 1),
        },
    };
    Some((b.get(start..end)?, end))
}

fn compare(k: KeyKind, a: &[u8], b: &[u8]) -> Ordering {
    match k {
        KeyKind::Bytes => a.cmp(b),
        KeyKind::Unsigned(_) => a.iter().rev().cmp(b.iter().rev()),
    }
}

/// Transposes RowBinary rows into Native blocks, keeping its buffers from one batch to the
/// next.
pub struct NativeWriter {
    columns: Vec<(&'static str, &'static str, Layout)>,
    /// The sorting key: column index and how its values compare.
    key: Vec<(usize, KeyKind)>,
    /// Per row: where its next value to transpose starts.
    cursor: Vec<u32>,
    /// Rows in sorting-key order.
    order: Vec<u32>,
    /// Per row, where each key column's value starts (`key.len()` per row).
    key_at: Vec<u32>,
    /// The rows copied in sorting-key order: the columns are then read from it front to
    /// back (read in key order from the arrival-order rows, each of the 43 columns was a
    /// read at a random place of a batch larger than the caches).
    sorted: Vec<u8>,
}

impl NativeWriter {
    /// A writer for rows of `columns` (a table's, in order), sorted by the columns named in
    /// `sort_key` (the table's `ORDER BY`, comma-separated; empty: rows kept in their
    /// order). `None` when a column's type or a key column's comparison is not one this
    /// writer knows.
    pub fn new(columns: &'static [(&'static str, ColType)], sort_key: &str) -> Option<Self> {
        let columns: Vec<(&'static str, &'static str, Layout)> = columns
            .iter()
            .map(|(name, ty)| {
                let t = ty.sql(ServerVersion::V18);
                layout(t).map(|l| (*name, t, l))
            })
            .collect::<Option<_>>()?;
        let key = sort_key
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(|k| {
                let i = columns.iter().position(|(n, _, _)| *n == k)?;
                let (_, t, l) = columns[i];
                Some((i, key_kind(t, l)?))
            })
            .collect::<Option<_>>()?;
        Some(NativeWriter {
            columns,
            key,
            cursor: Vec::new(),
            order: Vec::new(),
            key_at: Vec::new(),
            sorted: Vec::new(),
        })
    }

    /// The columns' names, comma-separated (the `INSERT`'s column list).
    pub fn column_list(&self) -> String {
        let names: Vec<&str> = self.columns.iter().map(|(n, _, _)| *n).collect();
        names.join(", ")
    }

    /// Appends `rows` RowBinary rows (`data`, exactly that many) as one Native block to
    /// `out`, in sorting-key order (rows of equal keys keep their order). `None` when `data`
    /// is not that many rows of the columns (then `out` is left as it was).
    pub fn write(&mut self, data: &[u8], rows: usize, out: &mut Vec<u8>) -> Option<()> {
        let mark = out.len();
        let r = self.transpose(data, rows, out);
        if r.is_none() {
            out.truncate(mark);
        }
        r
    }

    fn transpose(&mut self, data: &[u8], rows: usize, out: &mut Vec<u8>) -> Option<()> {
        // u32 offsets: a batch is far below 4 GB.
        u32::try_from(data.len()).ok()?;
        // Where each row starts, and where its key values are.
        self.cursor.clear();
        self.key_at.clear();
        let mut at = 0usize;
        for _ in 0..rows {
            self.cursor.push(at as u32);
            let mut k = 0;
            for (i, (_, _, l)) in self.columns.iter().enumerate() {
                if self.key.get(k).is_some_and(|(c, _)| *c == i) {
                    self.key_at.push(at as u32);
                    k += 1;
                }
                at = value(data, at, *l)?.1;
            }
        }
        if at != data.len() {
            return None;
        }
        self.order.clear();
        self.order.extend(0..rows as u32);
        let (key, key_at, columns) = (&self.key, &self.key_at, &self.columns);
        let n = key.len();
        let key_value = |row: u32, k: usize| {
            let at = key_at[row as usize * n + k] as usize;
            // Every key value was read whole above.
            value(data, at, columns[key[k].0].2).map_or(&[][..], |(v, _)| v)
        };
        if n > 0 {
            // Stable: rows of one key stay in arrival order.
            self.order.sort_by(|&a, &b| {
                (0..n)
                    .map(|k| compare(key[k].1, key_value(a, k), key_value(b, k)))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            });
        }
        // The rows in key order, and where each starts in the copy.
        self.sorted.clear();
        for i in 0..rows {
            let row = self.order[i] as usize;
            let start = self.cursor[row] as usize;
            let end = self.cursor.get(row + 1).map_or(data.len(), |&e| e as usize);
            self.order[i] = self.sorted.len() as u32;
            self.sorted.extend_from_slice(&data[start..end]);
        }
        std::mem::swap(&mut self.order, &mut self.cursor);
        let data = &self.sorted[..];
        put_varint(self.columns.len(), out);
        put_varint(rows, out);
        for &(name, ty, l) in &self.columns {
            put_string(name.as_bytes(), out);
            put_string(ty.as_bytes(), out);
            if let Layout::Nullable(_) = l {
                for &at in &self.cursor {
                    out.push(data[at as usize]);
                }
            }
            for c in self.cursor.iter_mut() {
                let (v, next) = value(data, *c as usize, l)?;
                match l {
                    Layout::Fixed(_) => out.extend_from_slice(v),
                    Layout::Text => put_string(v, out),
                    Layout::Nullable(w) if v.is_empty() => out.resize(out.len() + w, 0),
                    Layout::Nullable(_) => out.extend_from_slice(v),
                }
                *c = next as u32;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[(&str, ColType)] = &[
        ("time", ColType::Plain("DateTime")),
        ("probe", ColType::Label),
        ("n", ColType::Plain("Nullable(UInt64)")),
        ("ip", ColType::Plain("FixedString(2)")),
    ];

    fn row(time: u32, probe: &str, n: Option<u64>, ip: [u8; 2], out: &mut Vec<u8>) {
        out.extend_from_slice(&time.to_le_bytes());
        put_string(probe.as_bytes(), out);
        match n {
            Some(v) => {
                out.push(0);
                out.extend_from_slice(&v.to_le_bytes());
            }
            None => out.push(1),
        }
        out.extend_from_slice(&ip);
    }

    /// The block layout, byte for byte, and the order: by time as a number (256 after 2,
    /// which little-endian bytes alone would put first), then probe as bytes with the
    /// shorter first, rows of equal keys in arrival order.
    #[test]
    fn rows_become_one_sorted_native_block() {
        let mut data = Vec::new();
        row(256, "a", Some(7), [1, 1], &mut data);
        row(2, "bb", None, [2, 2], &mut data);
        row(2, "b", Some(9), [3, 3], &mut data);
        row(2, "b", None, [4, 4], &mut data);
        let mut w = NativeWriter::new(COLS, "time, probe").unwrap();
        let mut out = vec![0xee];
        w.write(&data, 4, &mut out).unwrap();
        let mut want = vec![0xee, 4, 4];
        want.extend(b"\x04time\x08DateTime");
        for t in [2u32, 2, 2, 256] {
            want.extend(t.to_le_bytes());
        }
        want.extend(b"\x05probe\x06String\x01b\x01b\x02bb\x01a");
        want.extend(b"\x01n\x10Nullable(UInt64)");
        want.extend([0, 1, 1, 0]);
        for v in [9u64, 0, 0, 7] {
            want.extend(v.to_le_bytes());
        }
        want.extend(b"\x02ip\x0eFixedString(2)");
        want.extend([3, 3, 4, 4, 2, 2, 1, 1]);
        assert_eq!(out, want);
        assert_eq!(w.column_list(), "time, probe, n, ip");
        // The buffers are reused: the same rows again give the same block.
        let mut again = vec![0xee];
        w.write(&data, 4, &mut again).unwrap();
        assert_eq!(again, want);
    }

    /// Rows that are not whole rows of the columns are refused, and nothing is written.
    #[test]
    fn torn_rows_are_refused() {
        let mut data = Vec::new();
        row(1, "a", Some(7), [1, 1], &mut data);
        let mut w = NativeWriter::new(COLS, "time").unwrap();
        let mut out = vec![1];
        assert!(w.write(&data[..data.len() - 1], 1, &mut out).is_none());
        assert!(w.write(&data, 2, &mut out).is_none());
        data.push(0);
        assert!(w.write(&data, 1, &mut out).is_none());
        assert_eq!(out, [1]);
        // A key column whose comparison is unknown, an unknown type: no writer.
        assert!(NativeWriter::new(COLS, "n").is_none());
        assert!(NativeWriter::new(&[("x", ColType::Plain("Decimal(9, 2)"))], "").is_none());
    }

    /// Every column type of trawl's three tables has a layout, and each table's sorting key
    /// a comparison.
    #[test]
    fn the_tables_are_all_writable() {
        for name in ["flows", "series", "alarms"] {
            let (cols, key) = crate::schema::table(name).unwrap();
            assert!(NativeWriter::new(cols, key).is_some(), "{name}");
        }
    }
}
