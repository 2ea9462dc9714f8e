#!/usr/bin/env bash
# Issue 23's application-layer benchmark: trawl with every analyser on (`trawl logs`: DNS, TLS
# with QUIC and certificates, HTTP; and `trawl flows --analyze app`) against `ndpiReader -i FILE` and
# `tshark -T fields` with the same fields, and trawl with the analysers off (`trawl flows`),
# each run once on trace (a), CPU time (user + system) of each from /usr/bin/time, in one run.
#
#   bench/app.sh [--trace FILE] [--tshark-packets N] [--trawl BIN]
#
#   --trace FILE          the capture (default bench/work/a.pcap, made by
#                         `bench/run.sh --tools read --traces a`)
#   --tshark-packets N    tshark dissects the first N packets only (default 500000; 0: all):
#                         on the whole trace it needs tens of minutes and gigabytes of memory
#                         for its reassembly state. trawl is run on the same cut too, so the
#                         tshark ratio compares the same packets.
#   --trawl BIN           the trawl binary (default: cargo build --release -p trawl-cli)
#
# Results: a table on stdout, bench/work/app-raw.csv; outputs in bench/work/app-out/.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bench/work
OUT=$WORK/app-out
TRACE=$WORK/a.pcap
CUT_PACKETS=500000
TRAWL=
while [ $# -gt 0 ]; do
    case $1 in
        --trace) TRACE=${2:?}; shift ;;
        --tshark-packets) CUT_PACKETS=${2:?}; shift ;;
        --trawl) TRAWL=${2:?}; shift ;;
        -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "app.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "app.sh: error: $*" >&2; exit 1; }
note() { echo "== $*" >&2; }
mkdir -p "$OUT"

[ -f "$TRACE" ] || die "$TRACE is missing: bench/run.sh --tools read --traces a makes it"
missing=()
command -v ndpiReader >/dev/null || missing+=(libndpi-bin)
command -v tshark >/dev/null || missing+=(tshark)
command -v editcap >/dev/null || missing+=(wireshark-common)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
    note "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -z "$TRAWL" ]; then
    TRAWL=${CARGO_TARGET_DIR:-$ROOT/target}/release/trawl
    note "building trawl (release)"
    (cd "$ROOT" && cargo build --release -q -p trawl-cli) || die "trawl-cli failed to build"
fi
[ -x "$TRAWL" ] || die "$TRAWL is not executable"

packets_of() { capinfos -M -c "$1" 2>/dev/null | sed -n 's/^Number of packets: *//p' | tr -d ' '; }
FULL_PACKETS=$(sed -n 's/^packets=//p' "$TRACE.stats" 2>/dev/null || true)
[ -n "$FULL_PACKETS" ] || FULL_PACKETS=$(packets_of "$TRACE")
CUT=$TRACE
if [ "$CUT_PACKETS" != 0 ] && [ "$CUT_PACKETS" -lt "$FULL_PACKETS" ]; then
    CUT=$WORK/$(basename "$TRACE" .pcap)-first$CUT_PACKETS.pcap
    [ -f "$CUT" ] || editcap -r "$TRACE" "$CUT" "1-$CUT_PACKETS" || die "editcap failed"
else
    CUT_PACKETS=$FULL_PACKETS
fi

# The fields of trawl's logs (docs/specs/logs.md) as tshark names them. tshark 4.0 has no JA4.
FIELDS=(frame.time_epoch ip.src ip.dst ipv6.src ipv6.dst tcp.srcport tcp.dstport udp.srcport
    udp.dstport http.request.method http.host http.request.uri http.request.version
    http.response.code http.user_agent http.referer http.content_type http.content_length
    dns.id dns.qry.name dns.qry.type dns.qry.class dns.flags.rcode dns.a dns.aaaa dns.resp.ttl
    dns.flags.authoritative dns.flags.truncated dns.flags.recdesired dns.flags.recavail
    tls.handshake.extensions_server_name tls.handshake.extensions_alpn_str tls.handshake.version
    tls.handshake.ciphersuite)
TSHARK_ARGS=(-n -T fields)
for f in "${FIELDS[@]}"; do TSHARK_ARGS+=(-e "$f"); done

RAW=$WORK/app-raw.csv
echo "name,packets,wall_s,cpu_s,max_rss_kb" >"$RAW"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A CPU
# measure NAME PACKETS CMD...: one run, CPU and peak memory from /usr/bin/time.
measure() {
    local name=$1 packets=$2 t
    shift 2
    t=$(mktemp)
    note "$name: $*"
    /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" ||
        die "$name failed (see $OUT/$name.stderr)"
    read -r wall user sys rss <"$t"
    rm -f "$t"
    CPU[$name]=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')
    echo "$name,$packets,$wall,${CPU[$name]},$rss" >>"$RAW"
}

FLOWS=(flows --format csv -o /dev/null --summary none --progress never)
measure trawl_flows "$FULL_PACKETS" "$TRAWL" "${FLOWS[@]}" -r "$TRACE"
measure trawl_logs "$FULL_PACKETS" "$TRAWL" logs -r "$TRACE" -o "$OUT/logs"
# The application label is the flow meter's (`--analyze app`); the logs are `trawl logs`'s.
measure trawl_flows_app "$FULL_PACKETS" "$TRAWL" "${FLOWS[@]}" --analyze app -r "$TRACE"
measure ndpireader "$FULL_PACKETS" ndpiReader -i "$TRACE"
measure trawl_logs_cut "$CUT_PACKETS" "$TRAWL" logs -r "$CUT" -o "$OUT/logs-cut"
measure tshark_cut "$CUT_PACKETS" tshark -r "$CUT" "${TSHARK_ARGS[@]}"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

ratio() { awk -v a="${CPU[$1]}" -v b="${CPU[$2]}" 'BEGIN {printf "%.1f", a / b}'; }
echo "trace $TRACE: $FULL_PACKETS packets (tshark and trawl_logs_cut: the first $CUT_PACKETS)"
echo "load average before $LOAD_BEFORE, after $LOAD_AFTER; $(nproc) CPUs"
printf '%-22s %10s %9s %9s %12s %14s\n' run packets wall_s cpu_s max_rss_MB packets/cpu_s
tail -n +2 "$RAW" | while IFS=, read -r name packets wall cpu rss; do
    printf '%-22s %10s %9s %9s %12d %14.0f\n' "$name" "$packets" "$wall" "$cpu" $((rss / 1024)) \
        "$(awk -v p="$packets" -v c="$cpu" 'BEGIN {print (c > 0) ? p / c : 0}')"
done
echo "ndpiReader / trawl logs (CPU, same file): $(ratio ndpireader trawl_logs)x"
echo "tshark -T fields / trawl logs (CPU, same first $CUT_PACKETS packets): $(ratio tshark_cut trawl_logs_cut)x"
echo "trawl logs / trawl flows (CPU): $(ratio trawl_logs trawl_flows)x"
echo "trawl flows --analyze app / trawl flows (CPU): $(ratio trawl_flows_app trawl_flows)x"
# Every analyser on, as two passes over the file (the labels in the flow meter, the logs in
# `trawl logs`): their CPU summed is an upper bound of one pass doing both.
awk -v p="$FULL_PACKETS" -v a="${CPU[trawl_flows_app]}" -v b="${CPU[trawl_logs]}" -v n="${CPU[ndpireader]}" \
    'BEGIN {printf "all analysers (flows --analyze app + logs, CPU summed): %.0f packets/cpu_s; ndpiReader / that: %.1fx\n", p / (a + b), n / (a + b)}'
