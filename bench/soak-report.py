#!/usr/bin/env python3
"""The checks and the table of bench/soak.sh (run by it; reads its working directory).

Environment: DIR, MINUTES, PPS, CAPTURE, STORE_BUDGET_B, DB_MAX_B, MAX_RSS_GROWTH (MiB),
SENT_SECONDS, ARGS_GIVEN, RUN_CMDLINE. Exit 1 if a check fails.
"""
import csv
import json
import os
import re
import sys

D = os.environ["DIR"]
STORE_BUDGET = int(os.environ["STORE_BUDGET_B"])
DB_MAX = int(os.environ["DB_MAX_B"])
MAX_GROWTH_MIB = float(os.environ["MAX_RSS_GROWTH"])


def path(name):
    return os.path.join(D, name)


def read(name, default=""):
    try:
        with open(path(name), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return default


def summary(name):
    """Every JSON object a process printed on standard error, merged (trawl run prints its
    exporters' report as a line of its own before the summary)."""
    out = {}
    for line in read(name).splitlines():
        if line.startswith("{"):
            try:
                out.update(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def rc(name):
    t = read(name + ".rc").strip()
    return int(t) if t else None


def slope(xs, ys):
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


run = summary("run.log")
collect = summary("collect.log")
listen = summary("listen.log")
packets = summary("packets.log")
live = run.get("live", {})
dump = run.get("dump", {})
store = run.get("store", {})
exporters = run.get("exporters", [])
counters = dict(kv.split("=") for kv in read("counters.txt").split())
counters = {k: int(v) for k, v in counters.items()}
tr = read("tcpreplay.log")
m = re.findall(r"Actual: (\d+) packets", tr)
sent = int(m[-1]) if m else None
rated = re.findall(r"Rated: .*?([\d.]+) pps", tr)
m = re.findall(r"Failed packets:\s+(\d+)", tr)
send_failed = int(m[-1]) if m else 0
with open(path("samples.csv")) as f:
    rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
killed = read("killed").split()

checks = []  # (name, ok, detail)


def check(name, ok, detail):
    checks.append((name, bool(ok), detail))


# Processes ended by themselves, with success.
check(
    "processes",
    not killed and rc("run") == 0 and rc("collect") == 0 and rc("listen") == 0,
    f"exit codes run={rc('run')} collect={rc('collect')} listen={rc('listen')}"
    + (f"; killed after 120 s: {' '.join(killed)}" if killed else ""),
)

# Packets: tcpreplay's count = what the capture end's packet socket saw (kernel count) and
# what trawl read + its kernel drops + the veth's own drops.
read_ = run.get("packets_read", 0)
kdrops = live.get("kernel_drops", 0)
kpk = live.get("kernel_packets", 0)
check(
    "sent = seen + counted drops",
    sent is not None
    and sent == counters.get("sent_tx", -1) + counters.get("sent_tx_dropped", 0)
    and counters.get("sent_tx") == kpk
    and kpk == read_ + kdrops,
    f"tcpreplay sent {sent} (and could not send {send_failed}); veth tx "
    f"{counters.get('sent_tx')} + tx_dropped {counters.get('sent_tx_dropped')}; packet socket "
    f"{kpk} = trawl read {read_} + kernel drops {kdrops}",
)

# The packet store: the lossless listener wrote every packet read; retention kept the store
# within its budget and deleted segments to do it; every remaining segment reads whole.
ret = dump.get("retention") or {}
seg_ok = [l.split() for l in read("capinfos.txt").splitlines()]
cap_total = sum(int(s[1]) for s in seg_ok if s[2] == "ok")
cap_failed = [s[0] for s in seg_ok if s[2] != "ok"]
final = {k: int(v) for k, v in (kv.split("=") for kv in read("final.txt").split())}
store_bytes = final["store_bytes"]
deleted_segs = final["segments_ever"] - final["segments"]
check(
    "store: every packet written",
    dump.get("packets_written") == read_ and not dump.get("errors"),
    f"dump wrote {dump.get('packets_written')} of {read_} packets; errors {dump.get('errors')}",
)
check(
    "store: within budget, segments deleted",
    store_bytes <= STORE_BUDGET
    and (deleted_segs > 0 or dump.get("bytes_written", 0) <= STORE_BUDGET),
    f"{store_bytes} bytes in {final['segments']} segments (budget "
    f"{STORE_BUDGET}); {deleted_segs} segments seen deleted by the samples, retention says "
    f"{ret.get('deleted_for_budget')} for budget, {ret.get('bytes_deleted')} bytes, "
    f"errors {ret.get('errors')}",
)
check(
    "store: readable",
    rc("packets") == 0
    and not packets.get("errors")
    and not cap_failed
    and packets.get("packets_written") == cap_total
    and cap_total > 0,
    f"trawl packets: exit {rc('packets')}, {packets.get('packets_written')} packets from "
    f"{packets.get('segments_selected')} segments, errors {packets.get('errors')}; capinfos: "
    f"{cap_total} packets in {len(seg_ok)} segments, unreadable {cap_failed or 'none'}",
)

# The flow database: every record stored, within its budget, readable.
dret = store.get("retention") or {}
db_bytes = final["db_bytes"]
deleted_blocks = final["blocks_ever"] - final["blocks"]
records = run.get("records", 0)
check(
    "db: every record stored",
    store.get("records") == records,
    f"{store.get('records')} of {records} records in {store.get('blocks')} blocks "
    f"({store.get('extra_parts')} extra parts, {store.get('bytes')} bytes written)",
)
check(
    "db: within budget",
    db_bytes <= DB_MAX and (deleted_blocks > 0 or store.get("bytes", 0) <= DB_MAX),
    f"{db_bytes} bytes in {final['blocks']} blocks (budget {DB_MAX}); "
    f"{deleted_blocks} blocks seen deleted; retention summary {json.dumps(dret)}",
)
KEYS = ("flows", "fwd_packets", "rev_packets", "fwd_bytes", "rev_bytes")
q = {k: 0 for k in KEYS}
try:
    for row in json.loads(read("query.json") or "{}").get("rows", []):
        for k in KEYS:
            q[k] += row.get(k, 0)
except json.JSONDecodeError:
    q = None
# An independent reader of the same blocks, if there is one here.
try:
    import duckdb

    con = duckdb.connect()
    dd = con.execute(
        "SELECT count(*), sum(fwd_packets), sum(rev_packets), sum(fwd_bytes), sum(rev_bytes) "
        f"FROM read_parquet('{path('db')}/iface=*/*/*.parquet')"
    ).fetchone()
    dd = dict(zip(KEYS, (int(x or 0) for x in dd)))
except ImportError:
    dd = None
except Exception as e:  # noqa: BLE001 - an unreadable block is a finding, not a crash
    dd = {"error": str(e)[:200]}
check(
    "db: readable",
    rc("query") == 0 and q is not None and (dd is None or dd == q),
    f"trawl query -d DB talk_conv --limit 0: exit {rc('query')} "
    f"{read('query.log').strip()[:200]} totals {q}; "
    + (f"DuckDB over the same blocks {'agrees' if dd == q else dd}" if dd is not None else "DuckDB not installed"),
)

# Records: the flows file, the exporter and the collector all have every record.
with open(path("flows.jsonl"), "rb") as f:
    flow_lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
check(
    "flows file: every record",
    flow_lines == records,
    f"{flow_lines} lines, {records} records metered",
)
exp = exporters[0] if exporters else {}
exp_lost = exp.get("dropped_queue", 0) + exp.get("dropped_send", 0)
snmp = read("snmp.txt").splitlines()
udp = {}
for a, b in zip(snmp, snmp[1:]):
    if a.startswith("Udp:") and b.startswith("Udp:"):
        udp = dict(zip(a.split()[1:], (int(x) for x in b.split()[1:])))
        break
got = collect.get("flows", 0)
counted_udp = udp.get("RcvbufErrors", 0) + udp.get("InErrors", 0)
check(
    "export: every record collected or counted",
    exp.get("records", 0) + exp_lost == records
    and (got == exp.get("records") or (got < exp.get("records", 0) and counted_udp > 0)),
    f"exporter sent {exp.get('records')} (+{exp_lost} dropped, counted), collector decoded "
    f"{got}; UDP receive errors in the namespace {counted_udp}; last_error {exp.get('last_error')}",
)

# Memory and descriptors: the second half's fitted RSS slope, times its length, under the
# limit; no more descriptors in the second half than in the first.
T = rows[-1]["t_s"]
half = [r for r in rows if r["t_s"] >= T / 2]
first = [r for r in rows if r["t_s"] < T / 2] or rows[:1]
xs = [r["t_s"] / 60 for r in half]
rss_slope = slope(xs, [r["rss_kib"] / 1024 for r in half])  # MiB per minute
growth = rss_slope * (T / 2 / 60)
check(
    "memory stopped growing",
    len(half) >= 2 and growth < MAX_GROWTH_MIB,
    f"RSS {rows[0]['rss_kib'] / 1024:.1f} -> {rows[-1]['rss_kib'] / 1024:.1f} MiB (peak "
    f"{max(r['hwm_kib'] for r in rows) / 1024:.1f}); second half slope {rss_slope * 60:+.2f} "
    f"MiB/h = {growth:+.2f} MiB over {len(half)} samples (limit {MAX_GROWTH_MIB:g})",
)
fd_first = max(r["fds"] for r in first)
fd_second = max(r["fds"] for r in half)
check(
    "descriptors stopped growing",
    fd_second <= fd_first + 4,
    f"max {int(fd_first)} in the first half, {int(fd_second)} in the second "
    f"(threads {int(rows[-1]['threads'])})",
)

# ------------------------------------------------------------------------------------------
print(f"soak: {os.environ['RUN_CMDLINE']}")
print(
    f"sender: tcpreplay --pps {os.environ['PPS']} --loop 0 --unique-ip {os.environ['CAPTURE']}, "
    f"{os.environ['SENT_SECONDS']} s (tcpreplay: {rated[-1] if rated else '?'} packets/s); "
    f"args: {os.environ['ARGS_GIVEN'] or '(defaults)'}"
)
print()
hdr = (
    f"{'t min':>6} {'RSS MiB':>8} {'anon':>6} {'fds':>4} {'sent':>11} {'seen':>11} {'gap':>7} "
    f"{'missed':>9} {'waits':>6} {'records':>10} {'segs':>5} {'-segs':>6} {'store MB':>8} "
    f"{'blocks':>6} {'-blk':>5} {'db MB':>6} {'load':>5}"
)
print(hdr)
for r in rows:
    print(
        f"{r['t_s'] / 60:6.1f} {r['rss_kib'] / 1024:8.1f} {r['anon_kib'] / 1024:6.1f} "
        f"{int(r['fds']):4d} "
        f"{int(r['sent_tx']):11d} {int(r['status_packets']):11d} {int(r['unaccounted']):7d} "
        f"{int(r['ring_missed']):9d} {int(r['producer_waits']):6d} {int(r['flow_lines']):10d} "
        f"{int(r['segments']):5d} {int(r['segments_deleted']):6d} {r['store_bytes'] / 1e6:8.1f} "
        f"{int(r['blocks']):6d} {int(r['blocks_deleted']):5d} {r['db_bytes'] / 1e6:6.1f} "
        f"{r['load1']:5.2f}"
    )
print(
    "(anon: RSS less file and shared-memory pages (the heap, the flow table), the rings being "
    "shared memory; seen: trawl's last status line, up to 10 s old; gap = veth rx - seen: in flight plus "
    "drops so far; missed: the lossy listener's ring misses; waits: the producer held back "
    "by the store's lossless listener)"
)
print()
print(
    f"totals: {read_} packets read, {kdrops} kernel drops, {records} records, "
    f"{dump.get('bytes_written')} bytes dumped, listener read {listen.get('records_read')} "
    f"missed {listen.get('records_missed')}, capture end rx_dropped "
    f"{counters.get('cap_rx_dropped')} (frames of no protocol the namespace handles, after "
    f"the packet sockets had them), collector RSS "
    f"{rows[0]['collect_rss_kib'] / 1024:.1f} -> {rows[-1]['collect_rss_kib'] / 1024:.1f} MiB"
)
print()
w = max(len(c[0]) for c in checks)
for name, ok, detail in checks:
    print(f"{'PASS' if ok else 'FAIL'}  {name:<{w}}  {detail}")
failed = [c for c in checks if not c[1]]
print()
print(f"soak: {'FAILED: ' + str(len(failed)) + ' check(s)' if failed else 'all checks passed'}")
sys.exit(1 if failed else 0)
