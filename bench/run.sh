#!/usr/bin/env bash
# trawl's flow-meter benchmark: trawl against YAF, softflowd, nfpcapd (nfdump), argus and pmacctd
# on the same traces, single run each, page cache warm. See bench/README.md.
#
#   bench/run.sh [--quick] [--peers-only] [--no-install] [--tools LIST] [--traces LIST]
#                [--features LIST]
#
# Results: a table on stdout, bench/work/raw.csv, bench/work/env.txt, logs in bench/work/out/.
set -euo pipefail
export LC_ALL=C

usage() {
    cat <<'EOF'
usage: bench/run.sh [--quick] [--peers-only] [--no-install] [--tools LIST] [--traces LIST]
                    [--features LIST]

  --quick        small traces (about 1 M packets each) for a smoke run
  --peers-only   do not build or run trawl (measure the read limit and the peers only)
  --no-install   never call apt-get; fail if a peer is missing
  --tools LIST   comma-separated subset of: read,trawl,yaf,softflowd,nfpcapd,argus,pmacctd
  --traces LIST  comma-separated subset of: a,b,c (realistic, worst case, scale; default a,b)
  --features LIST  also run trawl at these feature levels (minimal,standard: rows
                 trawl-json-LEVEL and trawl-ipfix-LEVEL; the plain rows are the default, full)

Environment:
  CARGO_TARGET_DIR         cargo target dir (default: <repo>/target)
  TRAWL_BENCH_SEED         seed capture for trace (a) (default: the project corpus copy, or
                           bench/work/seed.pcap)
  NDPI_DIR                 an nDPI checkout: rebuild the seed from its test captures
                           with mergecap if no seed file is found
  TRAWL_BENCH_PEER_LIMIT   seconds a peer may run on a full trace before it is re-run on a
                           cut trace (default 300)
  TRAWL_PEERS              directory holding yaf-2.16.4.tar.gz, YAF's source release (default:
                           ../shared/peers beside the repository); built once into bench/work/yaf
EOF
}

ARGS_GIVEN="$*"
QUICK=0
PEERS_ONLY=0
INSTALL=1
TOOLS=read,trawl,yaf,softflowd,nfpcapd,argus,pmacctd
TRACES=a,b
FEATURES=
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --peers-only) PEERS_ONLY=1 ;;
        --no-install) INSTALL=0 ;;
        --tools) TOOLS=${2:?--tools needs a list}; shift ;;
        --traces) TRACES=${2:?--traces needs a list}; shift ;;
        --features) FEATURES=${2:?--features needs a list}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

die() { echo "run.sh: error: $*" >&2; exit 1; }
note() { echo "== $*" >&2; }
has_tool() { [[ ",$TOOLS," == *",$1,"* ]]; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
WORK=$BENCH/work
OUT=$WORK/out
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
PEER_LIMIT=${TRAWL_BENCH_PEER_LIMIT:-300}
COLLECTOR_PORT=29995
SEED_SHA256=5702cc9526aab96708920a38ef1e5788777c43704e3126a7d2f05a0abd096db1
mkdir -p "$WORK" "$OUT"

# Traces: name, tracegen arguments, sha256 of the output from the reference run (a mismatch
# means a different seed or generator; the run goes on with a warning).
declare -A TRACE_ARGS TRACE_SHA PRECUT TRAWL_ARGS SOFTFLOWD_FLOWS YAF_INPUT
# Peers that need more than PEER_LIMIT on a full trace on the reference machine (2 vCPUs) are
# measured on its first quarter right away, rather than after a wasted timeout.
PRECUT[b,argus]=5000000
PRECUT[b,pmacctd]=5000000
PRECUT[c,argus]=5000000
PRECUT[c,pmacctd]=5000000
# Trace (c) holds 10 M flows at once: every tool gets a table that big (trawl's default is
# 4 Mi flows, softflowd's as run here 4 M; more would be evicted under pressure).
TRAWL_ARGS[c]="--capacity 12000000"
SOFTFLOWD_FLOWS[c]=12000000
if [ "$QUICK" = 1 ]; then
    SUFFIX=-quick
    TRACE_ARGS[a]="realistic --target-bytes 350000000"
    TRACE_ARGS[b]="worstcase --packets 1000000 --flows 60000"
    TRACE_SHA[a]=98e5af2caee0683e997628b6d75d5746661360800f89641c4614acd49add18f9
    TRACE_SHA[b]=58466e27d6631f68ddffd39080184d9f86ff0927f3d622b464b1d2c0d2001373
    TRACE_ARGS[c]="worstcase --packets 2000000 --flows 1000000"
    TRACE_SHA[c]=225486ee0d9abf80c0f8ad46eeb16a42555124d043d427d451d3e09ce936fb1d
else
    SUFFIX=
    TRACE_ARGS[a]="realistic --target-bytes 2200000000"
    TRACE_ARGS[b]="worstcase --packets 20000000 --flows 1200000"
    TRACE_SHA[a]=43a731976f7b4618c09d28ab97e1314901aa32e0adacf4da7b6eca594c953d0c
    TRACE_SHA[b]=a31276e3d45079929fa1249e789b4a949929062454a3714b253ec05dd6fd1413
    TRACE_ARGS[c]="worstcase --packets 20000000 --flows 10000000"
    TRACE_SHA[c]=8a3a92338ccab2d135927d77cdf793d6d633c56aba647fe9e964b967ad8f7ceb
fi

# ---------------------------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------------------------
need_cmds=(dd sha256sum awk /usr/bin/time timeout)
need_pkgs=(time)
has_tool softflowd && need_cmds+=(softflowd nfcapd nfdump) && need_pkgs+=(softflowd nfdump)
has_tool nfpcapd && need_cmds+=(nfpcapd nfdump) && need_pkgs+=(nfdump)
has_tool argus && need_cmds+=(argus racount) && need_pkgs+=(argus-server argus-client)
has_tool pmacctd && need_cmds+=(pmacctd) && need_pkgs+=(pmacct)
# YAF is built from its source release (Debian does not package it): these build it.
has_tool yaf && ! [ -x "$WORK/yaf/bin/yaf" ] &&
    need_cmds+=(autoreconf libtoolize pkg-config xsltproc make gcc) &&
    need_pkgs+=(libfixbuf-dev libglib2.0-dev libpcap-dev libpcre3-dev pkg-config xsltproc autoconf automake libtool make gcc)

missing=()
for c in "${need_cmds[@]}"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$INSTALL" = 1 ] || die "missing commands: ${missing[*]} (install: apt-get install ${need_pkgs[*]})"
    command -v apt-get >/dev/null || die "missing commands: ${missing[*]} and no apt-get to install them"
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    note "installing ${need_pkgs[*]} (missing: ${missing[*]})"
    $SUDO apt-get update -qq
    # Debian's postinst scripts would start the collectors as services; policy-rc.d (where the
    # system has one) stops that, and we never talk to a service anyway.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    for c in "${need_cmds[@]}"; do
        command -v "$c" >/dev/null 2>&1 || die "$c still missing after apt-get install"
    done
fi

# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------
YAF=$WORK/yaf/bin/yaf
YAF_VERSION=2.16.4
# build_yaf: YAF from its source release into bench/work/yaf (once; about a minute on 2 cores),
# with the features its release build has (application labels, plugins) though the runs use
# neither, so its flow table and record path are the ones users run.
build_yaf() {
    [ -x "$YAF" ] && return 0
    local tarball=${TRAWL_PEERS:-$ROOT/../shared/peers}/yaf-$YAF_VERSION.tar.gz src
    [ -f "$tarball" ] || die "YAF's source $tarball is missing: set TRAWL_PEERS to a directory holding yaf-$YAF_VERSION.tar.gz (https://tools.netsa.cert.org/yaf/), or leave yaf out of --tools"
    note "building YAF $YAF_VERSION from $tarball into $WORK/yaf"
    src=$(mktemp -d)
    tar -xzf "$tarball" -C "$src"
    (
        cd "$src/yaf-$YAF_VERSION"
        autoreconf -fi >"$WORK/yaf-build.log" 2>&1
        ./configure --prefix="$WORK/yaf" --enable-applabel --enable-plugins >>"$WORK/yaf-build.log" 2>&1
        make -j"$(nproc)" >>"$WORK/yaf-build.log" 2>&1
        make install >>"$WORK/yaf-build.log" 2>&1
    ) || { rm -rf "$src"; die "YAF failed to build (see $WORK/yaf-build.log)"; }
    rm -rf "$src"
    [ -x "$YAF" ] || die "YAF built but $YAF is missing (see $WORK/yaf-build.log)"
}
has_tool yaf && build_yaf
# YAF's libraries (libyaf, and libfixbuf where it is not the system's) live in its prefix.
YAF_ENV=("LD_LIBRARY_PATH=$WORK/yaf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
yaf_run() { env "${YAF_ENV[@]}" "$@"; }
note "building (release, target dir $TARGET_DIR)"
TRACEGEN=$TARGET_DIR/release/tracegen
TRAWL=$TARGET_DIR/release/trawl
(cd "$ROOT" && cargo build --release -q -p trawl-tracegen) || die "tracegen failed to build"
if has_tool trawl && [ "$PEERS_ONLY" = 0 ]; then
    (cd "$ROOT" && cargo build --release -q -p trawl-cli) ||
        die "trawl-cli failed to build; fix it, or run with --peers-only to measure the peers alone"
    [ -x "$TRAWL" ] || die "$TRAWL not found after building trawl-cli"
    "$TRAWL" flows --help >/dev/null 2>&1 ||
        die "$TRAWL has no working 'flows' command (run '$TRAWL flows --help')"
else
    TOOLS=${TOOLS//trawl/}
fi

# ---------------------------------------------------------------------------------------------
# Seed and traces
# ---------------------------------------------------------------------------------------------
# shellcheck source=bench/lib.sh
. "$BENCH/lib.sh"

# stat_of FILE KEY: the value of KEY=... in a name=value file.
stat_of() { sed -n "s/^$2=//p" "$1" | head -1; }

# ensure_trace NAME: generates bench/work/NAME.pcap unless an identical one is there; prints path.
ensure_trace() {
    local name=$1 path=$WORK/$1$SUFFIX.pcap args=${TRACE_ARGS[$1]} gen_args want
    gen_args=($args)
    if [ "$name" = a ]; then
        local seed
        seed=$(find_seed)
        [ -n "$seed" ] || die "no seed capture for trace (a): set TRAWL_BENCH_SEED=FILE, or NDPI_DIR=an nDPI checkout (see bench/README.md)"
        local seed_sha
        seed_sha=$(sha256sum "$seed" | cut -d' ' -f1)
        [ "$seed_sha" = "$SEED_SHA256" ] ||
            note "WARNING: seed $seed has sha256 $seed_sha, not the reference $SEED_SHA256: results are not comparable with bench/RESULTS.md"
        gen_args+=(--seed-pcap "$seed")
        want="generated_with=$args seed_sha256=$seed_sha"
    else
        want="generated_with=$args"
    fi
    if [ -f "$path" ] && [ -f "$path.stats" ] && grep -qxF "$want" "$path.stats" &&
        [ "$(stat -c %s "$path")" = "$(stat_of "$path.stats" file_bytes)" ]; then
        note "reusing $path"
    else
        note "generating $path: tracegen ${gen_args[*]}"
        rm -f "$path" "$path.stats"
        "$TRACEGEN" "${gen_args[@]}" -o "$path" >"$path.stats.tmp" || die "tracegen failed"
        echo "$want" >>"$path.stats.tmp"
        mv "$path.stats.tmp" "$path.stats"
    fi
    # Checksum on every run: it also pulls the whole trace into the page cache.
    local sha
    sha=$(sha256sum "$path" | cut -d' ' -f1)
    if [ "$sha" != "${TRACE_SHA[$name]}" ]; then
        note "WARNING: $path sha256 $sha differs from the reference ${TRACE_SHA[$name]}"
    fi
    echo "$path"
}

# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------
RAW=$WORK/raw.csv
echo "trace,tool,packets_in,packets_counted,wall_s,user_s,sys_s,cpu_s,max_rss_kib,pps_cpu,cpu_ratio_vs_trawl,flows_reported,note" >"$RAW"

# timed DIR LIMIT CMD...: runs CMD under /usr/bin/time (and timeout LIMIT) with output in
# DIR/log; sets WALL USER SYS RSS and STATUS.
timed() {
    local dir=$1 limit=$2
    shift 2
    set +e
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" timeout "$limit" "$@" >"$dir/log" 2>&1
    STATUS=$?
    set -e
    read -r WALL USER SYS RSS < <(tail -1 "$dir/time")
    if ! [[ "$RSS" =~ ^[0-9]+$ ]]; then
        WALL=0 USER=0 SYS=0 RSS=0
    fi
}

# Result of the last tool run, checked and recorded by record().
COUNTED= FLOWS= NOTE=

record() { # record TRACE TOOL PACKETS_IN
    local trace=$1 tool=$2 packets=$3 cpu pps
    cpu=$(awk -v u="$USER" -v s="$SYS" 'BEGIN { printf "%.2f", u + s }')
    pps=$(awk -v p="$packets" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", p / c; else print "" }')
    echo "$trace,$tool,$packets,$COUNTED,$WALL,$USER,$SYS,$cpu,$RSS,$pps,,$FLOWS,${NOTE//,/;}" >>"$RAW"
}

fail_check() { # the peer did not do what we measure: say so loudly, keep the row
    NOTE="CHECK FAILED: $*${NOTE:+; $NOTE}"
    note "$NOTE"
    CHECK_FAILURES=$((CHECK_FAILURES + 1))
}
CHECK_FAILURES=0

start_collector() { # a NetFlow collector for softflowd's export, so its datagrams land somewhere
    mkdir -p "$1"
    nfcapd -w "$1" -p "$COLLECTOR_PORT" -b 127.0.0.1 -B 33554432 -t 3600 >"$1.log" 2>&1 &
    COLLECTOR_PID=$!
    sleep 1
    kill -0 "$COLLECTOR_PID" 2>/dev/null || die "nfcapd collector did not start (port $COLLECTOR_PORT busy?): $(cat "$1.log")"
}

stop_collector() {
    kill "$COLLECTOR_PID" 2>/dev/null || true
    wait "$COLLECTOR_PID" 2>/dev/null || true
}

# run_tool TRACE_NAME TRACE_PATH TOOL [FORMAT]: one measured run plus its sanity check.
run_tool() {
    local tname=$1 trace=$2 tool=$3 packets ip_packets limit dir input
    packets=$(stat_of "$trace.stats" packets)
    ip_packets=$(stat_of "$trace.stats" ip_packets)
    input=$trace
    limit=$([ "$QUICK" = 1 ] && echo 600 || echo "$PEER_LIMIT")
    [[ $tool == trawl* || $tool == read* ]] && limit=1800
    dir=$OUT/$tname/$tool
    NOTE= FLOWS= COUNTED=
    local attempt cut_note=
    if [ "$QUICK" = 0 ] && [ -n "${PRECUT[$tname,$tool]:-}" ]; then
        packets=${PRECUT[$tname,$tool]}
        input=$(cut_trace "$trace" "$packets")
        ip_packets=
        cut_note="measured on the first $packets packets (the whole trace takes it > ${PEER_LIMIT}s)"
    fi
    for attempt in 1 2; do
        rm -rf "$dir"
        mkdir -p "$dir"
        note "$tname: $tool on $(basename "$input")"
        case $tool in
            read-dd) timed "$dir" "$limit" dd if="$input" of=/dev/null bs=4M ;;
            read-cat) timed "$dir" "$limit" sh -c 'cat "$1" >/dev/null' sh "$input" ;;
            trawl-csv* | trawl-json*)
                local fmt=${tool#trawl-}
                timed "$dir" "$limit" "$TRAWL" flows -r "$input" --format "${fmt%%-*}" \
                    -o /dev/null --summary json --progress never ${TRAWL_ARGS[$tname]:-} \
                    $(features_flag "$tool") ;;
            trawl-ipfix*)
                # The work YAF does: flow records into an IPFIX file, nothing on stdout.
                timed "$dir" "$limit" "$TRAWL" flows -r "$input" --export "ipfix:$dir/out.ipfix" \
                    --summary json --progress never ${TRAWL_ARGS[$tname]:-} \
                    $(features_flag "$tool") ;;
            yaf)
                # Timeouts as trawl's defaults (idle 30 s, active 30 min); biflows into an IPFIX
                # file. (YAF's flow table has no size limit by default.)
                timed "$dir" "$limit" env "${YAF_ENV[@]}" "$YAF" --in "$input" --out "$dir/out.yaf" \
                    --idle-timeout 30 --active-timeout 1800 ;;
            softflowd)
                # -m: track up to 4 M flows (default 8192 would force-expire all the time);
                # -v 9: NetFlow v9, which carries IPv6. Never -c (control socket): it conflicts
                # with -r. In -r mode softflowd does not fork and prints statistics at the end.
                start_collector "$dir/collector"
                timed "$dir" "$limit" softflowd -r "$input" -n "127.0.0.1:$COLLECTOR_PORT" -v 9 \
                    -m "${SOFTFLOWD_FLOWS[$tname]:-4000000}"
                stop_collector ;;
            nfpcapd)
                # -e active,inactive timeouts as trawl's defaults (30 min, 30 s).
                mkdir -p "$dir/flows"
                timed "$dir" "$limit" nfpcapd -r "$input" -w "$dir/flows" -e 1800,30 ;;
            argus)
                # -X: ignore /etc/argus.conf (its 5 s status interval would split flows);
                # -S 60: one status record per flow per minute, longer than the traces.
                timed "$dir" "$limit" argus -X -S 60 -r "$input" -w "$dir/out.argus" ;;
            pmacctd)
                pmacct_config "$input" "$dir" "$trace" >"$dir/pmacctd.conf"
                timed "$dir" "$limit" pmacctd -f "$dir/pmacctd.conf" ;;
            *) die "unknown tool $tool" ;;
        esac
        if [ "$STATUS" = 124 ] && [ "$attempt" = 1 ]; then
            # Too slow for the budget: measure it on the first quarter of the trace instead.
            packets=$((packets / 4))
            input=$(cut_trace "$trace" "$packets")
            ip_packets=
            cut_note="trace cut to first $packets packets (full trace > ${limit}s)"
            note "$tool exceeded ${limit}s: re-running on the first $packets packets"
            continue
        fi
        break
    done
    NOTE=$cut_note
    [ "$tool" = yaf ] && YAF_INPUT[$tname]=$input
    check_tool "$tool" "$dir" "$input" "$packets" "$ip_packets"
    record "$tname" "$tool" "$packets"
}

features_flag() { # features_flag TOOL: --features LEVEL for trawl-FORMAT-LEVEL, else nothing
    local rest=${1#trawl-}
    [[ $rest == *-* ]] && echo "--features ${rest#*-}"
    return 0
}

cut_trace() { # cut_trace TRACE N: path of TRACE's first N packets (made once)
    local cut=$WORK/$(basename "$1" .pcap)-first$2.pcap
    [ -f "$cut" ] || "$TRACEGEN" head --packets "$2" --input "$1" -o "$cut" >/dev/null ||
        die "tracegen head failed on $1"
    echo "$cut"
}

# pmacct_config INPUT DIR TRACE: print plugin, 5-tuple, cache sized to the flows. The core hands
# packets to the plugin through a pipe; its default shared-memory ring silently drops data when
# the plugin falls behind (14-55 % lost on the full traces, even with a 1 GiB ring), so we use
# the ZeroMQ pipe, which blocks the core instead: lossless, at the cost of wall time.
pmacct_config() {
    local uniflows buckets
    uniflows=$(stat_of "$3.stats" uniflows)
    # print_cache_entries is a prime number of hash buckets, about 10 entries deep each.
    buckets=$(awk -v n="$uniflows" 'function prime(x, d) { for (d = 2; d * d <= x; d++) if (x % d == 0) return 0; return 1 }
        BEGIN { b = int(n / 8) + 1; if (b < 16411) b = 16411; while (!prime(b)) b++; print b }')
    cat <<EOF
daemonize: false
pcap_savefile: $1
aggregate[bench]: src_host, dst_host, src_port, dst_port, proto
plugins: print[bench]
print_output[bench]: csv
print_output_file[bench]: $2/flows.csv
print_refresh_time[bench]: 3600
print_cache_entries[bench]: $buckets
plugin_pipe_zmq: true
EOF
}

# check_tool TOOL DIR INPUT PACKETS IP_PACKETS: sets COUNTED (packets the tool says it saw) and
# FLOWS (records it produced), and flags a run that did not process the trace.
check_tool() {
    local tool=$1 dir=$2 input=$3 packets=$4 ip_packets=$5 size
    if [ "$STATUS" != 0 ]; then
        fail_check "$tool exited with status $STATUS (see $dir/log)"
        return
    fi
    size=$(stat -c %s "$input")
    case $tool in
        read-dd)
            local copied
            copied=$(sed -n 's/^\([0-9]*\) bytes.*copied.*/\1/p' "$dir/log")
            [ "$copied" = "$size" ] || fail_check "dd copied ${copied:-?} of $size bytes"
            COUNTED=$packets ;;
        read-cat) COUNTED=$packets ;;
        yaf)
            # yafscii --tabular: one biflow a line; fields 18 and 20 are the packets of each
            # direction. Counted packets are those in records (YAF keeps no frame counter).
            read -r FLOWS COUNTED < <(yaf_run "$WORK/yaf/bin/yafscii" --in "$dir/out.yaf" --out - --tabular 2>/dev/null |
                awk -F'|' '{ n++; p += $18 + $20 } END { print n + 0, p + 0 }')
            [ "${FLOWS:-0}" -gt 0 ] || fail_check "yaf wrote no flow records"
            [ -n "$ip_packets" ] && [ "${COUNTED:-0}" -lt $((ip_packets * 9 / 10)) ] &&
                fail_check "yaf records hold $COUNTED packets of $ip_packets IP packets"
            ;;
        trawl-*)
            local json
            json=$(grep '^{' "$dir/log" | tail -1)
            COUNTED=$(sed -n 's/.*"packets":\([0-9]*\).*/\1/p' <<<"$json")
            FLOWS=$(sed -n 's/.*"records":\([0-9]*\).*/\1/p' <<<"$json")
            PEAK_FLOWS=$(sed -n 's/.*"peak_flows":\([0-9]*\).*/\1/p' <<<"$json")
            [ "$COUNTED" = "$packets" ] || fail_check "trawl counted ${COUNTED:-?} of $packets packets"
            [ "${FLOWS:-0}" -gt 0 ] || fail_check "trawl wrote no flow records" ;;
        softflowd)
            COUNTED=$(sed -n 's/^Packets processed: \([0-9]*\).*/\1/p' "$dir/log")
            FLOWS=$(sed -n 's/^Flows exported: \([0-9]*\).*/\1/p' "$dir/log")
            local records received
            records=$(sed -n 's/^Flows exported: .*(\([0-9]*\) records).*/\1/p' "$dir/log")
            received=$(nfdump -R "$dir/collector" -I 2>/dev/null | sed -n 's/^Flows: //p')
            NOTE="${NOTE:+$NOTE; }$records NetFlow v9 records exported; collector received ${received:-0}"
            [ "${COUNTED:-0}" -gt 0 ] && [ "${FLOWS:-0}" -gt 0 ] ||
                fail_check "softflowd processed ${COUNTED:-?} packets, exported ${FLOWS:-?} flows"
            [ -n "$ip_packets" ] && [ "${COUNTED:-0}" -lt $((ip_packets * 9 / 10)) ] &&
                fail_check "softflowd processed $COUNTED packets of $ip_packets IP packets"
            ;;
        nfpcapd)
            COUNTED=$(sed -n 's/^Total: Processed: \([0-9]*\).*/\1/p' "$dir/log")
            FLOWS=$(nfdump -R "$dir/flows" -I 2>/dev/null | sed -n 's/^Flows: //p')
            [ "$COUNTED" = "$packets" ] || fail_check "nfpcapd processed ${COUNTED:-?} of $packets packets"
            [ "${FLOWS:-0}" -gt 0 ] || fail_check "nfpcapd wrote no flows to $dir/flows" ;;
        argus)
            # racount's "sum" row: records, total packets, ... (management records excluded).
            read -r FLOWS COUNTED < <(racount -r "$dir/out.argus" - not man 2>/dev/null |
                awk '$1 == "sum" { print $2, $3 }')
            [ "${FLOWS:-0}" -gt 0 ] || fail_check "argus wrote no flow records"
            [ -n "$ip_packets" ] && [ "${COUNTED:-0}" -lt $((ip_packets * 9 / 10)) ] &&
                fail_check "argus records hold $COUNTED packets of $ip_packets IP packets"
            ;;
        pmacctd)
            if [ -s "$dir/flows.csv" ]; then
                read -r FLOWS COUNTED < <(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "PACKETS") c = i; next }
                    { n++; p += $c } END { print n + 0, p + 0 }' "$dir/flows.csv")
            fi
            [ "${FLOWS:-0}" -gt 0 ] || fail_check "pmacctd wrote no $dir/flows.csv"
            [ -n "$ip_packets" ] && [ "${COUNTED:-0}" -lt $((ip_packets * 9 / 10)) ] &&
                fail_check "pmacctd rows hold $COUNTED packets of $ip_packets IP packets"
            ;;
    esac
    return 0
}

# ipfix_counts TRACE_NAME: flows and packets in the records of trawl's IPFIX file and YAF's,
# each read back from the file (trawl's by `trawl collect`, YAF's by yafscii), for the
# equal-work comparison: a line for the summary, and a failed check when the packets differ.
# Flows may differ by design (trawl lingers 2 s after FIN/RST and ends a record on a new SYN;
# YAF ends a flow at FIN/RST and splits it at its own 64-bit counters), so they are printed.
IPFIX_LINES=()
ipfix_counts() {
    local tname=$1 tdir=$OUT/$1/trawl-ipfix ydir=$OUT/$1/yaf tflows tpackets yflows ypackets
    [ -f "$tdir/out.ipfix" ] && [ -f "$ydir/out.yaf" ] || return 0
    local yinput=${YAF_INPUT[$tname]:-} cut=
    if [ -n "$yinput" ] && [ "$(basename "$yinput")" != "$tname.pcap" ]; then
        # YAF was measured on a cut of the trace: trawl's IPFIX file of the same cut (not
        # timed) is what its records must equal.
        tdir=$OUT/$tname/trawl-ipfix-cut
        rm -rf "$tdir" && mkdir -p "$tdir"
        "$TRAWL" flows -r "$yinput" --export "ipfix:$tdir/out.ipfix" --summary none \
            --progress never ${TRAWL_ARGS[$tname]:-} >/dev/null
        cut=" (both on YAF's cut $(basename "$yinput"))"
    fi
    read -r tflows tpackets < <("$TRAWL" collect -r "$tdir/out.ipfix" --format csv -o - \
        --summary none 2>/dev/null | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "fwd_packets") a = i; if ($i == "rev_packets") b = i }; next }
        { n++; p += $a + $b } END { print n + 0, p + 0 }')
    read -r yflows ypackets < <(yaf_run "$WORK/yaf/bin/yafscii" --in "$ydir/out.yaf" --out - --tabular 2>/dev/null |
        awk -F'|' '{ n++; p += $18 + $20 } END { print n + 0, p + 0 }')
    IPFIX_LINES+=("trace $tname, IPFIX files read back$cut: trawl $tflows flows holding $tpackets packets; YAF $yflows flows holding $ypackets packets")
    if [ "$tpackets" != "$ypackets" ]; then
        CHECK_FAILURES=$((CHECK_FAILURES + 1))
        IPFIX_LINES+=("  CHECK FAILED: trace $tname: the IPFIX files hold different packet counts (trawl $tpackets, YAF $ypackets)")
    fi
}

# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: bench/run.sh $ARGS_GIVEN"
    echo "git: $(cd "$ROOT" && git log -1 --format='%h %s' 2>/dev/null || echo unknown)"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
    echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    has_tool trawl && echo "trawl: $("$TRAWL" --version 2>&1 | head -1)"
    has_tool yaf && echo "yaf: $(yaf_run "$YAF" --version 2>&1 | head -1)"
    has_tool softflowd && echo "softflowd: $(softflowd -h 2>&1 | sed -n 's/.*softflowd version \([^.]*\.[^.]*\.[0-9]*\).*/\1/p')"
    has_tool nfpcapd && echo "nfdump/nfpcapd: $(nfdump -V 2>&1 | head -1)"
    has_tool argus && echo "argus: $(argus -h 2>&1 | sed -n 's/^Argus Version //p')"
    has_tool pmacctd && echo "pmacctd: $(pmacctd -V 2>&1 | head -1)"
    echo "rustc: $(rustc --version 2>/dev/null)"
} >"$WORK/env.txt"

# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------
MEMORY_LINES=()
run_list=()
has_tool read && run_list+=(read-dd read-cat)
has_tool trawl && run_list+=(trawl-csv trawl-json trawl-ipfix)
for level in ${FEATURES//,/ }; do
    case $level in minimal | standard | full) ;; *) die "unknown feature level $level" ;; esac
    has_tool trawl && run_list+=("trawl-json-$level" "trawl-ipfix-$level")
done
for t in yaf softflowd nfpcapd argus pmacctd; do
    has_tool "$t" && run_list+=("$t")
done

for tname in ${TRACES//,/ }; do
    [ -n "${TRACE_ARGS[$tname]:-}" ] || die "unknown trace $tname (a, b or c)"
    trace=$(ensure_trace "$tname")
    note "trace $tname: $(stat_of "$trace.stats" packets) packets, $(stat_of "$trace.stats" file_bytes) bytes, $(stat_of "$trace.stats" biflows) flows"
    cat "$trace" >/dev/null
    for tool in "${run_list[@]}"; do
        run_tool "$tname" "$trace" "$tool"
    done
    has_tool trawl && has_tool yaf && ipfix_counts "$tname"
    if has_tool trawl; then
        # Baseline memory: trawl on the first 1000 packets; the rest of its RSS is the flows.
        base=$WORK/$tname$SUFFIX-first1000.pcap
        [ -f "$base" ] || "$TRACEGEN" head --packets 1000 --input "$trace" -o "$base" >/dev/null
        mkdir -p "$OUT/$tname/trawl-baseline"
        timed "$OUT/$tname/trawl-baseline" 60 "$TRAWL" flows -r "$base" --format csv -o /dev/null \
            --summary json --progress never ${TRAWL_ARGS[$tname]:-}
        peak=$(grep '^{' "$OUT/$tname/trawl-csv/log" | tail -1 | sed -n 's/.*"peak_flows":\([0-9]*\).*/\1/p')
        rss=$(awk -F, -v t="$tname" '$1 == t && $2 == "trawl-csv" { print $9 }' "$RAW")
        MEMORY_LINES+=("$(awk -v t="$tname" -v r="$rss" -v b="$RSS" -v p="${peak:-0}" 'BEGIN {
            printf "trace %s: trawl max RSS %.0f MiB, baseline (1000 packets) %.0f MiB, peak %d concurrent flows", t, r / 1024, b / 1024, p
            if (p > 0) printf ": %.0f bytes per flow", (r - b) * 1024 / p }')")
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/env.txt"

# Ratios: each tool's CPU per input packet over trawl-csv's on the same trace.
awk -F, -v OFS=, 'NR == FNR { if (FNR > 1 && $2 == "trawl-csv" && $3 > 0) base[$1] = $8 / $3; next }
    FNR == 1 { print; next }
    { if (($1 in base) && $3 > 0 && base[$1] > 0) $11 = sprintf("%.2f", ($8 / $3) / base[$1]); print }' \
    "$RAW" "$RAW" >"$RAW.tmp" && mv "$RAW.tmp" "$RAW"

echo
cat "$WORK/env.txt"
echo
awk -F, 'NR == 1 { printf "%-6s %-10s %11s %8s %8s %9s %12s %9s %10s  %s\n", "trace", "tool", "packets", "wall s", "CPU s", "RSS MiB", "pkts/s CPU", "CPU/trawl", "flows", "note"; next }
    { printf "%-6s %-10s %11s %8s %8s %9.1f %12s %9s %10s  %s\n", $1, $2, $3, $5, $8, $9 / 1024, $10, $11, $12, $13 }' "$RAW"
for line in "${MEMORY_LINES[@]}" "${IPFIX_LINES[@]}"; do
    echo "$line"
done
echo "raw results: $RAW"
[ "$CHECK_FAILURES" = 0 ] || die "$CHECK_FAILURES sanity check(s) failed: see the notes above"
