"""Shared fixtures: the trawl binary the tables are compared with, the committed captures,
and a generated capture of 250,000 flows."""
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PCAPS = REPO / "testdata" / "pcaps"


@pytest.fixture(scope="session")
def trawl_bin():
    """The CLI to compare with: $TRAWL_BIN (scripts/test.sh sets it to the build it tested),
    else `trawl` on PATH. Missing, the comparisons fail: they are the point of these tests."""
    path = os.environ.get("TRAWL_BIN") or shutil.which("trawl")
    assert path and os.access(path, os.X_OK), "set TRAWL_BIN to a trawl binary"
    return path


def run_cli(trawl_bin, *args, check=True):
    """Runs the CLI; returns its standard output (text)."""
    p = subprocess.run([trawl_bin, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"trawl {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
    return p


def write_udp_flows(path: Path, flows: int):
    """A pcap (µs) of `flows` UDP packets, each its own flow (distinct source address and
    port), one per microsecond."""
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    frame_len = 14 + 20 + 8 + 4
    rec = bytearray(16 + frame_len)
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    udp_payload = b"trwl"
    with open(path, "wb") as f:
        f.write(header)
        chunk = bytearray()
        for i in range(flows):
            ts_us = 1_700_000_000_000_000 + i
            struct.pack_into("<IIII", rec, 0, ts_us // 1_000_000, ts_us % 1_000_000, frame_len, frame_len)
            src = bytes([10, (i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF])
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + 4, 0, 0, 64, 17, 0, src, bytes([192, 0, 2, 1]))
            sport = 1024 + (i % 60000)
            udp = struct.pack("!HHHH", sport, 53, 8 + 4, 0)
            rec[16:] = eth + ip + udp + udp_payload
            chunk += rec
            if len(chunk) > 1 << 22:
                f.write(chunk)
                chunk.clear()
        f.write(chunk)


BIG_FLOWS = 250_000


@pytest.fixture(scope="session")
def big_flows(tmp_path_factory):
    # 250,000 one-packet flows: a table of about 30 MB, large enough that a copy would show
    # in pyarrow's allocations, small enough for the dev build the suite tests.
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    write_udp_flows(path, BIG_FLOWS)
    yield path
    path.unlink()
