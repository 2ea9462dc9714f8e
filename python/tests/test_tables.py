"""trawl's Python tables equal the CLI's JSON, field by field, on the committed captures."""
import json
import math
import struct

import pyarrow as pa
import pytest

import trawl
from conftest import PCAPS, run_cli

# Captures of every kind the reader takes: Ethernet, VLAN, IPv6 fragments, tunnels, pcapng
# with directions and several interfaces, nanosecond and big-endian pcap, gzip, raw IP.
CAPTURES = [
    "android.pcap",
    "VlanPackets.pcap",
    "ipv6-frag.pcap",
    "vxlan.pcap",
    "GrePackets.cap",
    "mpeg-direction.pcapng",
    "many_interfaces-1.pcapng",
    "nanosecs_big_endian.pcap",
    "anon-v4.pcap.gz",
    "raw_ip.pcap",
]

TIME_FIELDS = ("first_ns", "last_ns")


def table_rows(table: pa.Table):
    """Rows as dicts, timestamps as integers (ns, or s for `second`): pyarrow's datetimes
    stop at microseconds."""
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols[name] = col.to_pylist()
    return [dict(zip(cols, values)) for values in zip(*cols.values())]


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assert_same_record(got, want, where):
    assert list(got) == list(want), f"{where}: fields differ"
    for field, expected in want.items():
        value = got[field]
        if isinstance(expected, float) or (isinstance(value, float) and not isinstance(expected, list)):
            # The CLI writes means and deviations with three decimals.
            assert math.isclose(value, expected, abs_tol=5.1e-4, rel_tol=1e-12), f"{where}.{field}: {value} != {expected}"
        else:
            assert value == expected, f"{where}.{field}: {value!r} != {expected!r}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_flows_equal_cli_json(trawl_bin, capture):
    path = PCAPS / capture
    want = json_lines(run_cli(trawl_bin, "flows", "-r", path, "--summary", "none").stdout)
    got = table_rows(trawl.flows(path))
    assert want, f"{capture}: the CLI wrote no flow"
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same_record(g, w, f"{capture} record {i}")


def test_flows_with_filter_payload_and_merged_files_equal_cli(trawl_bin):
    files = [PCAPS / "android.pcap", PCAPS / "VlanPackets.pcap"]
    args = ["flows", "--summary", "none", "-f", "tcp or udp", "--payload-bytes", "16", "--idle", "5s"]
    for f in files:
        args += ["-r", f]
    want = json_lines(run_cli(trawl_bin, *args).stdout)
    table = trawl.flows(files, filter="tcp or udp", payload_bytes=16, idle="5s")
    got = table_rows(table)
    for row in got:  # the CLI writes payloads in hex
        row["fwd_payload"] = row["fwd_payload"].hex()
        row["rev_payload"] = row["rev_payload"].hex()
    assert len(got) == len(want) > 0
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same_record(g, w, f"record {i}")


def test_flow_schema_types():
    table = trawl.flows(PCAPS / "ipv6-frag.pcap", addresses="binary")
    assert table.schema.field("first_ns").type == pa.timestamp("ns", tz="UTC")
    assert table.schema.field("src_ip").type == pa.binary()
    assert table.schema.field("fwd_packets").type == pa.uint64()
    assert table.schema.field("first_lengths").type == pa.list_(pa.int64())
    text = trawl.flows(PCAPS / "ipv6-frag.pcap")
    import ipaddress

    for b, s in zip(table.column("src_ip").to_pylist(), text.column("src_ip").to_pylist()):
        assert ipaddress.ip_address(b) == ipaddress.ip_address(s)


@pytest.mark.parametrize("capture", ["android.pcap", "mpeg-direction.pcapng", "many_interfaces-1.pcapng"])
def test_series_equal_cli_json(trawl_bin, capture):
    path = PCAPS / capture
    want = json_lines(run_cli(trawl_bin, "series", "-r", path, "--summary", "none").stdout)
    table = trawl.series(path)
    assert table.schema.field("second").type == pa.timestamp("s", tz="UTC")
    got = table_rows(table)
    assert want and len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same_record(g, w, f"{capture} second {i}")


@pytest.fixture(scope="module")
def db(tmp_path_factory, trawl_bin):
    """A flow database of two captures on two interfaces."""
    path = tmp_path_factory.mktemp("db") / "db"
    run_cli(trawl_bin, "ingest", "-r", PCAPS / "android.pcap", "--db", path, "-i", "eth0")
    run_cli(trawl_bin, "ingest", "-r", PCAPS / "VlanPackets.pcap", "--db", path, "-i", "eth1")
    return path


@pytest.mark.parametrize(
    "attrs,condition,ifaces",
    [
        ("talk_conv", None, None),
        ("sip,dport,proto,iface", "proto = tcp or proto = udp", None),
        ("time,iface,vlan,sport", None, "eth1"),
        ("apps", "not dport = 53", "eth0"),
    ],
)
def test_query_equals_cli_json(trawl_bin, db, attrs, condition, ifaces):
    args = ["query", "-d", db, attrs, "--format", "json", "-n", "1000000"]
    if condition:
        args += ["--condition", condition]
    if ifaces:
        args += ["-i", ifaces]
    want = json.loads(run_cli(trawl_bin, *args).stdout)["rows"]
    table = trawl.query(db, attrs, condition=condition, ifaces=ifaces)
    got = table_rows(table)
    for row in got:
        if "time" in row:  # the CLI writes RFC 3339
            row["time"] = trawl_time_text(row["time"])
    assert want and got == want


def trawl_time_text(ns):
    import datetime as dt

    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.timezone.utc)
    assert ns % 1_000_000_000 == 0
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_query_limit_sort_and_time_range(trawl_bin, db):
    want = json.loads(run_cli(trawl_bin, "query", "-d", db, "sip", "--format", "json", "-n", "3", "-s", "packets",
                              "--from", "2000-01-01T00:00:00Z", "--to", "now").stdout)["rows"]
    got = table_rows(trawl.query(db, ["sip"], limit=3, sort="packets", start="2000-01-01T00:00:00Z", end="now"))
    assert got == want and len(got) == 3
    assert trawl.query(db, "sip", start="2000-01-01", end="2000-01-02").num_rows == 0


def test_open_db_is_the_stored_rows(db):
    dataset = trawl.open_db(db)
    table = dataset.to_table()
    per_iface = trawl.query(db, "iface")
    assert table.num_rows == sum(per_iface.column("flows").to_pylist()) > 0
    assert sum(table.column("fwd_bytes").to_pylist()) == sum(per_iface.column("fwd_bytes").to_pylist())
    assert set(table.column("iface").to_pylist()) == {"eth0", "eth1"}
    eth1 = trawl.open_db(db, ifaces="eth1").to_table()
    assert set(eth1.column("iface").to_pylist()) == {"eth1"}


def read_pcap(data: bytes):
    """(ts_ns, frame) of a pcap (µs or ns, either byte order)."""
    magic = data[:4]
    order, scale = {
        b"\xd4\xc3\xb2\xa1": ("<", 1000),
        b"\x4d\x3c\xb2\xa1": ("<", 1),
        b"\xa1\xb2\xc3\xd4": (">", 1000),
        b"\xa1\xb2\x3c\x4d": (">", 1),
    }[magic]
    out, at = [], 24
    while at < len(data):
        sec, frac, caplen, _ = struct.unpack_from(order + "IIII", data, at)
        out.append((sec * 1_000_000_000 + frac * scale, data[at + 16 : at + 16 + caplen]))
        at += 16 + caplen
    return out


@pytest.mark.parametrize("bpf", [None, "tcp"])
def test_packets_equal_cli(trawl_bin, tmp_path, bpf):
    store = tmp_path / "packets"
    run_cli(trawl_bin, "dump", "-r", PCAPS / "android.pcap", "-w", store, "-i", "eth0")
    args = ["packets", "-r", store, "--from", "0", "--to", "now", "-w", "-", "--format", "pcap"]
    if bpf:
        args += ["-f", bpf]
    import subprocess

    want = read_pcap(subprocess.run([trawl_bin, *map(str, args)], capture_output=True, check=True).stdout)
    got = list(trawl.packets(store, 0, "now", filter=bpf))
    assert want and [(ts, frame) for ts, _, frame in got] == want
    assert {iface for _, iface, _ in got} == {"eth0"}
