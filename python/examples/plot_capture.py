#!/usr/bin/env python3
"""Plots a capture's per-second traffic and its top talkers to a PNG.

    python3 examples/plot_capture.py capture.pcap [-o capture.png] [--top 10]

The series come from trawl.series (packets and bytes per second of packet time), the top
talkers from trawl.flows (bytes sent and received per address, summed with pyarrow).
"""
import argparse

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt
import pyarrow as pa
import pyarrow.compute as pc

import trawl


def top_talkers(flows: pa.Table, n: int) -> pa.Table:
    """Bytes per address, both directions: an initiator's sent and received bytes, and the
    same for the responder."""
    total = pc.add(flows.column("fwd_bytes"), flows.column("rev_bytes"))
    sides = pa.concat_tables([
        pa.table({"address": flows.column("src_ip"), "bytes": total}),
        pa.table({"address": flows.column("dst_ip"), "bytes": total}),
    ])
    sums = sides.group_by("address").aggregate([("bytes", "sum")])
    return sums.sort_by([("bytes_sum", "descending")]).slice(0, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="+", help="capture file(s), merged by time")
    ap.add_argument("-o", "--output", default="capture.png", help="PNG to write")
    ap.add_argument("--top", type=int, default=10, help="talkers shown")
    ap.add_argument("-f", "--filter", help="tcpdump filter expression")
    a = ap.parse_args()

    series = trawl.series(a.capture, filter=a.filter).to_pandas()
    talkers = top_talkers(trawl.flows(a.capture, filter=a.filter), a.top).to_pandas()

    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(10, 8), constrained_layout=True)
    ax1.step(series["second"], series["bytes"] * 8 / 1e3, where="post", color="tab:blue")
    ax1.set_ylabel("kbit/s", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.step(series["second"], series["packets"], where="post", color="tab:orange")
    ax2.set_ylabel("packets/s", color="tab:orange")
    ax1.set_title(f"{', '.join(a.capture)}: per second (UTC)")
    ax3.barh(talkers["address"][::-1], talkers["bytes_sum"][::-1] / 1e3, color="tab:green")
    ax3.set_xlabel("kB sent + received")
    ax3.set_title(f"top {len(talkers)} talkers")
    fig.savefig(a.output, dpi=100)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
