"""The package as Python users meet it: pandas and Polars, tables that cross without a copy,
the GIL released, Ctrl-C, errors as exceptions with trawl's messages, the example script."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import trawl
from conftest import BIG_FLOWS, PCAPS, REPO, run_cli


def test_to_pandas_and_polars():
    table = trawl.flows(PCAPS / "android.pcap")
    df = table.to_pandas()
    assert len(df) == table.num_rows > 0
    assert str(df["first_ns"].dtype).startswith("datetime64[ns")
    assert df["fwd_bytes"].sum() == pa.compute.sum(table.column("fwd_bytes")).as_py()
    import polars as pl

    frame = pl.from_arrow(table)
    assert frame.height == table.num_rows
    assert frame["first_ns"].dtype == pl.Datetime("ns", "UTC")
    assert frame["src_port"].to_list() == table.column("src_port").to_pylist()
    series = trawl.series(PCAPS / "android.pcap")
    s = pl.from_arrow(series)
    assert s.height == series.num_rows > 0
    # Every packet of the capture is in the series (the 25 that are not IP in no flow).
    assert s["packets"].sum() == 500 >= sum(df["fwd_packets"]) + sum(df["rev_packets"])


def test_big_flow_table_crosses_without_a_copy(big_flows):
    """pyarrow allocates nothing for trawl's columns: its arrays point at the buffers trawl
    built (the C data interface). A copy would allocate the table's size from pyarrow's pool."""
    before = pa.total_allocated_bytes()
    table = trawl.flows(big_flows, capacity=1 << 21)
    allocated = pa.total_allocated_bytes() - before
    assert table.num_rows == BIG_FLOWS
    assert table.nbytes > 25 << 20
    assert allocated < 1 << 20, f"pyarrow allocated {allocated} bytes for a {table.nbytes}-byte table"
    # Zero-copy views onward: numpy sees the same buffer pyarrow holds.
    chunk = table.column("fwd_bytes").chunk(0)
    view = chunk.to_numpy(zero_copy_only=True)
    assert view.ctypes.data == chunk.buffers()[1].address
    assert table.column("fwd_packets").to_pylist()[:3] == [1, 1, 1]


def test_gil_is_released_while_trawl_works(big_flows):
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    started = time.monotonic()
    # Long enough to count ticks in any build: a release build meters the file in ~0.1 s.
    while time.monotonic() - started < 0.5:
        trawl.flows(big_flows, capacity=1 << 21)
    took = time.monotonic() - started
    done.set()
    t.join()
    # Held all along, the GIL would have let the counter run only at the switch interval's
    # mercy of a C call that never yields: next to nothing.
    assert took > 0.2 and ticks > took * 100, (took, ticks)


def test_ctrl_c_interrupts(big_flows):
    code = f"""
import sys, time, trawl
print("ready", flush=True)
try:
    trawl.flows([{str(big_flows)!r}] * 100, capacity=1 << 21)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
print("finished", flush=True)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and "interrupted" in out
    assert time.monotonic() - sent < 5


def test_errors_carry_trawls_messages(trawl_bin, tmp_path):
    # A bad filter: libpcap's message, as the CLI prints it.
    with pytest.raises(trawl.TrawlError) as e:
        trawl.flows(PCAPS / "android.pcap", filter="tcp port")
    cli = run_cli(trawl_bin, "flows", "-r", PCAPS / "android.pcap", "-f", "tcp port", check=False)
    assert cli.returncode == 2 and str(e.value) in cli.stderr
    # A missing file is named.
    with pytest.raises(trawl.TrawlError, match="no-such.pcap"):
        trawl.flows(tmp_path / "no-such.pcap")
    # A damaged capture: the file and offset.
    with pytest.raises(trawl.TrawlError, match="test_damaged.pcap"):
        trawl.flows(PCAPS / "test_damaged.pcap")
    # A setting out of range: its name and the range.
    with pytest.raises(trawl.TrawlError, match="idle"):
        trawl.flows(PCAPS / "android.pcap", idle="0s")
    with pytest.raises(trawl.TrawlError, match="invalid condition, at character"):
        trawl.query(tmp_path, "sip", condition="sip = = 1")
    (tmp_path / "junk").write_text("x")
    with pytest.raises(trawl.TrawlError, match="holds no trawl flow database"):
        trawl.query(tmp_path, "sip")
    with pytest.raises(trawl.TrawlError, match="unknown attribute"):
        trawl.query(tmp_path, "nonsense")
    with pytest.raises(trawl.TrawlError):
        trawl.packets(tmp_path, 0, "now", filter="tcp port")


def test_example_plot_writes_a_png(tmp_path):
    out = tmp_path / "android.png"
    script = REPO / "python" / "examples" / "plot_capture.py"
    env = dict(os.environ, MPLBACKEND="Agg")
    subprocess.run([sys.executable, str(script), str(PCAPS / "android.pcap"), "-o", str(out)], check=True, env=env)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
