//! `flows` and `series`: capture files merged by time, a tcpdump filter, the flow meter and
//! the per-second series counter, as `trawl flows -r` and `trawl series -r` run them (the
//! same reader, batch size, per-file filter and metering calls as their `pcap_source` and
//! `flow_meter` blocks), with the records built into Arrow columns instead of text.
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampNanosecondBuilder, UInt16Builder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use pyo3::prelude::*;
use trawl_bpf::{FileFilters, Filter};
use trawl_capture::{FileSourceConfig, LinkType, MergedFiles, PacketRecord};
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::{DirectionRecord, FlowConfig, FlowMeter, FlowRecord};
use trawl_series::{SeriesConfig, SeriesCounter, SeriesRow};

use crate::{arrow_out, trawl_error, without_gil, Interrupt};

/// Records per batch read from the files: the `pcap_source` block's, so that the meter sees
/// the same batches (and expires flows in the same order) as `trawl flows -r`.
const READ_BATCH: usize = 256;

/// Rows per Arrow record batch handed to Python.
const ROWS_PER_BATCH: usize = 64 * 1024;

/// Most bytes of a packet a filter looks at (the CLI's snap length for filters).
const SNAPLEN: u32 = trawl_capture::MAX_SNAPLEN;

/// `trawl.flows(...)`'s settings, checked.
struct MeterSettings {
    files: Vec<PathBuf>,
    filter: Option<String>,
    flow: FlowConfig,
}

#[allow(clippy::too_many_arguments)]
fn settings(
    paths: Vec<PathBuf>,
    filter: Option<String>,
    idle: &str,
    active: &str,
    tcp_linger: &str,
    capacity: usize,
    payload_bytes: usize,
    tunnel: &str,
) -> PyResult<MeterSettings> {
    if paths.is_empty() {
        return Err(trawl_error("no input: give at least one capture file"));
    }
    let duration = |name: &str, v: &str| {
        trawl_time::parse_duration_ns(v).map_err(|e| trawl_error(format!("{name}: {e}")))
    };
    let tunnel = match tunnel {
        "outer" => TunnelMode::Outer,
        "inner" => TunnelMode::Inner,
        other => {
            return Err(trawl_error(format!(
                "tunnel: {other:?} is not one of 'outer', 'inner'"
            )))
        }
    };
    let flow = FlowConfig {
        idle_timeout_ns: duration("idle", idle)?,
        active_timeout_ns: duration("active", active)?,
        tcp_linger_ns: duration("tcp_linger", tcp_linger)?,
        capacity,
        payload_bytes,
        decode: DecodeConfig { tunnel },
        ..FlowConfig::default()
    };
    flow.check().map_err(|e| trawl_error(e.spelled(e.name)))?;
    let filter = filter.filter(|f| !f.trim().is_empty());
    if let Some(expr) = &filter {
        // As the CLI does: a bad expression fails before any file is read, with libpcap's
        // message.
        Filter::compile(expr, LinkType::ETHERNET, SNAPLEN).map_err(trawl_error)?;
    }
    Ok(MeterSettings {
        files: paths,
        filter,
        flow,
    })
}

/// What a metering run produced.
#[derive(Default)]
struct Metered {
    flows: Vec<RecordBatch>,
    series: Vec<RecordBatch>,
}

/// Reads every file, meters it, and builds the flow records (`flows`) or the series rows
/// (otherwise) into record batches. Files that cannot be read fail the call with their
/// errors: a Python caller has no summary on standard error to read them in.
fn run(
    s: &MeterSettings,
    flows: Option<FlowColumns>,
    with_series: bool,
    interrupt: &mut Interrupt,
) -> PyResult<Metered> {
    let config = FileSourceConfig {
        batch_size: READ_BATCH,
        format: None,
    };
    let mut merged = MergedFiles::open(&s.files, &config);
    let mut filters = s.filter.as_deref().map(|f| FileFilters::new(f, SNAPLEN));
    let mut meter = FlowMeter::new(s.flow.clone());
    let mut series = with_series.then(|| SeriesCounter::new(SeriesConfig::default()));
    let mut out = Metered::default();
    let mut flow_cols = flows;
    let mut rows = SeriesColumns::default();
    let mut filter_errors = Vec::new();
    loop {
        interrupt.check()?;
        // A batch's records borrow the reader: a new vector per batch of READ_BATCH packets.
        let mut records: Vec<PacketRecord<'_>> = Vec::with_capacity(READ_BATCH);
        let more = merged.next_batch(&mut records, |pkt, file| {
            filters.as_mut().is_none_or(|f| {
                f.for_file(file.order, file.big_endian)
                    .matches(pkt.link_type, pkt.data, pkt.wire_len)
                    .unwrap_or_else(|e| {
                        filter_errors.push(format!("{}: {e}", file.path.display()));
                        false
                    })
            })
        });
        if more.is_none() {
            break;
        }
        let mut sink = |r: &FlowRecord<'_>| {
            if let Some(c) = flow_cols.as_mut() {
                c.push(r);
                if c.len() == ROWS_PER_BATCH {
                    out.flows.push(c.finish());
                }
            }
        };
        match series.as_mut() {
            Some(counter) => meter.process_batch(&records, &mut sink, |i, o| {
                let p = &records[i];
                counter.observe(p.ts_ns, p.wire_len, p.direction, o, &mut |r: &SeriesRow| {
                    rows.push(r)
                });
            }),
            None => meter.process_batch(&records, &mut sink, |_, _| {}),
        }
        if rows.len() >= ROWS_PER_BATCH {
            out.series.push(rows.finish());
        }
    }
    let mut sink = |r: &FlowRecord<'_>| {
        if let Some(c) = flow_cols.as_mut() {
            c.push(r);
        }
    };
    meter.flush(&mut sink);
    if let Some(counter) = series.as_mut() {
        counter.finish(&mut |r: &SeriesRow| rows.push(r));
    }
    let mut errors = std::mem::take(&mut merged.errors);
    errors.extend(filter_errors);
    if !errors.is_empty() {
        return Err(trawl_error(errors.join("; ")));
    }
    if let Some(mut c) = flow_cols {
        if c.len() > 0 || out.flows.is_empty() {
            out.flows.push(c.finish());
        }
    }
    if rows.len() > 0 || out.series.is_empty() {
        out.series.push(rows.finish());
    }
    Ok(out)
}

/// `trawl.flows`: see `trawl/__init__.py`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (paths, filter, idle, active, tcp_linger, capacity, payload_bytes, tunnel, binary_addresses))]
pub fn flows(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    filter: Option<String>,
    idle: &str,
    active: &str,
    tcp_linger: &str,
    capacity: usize,
    payload_bytes: usize,
    tunnel: &str,
    binary_addresses: bool,
) -> PyResult<Py<PyAny>> {
    let s = settings(
        paths,
        filter,
        idle,
        active,
        tcp_linger,
        capacity,
        payload_bytes,
        tunnel,
    )?;
    let columns = FlowColumns::new(binary_addresses, payload_bytes > 0);
    let schema = columns.schema.clone();
    let metered = without_gil(py, |interrupt| run(&s, Some(columns), false, interrupt))?;
    arrow_out::table(py, schema, metered.flows)
}

/// `trawl.series`: see `trawl/__init__.py`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (paths, filter, idle, active, tcp_linger, capacity, tunnel))]
pub fn series(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    filter: Option<String>,
    idle: &str,
    active: &str,
    tcp_linger: &str,
    capacity: usize,
    tunnel: &str,
) -> PyResult<Py<PyAny>> {
    let s = settings(paths, filter, idle, active, tcp_linger, capacity, 0, tunnel)?;
    let metered = without_gil(py, |interrupt| run(&s, None, true, interrupt))?;
    arrow_out::table(py, SeriesColumns::schema(), metered.series)
}

/// Per-direction columns, in `docs/specs/flow-record.md`'s order after `fwd_`/`rev_`.
struct DirColumns {
    len_min: UInt32Builder,
    len_max: UInt32Builder,
    len_mean: Float64Builder,
    len_std: Float64Builder,
    iat_min_ns: UInt64Builder,
    iat_max_ns: UInt64Builder,
    iat_mean_ns: Float64Builder,
    iat_std_ns: Float64Builder,
    flags: [UInt32Builder; 8],
    tcp_flags: UInt8Builder,
    zero_window: UInt32Builder,
    retrans: UInt32Builder,
}

/// The TCP flag counters' names, in the order of [`DirColumns::flags`].
const FLAG_NAMES: [&str; 8] = ["syn", "syn_ack", "fin", "rst", "psh", "urg", "ece", "cwr"];

impl DirColumns {
    fn new() -> Self {
        DirColumns {
            len_min: UInt32Builder::new(),
            len_max: UInt32Builder::new(),
            len_mean: Float64Builder::new(),
            len_std: Float64Builder::new(),
            iat_min_ns: UInt64Builder::new(),
            iat_max_ns: UInt64Builder::new(),
            iat_mean_ns: Float64Builder::new(),
            iat_std_ns: Float64Builder::new(),
            flags: std::array::from_fn(|_| UInt32Builder::new()),
            tcp_flags: UInt8Builder::new(),
            zero_window: UInt32Builder::new(),
            retrans: UInt32Builder::new(),
        }
    }

    fn fields(prefix: &str, out: &mut Vec<Field>) {
        let f = |name: &str, ty: DataType| Field::new(format!("{prefix}{name}"), ty, false);
        out.push(f("len_min", DataType::UInt32));
        out.push(f("len_max", DataType::UInt32));
        out.push(f("len_mean", DataType::Float64));
        out.push(f("len_std", DataType::Float64));
        out.push(f("iat_min_ns", DataType::UInt64));
        out.push(f("iat_max_ns", DataType::UInt64));
        out.push(f("iat_mean_ns", DataType::Float64));
        out.push(f("iat_std_ns", DataType::Float64));
        for name in FLAG_NAMES {
            out.push(f(name, DataType::UInt32));
        }
        out.push(f("tcp_flags", DataType::UInt8));
        out.push(f("zero_window", DataType::UInt32));
        out.push(f("retrans", DataType::UInt32));
    }

    fn push(&mut self, d: &DirectionRecord) {
        self.len_min.append_value(d.len_min);
        self.len_max.append_value(d.len_max);
        self.len_mean.append_value(d.len_mean);
        self.len_std.append_value(d.len_std);
        self.iat_min_ns.append_value(d.iat_min_ns);
        self.iat_max_ns.append_value(d.iat_max_ns);
        self.iat_mean_ns.append_value(d.iat_mean_ns);
        self.iat_std_ns.append_value(d.iat_std_ns);
        let counts = [d.syn, d.syn_ack, d.fin, d.rst, d.psh, d.urg, d.ece, d.cwr];
        for (b, v) in self.flags.iter_mut().zip(counts) {
            b.append_value(v);
        }
        self.tcp_flags.append_value(d.tcp_flags);
        self.zero_window.append_value(d.zero_window);
        self.retrans.append_value(d.retransmissions);
    }

    fn finish(&mut self, out: &mut Vec<ArrayRef>) {
        out.push(Arc::new(self.len_min.finish()));
        out.push(Arc::new(self.len_max.finish()));
        out.push(Arc::new(self.len_mean.finish()));
        out.push(Arc::new(self.len_std.finish()));
        out.push(Arc::new(self.iat_min_ns.finish()));
        out.push(Arc::new(self.iat_max_ns.finish()));
        out.push(Arc::new(self.iat_mean_ns.finish()));
        out.push(Arc::new(self.iat_std_ns.finish()));
        for b in &mut self.flags {
            out.push(Arc::new(b.finish()));
        }
        out.push(Arc::new(self.tcp_flags.finish()));
        out.push(Arc::new(self.zero_window.finish()));
        out.push(Arc::new(self.retrans.finish()));
    }
}

/// The TCP round-trip columns of the standard feature level, in the CLI's JSON order: both
/// handshake times, then per direction the sample count and min/mean/max (null without a
/// sample, as the JSON's).
struct RttColumns {
    handshake: [UInt64Builder; 2],
    samples: [UInt32Builder; 2],
    min: [UInt64Builder; 2],
    mean: [Float64Builder; 2],
    max: [UInt64Builder; 2],
}

impl RttColumns {
    fn new() -> Self {
        RttColumns {
            handshake: std::array::from_fn(|_| UInt64Builder::new()),
            samples: std::array::from_fn(|_| UInt32Builder::new()),
            min: std::array::from_fn(|_| UInt64Builder::new()),
            mean: std::array::from_fn(|_| Float64Builder::new()),
            max: std::array::from_fn(|_| UInt64Builder::new()),
        }
    }

    fn fields(out: &mut Vec<Field>) {
        let f = |name: String, ty: DataType, nullable| Field::new(name, ty, nullable);
        for p in ["fwd_", "rev_"] {
            out.push(f(format!("{p}rtt_handshake_ns"), DataType::UInt64, true));
        }
        for p in ["fwd_", "rev_"] {
            out.push(f(format!("{p}rtt_samples"), DataType::UInt32, false));
            out.push(f(format!("{p}rtt_min_ns"), DataType::UInt64, true));
            out.push(f(format!("{p}rtt_mean_ns"), DataType::Float64, true));
            out.push(f(format!("{p}rtt_max_ns"), DataType::UInt64, true));
        }
    }

    fn push(&mut self, fwd: &DirectionRecord, rev: &DirectionRecord) {
        for (i, d) in [fwd, rev].into_iter().enumerate() {
            self.handshake[i].append_option(d.rtt_handshake_ns);
            self.samples[i].append_value(d.rtt_samples);
            let some = d.rtt_samples > 0;
            self.min[i].append_option(some.then_some(d.rtt_min_ns));
            self.mean[i].append_option(some.then_some(d.rtt_mean_ns));
            self.max[i].append_option(some.then_some(d.rtt_max_ns));
        }
    }

    fn finish(&mut self, out: &mut Vec<ArrayRef>) {
        for b in &mut self.handshake {
            out.push(Arc::new(b.finish()));
        }
        for i in 0..2 {
            out.push(Arc::new(self.samples[i].finish()));
            out.push(Arc::new(self.min[i].finish()));
            out.push(Arc::new(self.mean[i].finish()));
            out.push(Arc::new(self.max[i].finish()));
        }
    }
}

/// An address column: text (`"10.0.0.1"`, `"2001:db8::1"`, as the CLI writes them) or the
/// address's bytes (4 or 16).
enum AddrColumn {
    Text(StringBuilder),
    Bytes(BinaryBuilder),
}

impl AddrColumn {
    fn new(binary: bool) -> Self {
        if binary {
            AddrColumn::Bytes(BinaryBuilder::new())
        } else {
            AddrColumn::Text(StringBuilder::new())
        }
    }

    fn push(&mut self, ip: IpAddr) {
        match self {
            AddrColumn::Text(b) => b.append_value(ip.to_string()),
            AddrColumn::Bytes(b) => match ip {
                IpAddr::V4(v4) => b.append_value(v4.octets()),
                IpAddr::V6(v6) => b.append_value(v6.octets()),
            },
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            AddrColumn::Text(b) => Arc::new(b.finish()),
            AddrColumn::Bytes(b) => Arc::new(b.finish()),
        }
    }
}

/// A MAC address as the CLI writes it: `aa:bb:cc:dd:ee:ff`.
fn mac_text(mac: &[u8; 6]) -> String {
    let parts: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
    parts.join(":")
}

/// Flow records as Arrow columns, named and ordered as `docs/specs/flow-record.md` (the
/// fields of `trawl flows`' JSON), times as `timestamp[ns, UTC]`.
struct FlowColumns {
    schema: SchemaRef,
    rows: usize,
    src_ip: AddrColumn,
    dst_ip: AddrColumn,
    src_port: UInt16Builder,
    dst_port: UInt16Builder,
    proto: StringBuilder,
    vlan: UInt16Builder,
    src_mac: StringBuilder,
    dst_mac: StringBuilder,
    first: TimestampNanosecondBuilder,
    last: TimestampNanosecondBuilder,
    totals: [UInt64Builder; 6],
    fwd: DirColumns,
    rev: DirColumns,
    first_lengths: ListBuilder<Int64Builder>,
    first_iats_ns: ListBuilder<Int64Builder>,
    payload: Option<[BinaryBuilder; 2]>,
    end_reason: StringBuilder,
    community_id: StringBuilder,
    rtt: RttColumns,
}

/// The per-flow totals' names, in the order of [`FlowColumns::totals`].
const TOTAL_NAMES: [&str; 6] = [
    "fwd_packets",
    "rev_packets",
    "fwd_bytes",
    "rev_bytes",
    "fwd_ip_bytes",
    "rev_ip_bytes",
];

fn utc_ns() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

impl FlowColumns {
    fn new(binary_addresses: bool, with_payload: bool) -> Self {
        let addr = if binary_addresses {
            DataType::Binary
        } else {
            DataType::Utf8
        };
        let f = |name: &str, ty: DataType| Field::new(name, ty, false);
        let mut fields = vec![
            f("src_ip", addr.clone()),
            f("dst_ip", addr),
            f("src_port", DataType::UInt16),
            f("dst_port", DataType::UInt16),
            f("proto", DataType::Utf8),
            f("vlan", DataType::UInt16),
            f("src_mac", DataType::Utf8),
            f("dst_mac", DataType::Utf8),
            f("first_ns", utc_ns()),
            f("last_ns", utc_ns()),
        ];
        fields.extend(TOTAL_NAMES.iter().map(|n| f(n, DataType::UInt64)));
        DirColumns::fields("fwd_", &mut fields);
        DirColumns::fields("rev_", &mut fields);
        let list = || DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)));
        fields.push(f("first_lengths", list()));
        fields.push(f("first_iats_ns", list()));
        if with_payload {
            fields.push(f("fwd_payload", DataType::Binary));
            fields.push(f("rev_payload", DataType::Binary));
        }
        fields.push(f("end_reason", DataType::Utf8));
        // After the first schema's fields, as in the CLI's JSON (docs/specs/flow-record.md).
        fields.push(f("community_id", DataType::Utf8));
        RttColumns::fields(&mut fields);
        FlowColumns {
            schema: Arc::new(Schema::new(fields)),
            rows: 0,
            src_ip: AddrColumn::new(binary_addresses),
            dst_ip: AddrColumn::new(binary_addresses),
            src_port: UInt16Builder::new(),
            dst_port: UInt16Builder::new(),
            proto: StringBuilder::new(),
            vlan: UInt16Builder::new(),
            src_mac: StringBuilder::new(),
            dst_mac: StringBuilder::new(),
            first: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            last: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            totals: std::array::from_fn(|_| UInt64Builder::new()),
            fwd: DirColumns::new(),
            rev: DirColumns::new(),
            first_lengths: ListBuilder::new(Int64Builder::new()),
            first_iats_ns: ListBuilder::new(Int64Builder::new()),
            payload: with_payload.then(|| [BinaryBuilder::new(), BinaryBuilder::new()]),
            end_reason: StringBuilder::new(),
            community_id: StringBuilder::new(),
            rtt: RttColumns::new(),
        }
    }

    fn len(&self) -> usize {
        self.rows
    }

    fn push(&mut self, r: &FlowRecord<'_>) {
        self.rows += 1;
        self.src_ip.push(r.src_ip);
        self.dst_ip.push(r.dst_ip);
        self.src_port.append_value(r.src_port);
        self.dst_port.append_value(r.dst_port);
        match r.proto_name().name() {
            Some(name) => self.proto.append_value(name),
            None => self.proto.append_value(r.proto.to_string()),
        }
        self.vlan.append_value(r.vlan);
        self.src_mac.append_value(mac_text(&r.src_mac));
        self.dst_mac.append_value(mac_text(&r.dst_mac));
        // Nanoseconds since 1970 fit an i64 until 2262.
        self.first.append_value(r.first_ns as i64);
        self.last.append_value(r.last_ns as i64);
        let totals = [
            r.fwd.packets,
            r.rev.packets,
            r.fwd.bytes,
            r.rev.bytes,
            r.fwd.ip_bytes,
            r.rev.ip_bytes,
        ];
        for (b, v) in self.totals.iter_mut().zip(totals) {
            b.append_value(v);
        }
        self.fwd.push(&r.fwd);
        self.rev.push(&r.rev);
        self.first_lengths
            .values()
            .append_slice(&r.first_lengths[..r.first_count]);
        self.first_lengths.append(true);
        self.first_iats_ns
            .values()
            .append_slice(&r.first_iats_ns[..r.first_count]);
        self.first_iats_ns.append(true);
        if let Some([fwd, rev]) = self.payload.as_mut() {
            fwd.append_value(r.fwd_payload);
            rev.append_value(r.rev_payload);
        }
        self.end_reason.append_value(r.end_reason.name());
        self.community_id.append_value(r.community_id().as_str());
        self.rtt.push(&r.fwd, &r.rev);
    }

    /// The rows so far as one batch; the builders start again empty.
    fn finish(&mut self) -> RecordBatch {
        self.rows = 0;
        let mut cols: Vec<ArrayRef> = vec![
            self.src_ip.finish(),
            self.dst_ip.finish(),
            Arc::new(self.src_port.finish()),
            Arc::new(self.dst_port.finish()),
            Arc::new(self.proto.finish()),
            Arc::new(self.vlan.finish()),
            Arc::new(self.src_mac.finish()),
            Arc::new(self.dst_mac.finish()),
            Arc::new(self.first.finish()),
            Arc::new(self.last.finish()),
        ];
        for b in &mut self.totals {
            cols.push(Arc::new(b.finish()));
        }
        self.fwd.finish(&mut cols);
        self.rev.finish(&mut cols);
        cols.push(Arc::new(self.first_lengths.finish()));
        cols.push(Arc::new(self.first_iats_ns.finish()));
        if let Some([fwd, rev]) = self.payload.as_mut() {
            cols.push(Arc::new(fwd.finish()));
            cols.push(Arc::new(rev.finish()));
        }
        cols.push(Arc::new(self.end_reason.finish()));
        cols.push(Arc::new(self.community_id.finish()));
        self.rtt.finish(&mut cols);
        RecordBatch::try_new(self.schema.clone(), cols).expect("columns match the schema")
    }
}

/// Series rows as Arrow columns: `second` as `timestamp[s, UTC]`, then the counters of
/// `docs/specs/series.md`.
#[derive(Default)]
struct SeriesColumns {
    second: Vec<i64>,
    counters: [Vec<u64>; 8],
}

/// The counters' names, in the order of [`SeriesColumns::counters`] (`trawl series`' fields).
const SERIES_COUNTERS: [&str; 8] = [
    "packets",
    "bytes",
    "active_flows",
    "new_flows",
    "in_packets",
    "in_bytes",
    "out_packets",
    "out_bytes",
];

impl SeriesColumns {
    fn schema() -> SchemaRef {
        let mut fields = vec![Field::new(
            "second",
            DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
            false,
        )];
        fields.extend(
            SERIES_COUNTERS
                .iter()
                .map(|n| Field::new(*n, DataType::UInt64, false)),
        );
        Arc::new(Schema::new(fields))
    }

    fn len(&self) -> usize {
        self.second.len()
    }

    fn push(&mut self, r: &SeriesRow) {
        self.second.push(r.second as i64);
        let values = [
            r.packets,
            r.bytes,
            r.active_flows,
            r.new_flows,
            r.in_packets,
            r.in_bytes,
            r.out_packets,
            r.out_bytes,
        ];
        for (c, v) in self.counters.iter_mut().zip(values) {
            c.push(v);
        }
    }

    fn finish(&mut self) -> RecordBatch {
        use arrow_array::{TimestampSecondArray, UInt64Array};
        let second =
            TimestampSecondArray::from(std::mem::take(&mut self.second)).with_timezone("UTC");
        let mut cols: Vec<ArrayRef> = vec![Arc::new(second)];
        for c in &mut self.counters {
            cols.push(Arc::new(UInt64Array::from(std::mem::take(c))));
        }
        RecordBatch::try_new(Self::schema(), cols).expect("columns match the schema")
    }
}
