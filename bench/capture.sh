#!/usr/bin/env bash
# trawl's live-capture benchmark: blast (bench/blast) sends a trace at increasing rates on a veth
# pair from inside a network namespace; tcpdump, dumpcap and trawl capture it in turn on the
# host end. For each rate and capturer: packets sent, received, kernel drops, CPU per packet.
# See bench/README.md.
#
#   bench/capture.sh [--quick] [--rates LIST] [--capturers LIST] [--profiles LIST] ...
#
# Results: a table on stdout, bench/work/capture.csv, bench/work/capture-env.txt, each run's logs
# in bench/work/capture-out/. Needs root (network namespaces, AF_PACKET).
set -euo pipefail
export LC_ALL=C

usage() {
    cat <<'EOF'
usage: bench/capture.sh [--quick] [--rates LIST] [--capturers LIST] [--profiles LIST]
                        [--packets N] [--batch N] [--no-build] [--contend]

  --quick           500 k packets per run instead of 5 M
  --rates LIST      target rates in packets/s, increasing, k/M suffixes allowed, `max` = as
                    fast as blast goes (default: 250k,500k,750k,1M,max)
  --capturers LIST  comma-separated subset of: none,tcpdump,tcpdump-B64M,dumpcap,dumpcap-B64M,
                    trawl,trawl-w2,trawl-run,trawl-run-L1,trawl-run-L2,trawl-db,trawl-db-api
                    (default: all but the last two; `none` runs at `max` only: the sender's
                    own limit with nobody listening; trawl-db: the monitor storing flows,
                    series and alarms; trawl-db-api: the same with the HTTP API on and a
                    client polling series every second and a top-10 query every 5 s)
  --profiles LIST   traffic profiles, subset of: b,a (b: 64-byte frames; a: realistic sizes)
  --packets N       packets per run (default 5000000, --quick 500000)
  --batch N         blast's packets per sendmmsg (default 256)
  --no-build        use the binaries already in the target dir
  --contend         run a busy loop (same priority) on the capture CPU during every run: the
                    capturer gets about half of its CPU, as on a busy machine

Environment:
  CARGO_TARGET_DIR         cargo target dir (default: <repo>/target)
  TRAWL_BIN                the trawl binary to measure (default: the one built in the target dir)
  TRAWL_CAPTURE_SENDER_CPU CPU of blast and so of the veth receive softirq (default 0)
  TRAWL_CAPTURE_CPU        CPU of the capturer (default 1)
EOF
}

ARGS_GIVEN="$*"
QUICK=0
BUILD=1
RATES=250k,500k,750k,1M,max
CAPTURERS=none,tcpdump,tcpdump-B64M,dumpcap,dumpcap-B64M,trawl,trawl-w2,trawl-run,trawl-run-L1,trawl-run-L2
PROFILES=b,a
PACKETS=
BATCH=256
CONTEND=0
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --rates) RATES=${2:?--rates needs a list}; shift ;;
        --capturers) CAPTURERS=${2:?--capturers needs a list}; shift ;;
        --profiles) PROFILES=${2:?--profiles needs a list}; shift ;;
        --packets) PACKETS=${2:?--packets needs a number}; shift ;;
        --batch) BATCH=${2:?--batch needs a number}; shift ;;
        --no-build) BUILD=0 ;;
        --contend) CONTEND=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "capture.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
[ -n "$PACKETS" ] || { [ "$QUICK" = 1 ] && PACKETS=500000 || PACKETS=5000000; }

die() { echo "capture.sh: error: $*" >&2; exit 1; }
note() { echo "== $*" >&2; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, AF_PACKET sockets)"
for c in ip taskset sysctl awk sed; do
    command -v "$c" >/dev/null || die "missing command: $c"
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
WORK=$BENCH/work
OUT=$WORK/capture-out
CSV=$WORK/capture.csv
ENV_TXT=$WORK/capture-env.txt
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SEND_CPU=${TRAWL_CAPTURE_SENDER_CPU:-0}
CAP_CPU=${TRAWL_CAPTURE_CPU:-1}
CLK_TCK=$(getconf CLK_TCK)
# Seconds a capturer must stay (almost) idle after the sender stops before it is stopped:
# longer than libpcap's 1 s TPACKET_V3 block timeout (tcpdump, dumpcap), so the last partly
# filled block reaches user space first.
DRAIN_QUIET_S=1.5
mkdir -p "$WORK"
rm -rf "$OUT"
mkdir -p "$OUT"

# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------
# TRAWL_BIN measures that trawl binary instead of the one built here (old against new: run
# the script once with each, alternately, and compare the trawl rows).
TRAWL=${TRAWL_BIN:-$TARGET_DIR/release/trawl}
BLAST=$TARGET_DIR/release/blast
TRACEGEN=$TARGET_DIR/release/tracegen
if [ "$BUILD" = 1 ]; then
    note "building (release, target dir $TARGET_DIR)"
    (cd "$ROOT" && cargo build --release -q -p trawl-blast -p trawl-tracegen) ||
        die "blast or tracegen failed to build"
    (cd "$ROOT" && cargo build --release -q -p trawl-cli) ||
        die "trawl-cli failed to build; fix it, or run with --capturers none,tcpdump,... (no trawl) --no-build"
fi
[ -x "$BLAST" ] || die "$BLAST not found (build with cargo build --release -p trawl-blast)"
# Freeze the binaries of this run: others may rebuild the target dir meanwhile.
mkdir -p "$OUT/bin"
cp "$BLAST" "$OUT/bin/blast" && BLAST=$OUT/bin/blast
if [ -x "$TRAWL" ]; then cp "$TRAWL" "$OUT/bin/trawl" && TRAWL=$OUT/bin/trawl; fi

# ---------------------------------------------------------------------------------------------
# Traffic profiles
# ---------------------------------------------------------------------------------------------
# b: 1000 frames of 64 bytes (the head of the worst-case trace, many flows); a: the first
# 100,000 frames of the realistic trace (mean frame about 300 bytes). Both are made by
# bench/run.sh's traces and `tracegen head`.
head_of() { # head_of TRACE N OUT: OUT = the first N packets of TRACE (made once)
    [ -f "$3" ] || "$TRACEGEN" head --packets "$2" --input "$1" -o "$3" >/dev/null ||
        die "tracegen head failed on $1"
}

profile_trace() { # profile_trace NAME: prints the pcap of profile NAME, or nothing
    case $1 in
        b)
            if [ -f "$WORK/b-first1000.pcap" ]; then
                echo "$WORK/b-first1000.pcap"
            elif [ -f "$WORK/b-quick-first1000.pcap" ]; then
                echo "$WORK/b-quick-first1000.pcap"
            else
                [ -x "$TRACEGEN" ] || die "no $WORK/b-first1000.pcap and no tracegen to make it"
                local src=$WORK/b-quick.pcap
                if [ ! -f "$src" ]; then
                    note "generating $src (bench/run.sh --quick's worst-case trace)"
                    "$TRACEGEN" worstcase --packets 1000000 --flows 60000 -o "$src" >"$src.stats.tmp" ||
                        die "tracegen worstcase failed"
                    echo "generated_with=worstcase --packets 1000000 --flows 60000" >>"$src.stats.tmp"
                    mv "$src.stats.tmp" "$src.stats"
                fi
                head_of "$src" 1000 "$WORK/b-quick-first1000.pcap"
                echo "$WORK/b-quick-first1000.pcap"
            fi ;;
        a)
            local src
            for src in a a-quick; do
                if [ -f "$WORK/$src-first100000.pcap" ]; then
                    echo "$WORK/$src-first100000.pcap"
                    return
                fi
                if [ -f "$WORK/$src.pcap" ] && [ -x "$TRACEGEN" ]; then
                    head_of "$WORK/$src.pcap" 100000 "$WORK/$src-first100000.pcap"
                    echo "$WORK/$src-first100000.pcap"
                    return
                fi
            done ;;
        *) die "unknown profile $1 (a or b)" ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# The veth pair: host end IF_H (capturers), namespace end IF_N (blast)
# ---------------------------------------------------------------------------------------------
NS=tcap$$
IF_H=tcap$$h
IF_N=tcap$$n
CAP_PID=
HOG_PID=

cleanup() {
    local pid
    for pid in $CAP_PID $HOG_PID $POLL_PID "${LISTENER_PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    ip link del "$IF_H" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_veth() {
    ip netns add "$NS"
    ip link add "$IF_H" type veth peer name "$IF_N"
    ip link set "$IF_N" netns "$NS"
    # No IPv6 (no router solicitations, MLD or DAD on the wire), no link-local address: the
    # capturers see blast's frames and nothing else.
    sysctl -qw "net.ipv6.conf.$IF_H.disable_ipv6=1"
    ip link set dev "$IF_H" addrgenmode none mtu 9000 up
    ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$IF_N.disable_ipv6=1"
    ip -n "$NS" link set dev "$IF_N" addrgenmode none mtu 9000 up
    IFINDEX_H=$(cat "/sys/class/net/$IF_H/ifindex")
}

# ---------------------------------------------------------------------------------------------
# Process accounting
# ---------------------------------------------------------------------------------------------
cpu_ns() { # cpu_ns PID: CPU time of all live threads of PID in ns (schedstat, ns precision)
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'
}

cpu_ticks() { # cpu_ticks PID: "utime stime" of PID (all threads, clock ticks)
    sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12, $13 }'
}

has_packet_socket() { # has_packet_socket PID IFINDEX: PID holds a packet socket bound to IFINDEX
    local inodes
    inodes=$(find "/proc/$1/fd" -maxdepth 1 -lname 'socket:*' -printf '%l\n' 2>/dev/null |
        sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
    [ -n "$inodes" ] || return 1
    awk -v ifx="$2" 'NR > 1 && $5 == ifx { print $9 }' /proc/net/packet | grep -qxF -f <(echo "$inodes")
}

# wait_quiet PID QUIET_S MAX_S: until PID has used under 1 % of a CPU for QUIET_S seconds in a
# row (it drained its ring and waits for packets), or MAX_S passed. Returns 1 on timeout.
wait_quiet() {
    local pid=$1 need max=$3 last now quiet=0 i=0
    need=$(awk -v q="$2" 'BEGIN { printf "%d", q / 0.1 + 0.5 }')
    last=$(cpu_ns "$pid")
    while [ "$quiet" -lt "$need" ]; do
        sleep 0.1
        i=$((i + 1))
        kill -0 "$pid" 2>/dev/null || return 1
        now=$(cpu_ns "$pid")
        if [ $((now - last)) -lt 1000000 ]; then quiet=$((quiet + 1)); else quiet=0; fi
        last=$now
        [ "$i" -lt $((max * 10)) ] || return 1
    done
}

# ---------------------------------------------------------------------------------------------
# Capturers: cap_check_NAME (prints why it cannot run, if so), cap_start_NAME LOG (starts it on
# the capture CPU in the background: sets CAP_PID), cap_parse_NAME LOG (sets RECEIVED: packets
# the capturer got in user space, KSEEN: packets the kernel offered it including drops, KDROPS:
# kernel drops as it reports them). Add a capturer by adding these three functions and its name
# to CAPTURERS.
# ---------------------------------------------------------------------------------------------
start_bg() { # start_bg LOG CMD...: CMD on the capture CPU, stdout to LOG.out, stderr to LOG
    local log=$1
    shift
    taskset -c "$CAP_CPU" "$@" >"$log.out" 2>"$log" &
    CAP_PID=$!
}

cap_check_tcpdump() { command -v tcpdump >/dev/null || echo "tcpdump not installed"; }
cap_start_tcpdump() { start_bg "$1" tcpdump -i "$IF_H" -w /dev/null; }
cap_parse_tcpdump() {
    RECEIVED=$(sed -n 's/^\([0-9]*\) packets\{0,1\} captured$/\1/p' "$1")
    KSEEN=$(sed -n 's/^\([0-9]*\) packets\{0,1\} received by filter$/\1/p' "$1")
    KDROPS=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped by kernel$/\1/p' "$1")
}

cap_check_tcpdump_B64M() { cap_check_tcpdump; }
cap_start_tcpdump_B64M() { start_bg "$1" tcpdump -i "$IF_H" -B 65536 -w /dev/null; }
cap_parse_tcpdump_B64M() { cap_parse_tcpdump "$1"; }

cap_check_dumpcap() { command -v dumpcap >/dev/null || echo "dumpcap not installed (wireshark-common)"; }
cap_start_dumpcap() { start_bg "$1" dumpcap -q -i "$IF_H" -w /dev/null; }
cap_parse_dumpcap() {
    # "Packets received/dropped on interface 'IF': R/D (pcap:D/dumpcap:0/flushed:0/ps_ifdrop:0)"
    # dumpcap starts the count line with a carriage return.
    RECEIVED=$(tr -d '\r' <"$1" | sed -n 's/^Packets captured: \([0-9]*\)$/\1/p')
    local rd
    rd=$(tr -d '\r' <"$1" | sed -n "s|^Packets received/dropped on interface '[^']*': \([0-9]*\)/\([0-9]*\).*|\1 \2|p")
    if [ -n "$rd" ]; then
        KDROPS=${rd#* }
        KSEEN=$((${rd% *} + KDROPS))
    fi
}

cap_check_dumpcap_B64M() { cap_check_dumpcap; }
cap_start_dumpcap_B64M() { start_bg "$1" dumpcap -q -i "$IF_H" -B 64 -w /dev/null; }
cap_parse_dumpcap_B64M() { cap_parse_dumpcap "$1"; }

cap_check_trawl() {
    if [ ! -x "$TRAWL" ]; then echo "no trawl binary ($TRAWL)"; return; fi
    "$TRAWL" flows --help >/dev/null 2>&1 || echo "'trawl flows --help' fails"
}
cap_start_trawl() { start_bg "$1" "$TRAWL" flows -i "$IF_H" --summary json --progress never -o /dev/null; }
cap_parse_trawl() { # the JSON summary, last line of stderr starting with '{'
    local json
    json=$(grep '^{' "$1" | tail -1)
    RECEIVED=$(sed -n 's/.*"packets_read":\([0-9]*\).*/\1/p' <<<"$json")
    [ -n "$RECEIVED" ] || RECEIVED=$(sed -n 's/.*"packets":\([0-9]*\).*/\1/p' <<<"$json")
    KSEEN=$(sed -n 's/.*"kernel_packets":\([0-9]*\).*/\1/p' <<<"$json")
    KDROPS=$(sed -n 's/.*"kernel_drops":\([0-9]*\).*/\1/p' <<<"$json")
}

# Two workers in a fanout group, both on the capture CPU (the other CPU is the sender's): what
# the fanout and a second flow table cost, not a scaling test.
cap_check_trawl_w2() { cap_check_trawl; }
cap_start_trawl_w2() { start_bg "$1" "$TRAWL" flows -i "$IF_H" --workers 2 --summary json --progress never -o /dev/null; }
cap_parse_trawl_w2() { cap_parse_trawl "$1"; }

# Pure capture into trawl's shared ring with no consumers (when the build has `trawl run`).
cap_check_trawl_run() {
    if [ ! -x "$TRAWL" ]; then echo "no trawl binary ($TRAWL)"; return; fi
    "$TRAWL" run --help >/dev/null 2>&1 || echo "this trawl has no 'run' command yet ('trawl run --help' fails)"
}
cap_start_trawl_run() { start_bg "$1" "$TRAWL" run -i "$IF_H" --summary json; }
cap_parse_trawl_run() { cap_parse_trawl "$1"; }

# trawl run with 1 or 2 lossy listeners (`trawl listen -w /dev/null`) reading its shared ring.
# The listeners run on the sender's CPU, so that the producer keeps its CPU and what they cost
# it is the shared-memory traffic, not CPU sharing.
cap_check_trawl_run_L1() { cap_check_trawl_run; }
cap_start_trawl_run_L1() { cap_start_trawl_run "$1"; }
cap_ready_trawl_run_L1() { start_listeners "$1" 1; }
cap_parse_trawl_run_L1() { cap_parse_trawl "$1"; }
cap_check_trawl_run_L2() { cap_check_trawl_run; }
cap_start_trawl_run_L2() { cap_start_trawl_run "$1"; }
cap_ready_trawl_run_L2() { start_listeners "$1" 2; }
cap_parse_trawl_run_L2() { cap_parse_trawl "$1"; }

# The monitor storing what it sees (`trawl run --db`, no ring), without and with the HTTP API
# and a client polling it as a console does (issue 20: serving must not cost capture). The
# database is made fresh for each run; the client runs on the sender's CPU, as the listeners
# do, so what the API costs the capturer is its own threads' CPU (counted: all threads).
API_PORT=$((20000 + $$ % 20000))
POLL_PID=
cap_check_trawl_db() { cap_check_trawl_run; }
cap_start_trawl_db() {
    rm -rf "$WORK/capture-db"
    start_bg "$1" "$TRAWL" run -i "$IF_H" --no-ring --db "$WORK/capture-db" --summary json
}
cap_parse_trawl_db() { cap_parse_trawl "$1"; }
cap_check_trawl_db_api() {
    cap_check_trawl_run
    command -v curl >/dev/null || echo "no curl (the polling client)"
}
cap_start_trawl_db_api() {
    rm -rf "$WORK/capture-db"
    start_bg "$1" "$TRAWL" run -i "$IF_H" --no-ring --db "$WORK/capture-db" --summary json \
        --api "127.0.0.1:$API_PORT"
}
cap_ready_trawl_db_api() { # the polling client, until the capturer is stopped
    local i=0 base="http://127.0.0.1:$API_PORT/api/v1"
    until curl -sf "http://127.0.0.1:$API_PORT/healthz" >/dev/null; do
        sleep 0.1
        i=$((i + 1))
        [ "$i" -lt 100 ] || { note "the API did not answer on port $API_PORT"; return 1; }
    done
    (
        n=0 ok=0 bad=0
        trap 'echo "polls ok=$ok failed=$bad" >"$1.poll"; exit 0' TERM
        while :; do
            if curl -sf -o /dev/null "$base/series?iface=$IF_H&from=-60s"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
            if [ $((n % 5)) = 0 ]; then
                if curl -sf -o /dev/null "$base/query?attrs=sip,dip&from=-5m&limit=10"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
            fi
            n=$((n + 1))
            sleep 1 &
            wait $!
        done
    ) &
    POLL_PID=$!
    taskset -pc "$SEND_CPU" "$POLL_PID" >/dev/null
}
cap_parse_trawl_db_api() { cap_parse_trawl "$1"; }

LISTENER_PIDS=()

start_listeners() { # start_listeners LOG N: N lossy listeners on the ring the producer printed
    local log=$1 n=$2 ring k pid i
    ring=$(sed -n "s/.*publishing packets on ring '\([^']*\)'.*/\1/p" "$log" | head -1)
    [ -n "$ring" ] || { note "no ring name in $log"; return 1; }
    for ((k = 1; k <= n; k++)); do
        taskset -c "$SEND_CPU" "$TRAWL" listen --ring "$ring" -w /dev/null --summary json \
            >"$log.listener$k.out" 2>"$log.listener$k" &
        LISTENER_PIDS+=($!)
    done
    for pid in "${LISTENER_PIDS[@]}"; do # attached once the ring is in its memory map
        i=0
        until grep -qF "$ring" "/proc/$pid/maps" 2>/dev/null; do
            sleep 0.1
            i=$((i + 1))
            kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ] || { note "listener $pid did not attach to $ring"; return 1; }
        done
    done
}

listeners_cpu_ns() { # CPU of all listeners, ns
    local pid s=0
    for pid in "${LISTENER_PIDS[@]}"; do
        s=$((s + $(cpu_ns "$pid")))
    done
    echo "$s"
}

# stop_listeners LOG CPU_NS: stops them and sets LISTENER_NOTE from their JSON summaries.
stop_listeners() {
    local log=$1 cpu=$2 pid k=0 read=0 missed=0 json r m
    for pid in "${LISTENER_PIDS[@]}"; do
        kill -INT "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for pid in "${LISTENER_PIDS[@]}"; do
        k=$((k + 1))
        json=$(grep '^{' "$log.listener$k" | tail -1)
        r=$(sed -n 's/.*"records_read":\([0-9]*\).*/\1/p' <<<"$json")
        m=$(sed -n 's/.*"records_missed":\([0-9]*\).*/\1/p' <<<"$json")
        read=$((read + ${r:-0}))
        missed=$((missed + ${m:-0}))
    done
    LISTENER_NOTE="$k lossy listener(s): read $read; missed $missed"
    [ "$read" -gt 0 ] && LISTENER_NOTE="$LISTENER_NOTE; $((cpu / read)) ns/pkt listener CPU"
    LISTENER_PIDS=()
}

# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------
echo "profile,target_pps,capturer,warmup,sent,sent_pps,sender_late,if_rx,stack_drops,kernel_seen,received,kernel_drops,lost,loss_pct,cpu_s,user_s,sys_s,cpu_ns_per_pkt,cpu_pct,cpu_vs_tcpdump,load1,note" >"$CSV"

rate_number() { # 250k -> 250000, 1.5M -> 1500000, max -> 0
    awk -v r="$1" 'BEGIN { m = 1; if (r == "max") { print 0; exit }
        if (r ~ /[kK]$/) { m = 1e3; sub(/[kK]$/, "", r) } else if (r ~ /M$/) { m = 1e6; sub(/M$/, "", r) }
        if (r !~ /^[0-9.]+$/) { print "bad"; exit } printf "%.0f", r * m }'
}

json_num() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2"; }

stack_drops() { # drops before any tap: the host end's rx_dropped plus the backlog drops
    local s _ dropped _rest
    s=$(cat "/sys/class/net/$IF_H/statistics/rx_dropped")
    while read -r _ dropped _rest; do
        s=$((s + 0x$dropped))
    done </proc/net/softnet_stat
    echo "$s"
}

# measure PROFILE TRACE WARMUP RATE CAPTURER: one run, one CSV row. The capturer starts, gets
# WARMUP packets at 250 k/s (one pass over the trace: its flows exist and its tables are
# touched before the measured window), then PACKETS at RATE; its CPU is counted from after the
# warm-up until it has drained its ring. Losses count both phases.
measure() {
    local profile=$1 trace=$2 warmup=$3 rate=$4 cap=$5 fn dir pps remark=
    fn=${cap//-/_}
    pps=$(rate_number "$rate")
    dir=$OUT/$profile/$rate/$cap
    mkdir -p "$dir"
    RECEIVED= KSEEN= KDROPS= CAP_PID= LISTENER_NOTE=
    local c0=0 c1=0 t0="0 0" t1="0 0" lc0=0 lc1=0 pid i
    if [ "$cap" != none ]; then
        "cap_start_$fn" "$dir/log"
        i=0
        until has_packet_socket "$CAP_PID" "$IFINDEX_H"; do
            sleep 0.1
            i=$((i + 1))
            if ! kill -0 "$CAP_PID" 2>/dev/null || [ "$i" -ge 200 ]; then
                note "$cap did not start capturing on $IF_H: $(tail -3 "$dir/log" | tr '\n' ' ')"
                kill -KILL "$CAP_PID" 2>/dev/null || true
                wait "$CAP_PID" 2>/dev/null || true
                CAP_PID=
                echo "$profile,$pps,$cap,,,,,,,,,,,,,,,,,,,did not start (see $dir/log)" >>"$CSV"
                return
            fi
        done
        if declare -F "cap_ready_$fn" >/dev/null; then
            "cap_ready_$fn" "$dir/log" || remark="its listeners did not start"
        fi
        # Let it finish setting up (flow table, ring) before the traffic starts.
        wait_quiet "$CAP_PID" 0.5 20 || remark="${remark:+$remark; }slow to settle"
    fi
    local rx0 sd0 rx1 sd1 load1
    rx0=$(cat "/sys/class/net/$IF_H/statistics/rx_packets")
    sd0=$(stack_drops)
    ip netns exec "$NS" taskset -c "$SEND_CPU" "$BLAST" -i "$IF_N" -r "$trace" \
        --count "$warmup" --pps 250000 --batch "$BATCH" >"$dir/warmup.json" 2>"$dir/warmup.err" ||
        die "blast failed: $(cat "$dir/warmup.err")"
    if [ -n "$CAP_PID" ]; then
        wait_quiet "$CAP_PID" 0.3 20 || remark="${remark:+$remark; }busy after the warm-up"
        lc0=$(listeners_cpu_ns)
        c0=$(cpu_ns "$CAP_PID")
        t0=$(cpu_ticks "$CAP_PID")
    fi
    load1=$(cut -d' ' -f1 /proc/loadavg)
    ip netns exec "$NS" taskset -c "$SEND_CPU" "$BLAST" -i "$IF_N" -r "$trace" \
        --count "$PACKETS" --pps "$pps" --batch "$BATCH" >"$dir/blast.json" 2>"$dir/blast.err" ||
        die "blast failed: $(cat "$dir/blast.err")"
    if [ -n "$CAP_PID" ]; then
        wait_quiet "$CAP_PID" "$DRAIN_QUIET_S" 60 || remark="${remark:+$remark; }still busy 60 s after the sender stopped"
        c1=$(cpu_ns "$CAP_PID")
        t1=$(cpu_ticks "$CAP_PID")
        if [ ${#LISTENER_PIDS[@]} -gt 0 ]; then
            for pid in "${LISTENER_PIDS[@]}"; do
                wait_quiet "$pid" 0.5 30 || true
            done
            lc1=$(listeners_cpu_ns)
            stop_listeners "$dir/log" $((lc1 - lc0))
            remark="${remark:+$remark; }$LISTENER_NOTE"
        fi
        if [ -n "$POLL_PID" ]; then
            kill -TERM "$POLL_PID" 2>/dev/null || true
            wait "$POLL_PID" 2>/dev/null || true
            POLL_PID=
            remark="${remark:+$remark; }API $(cat "$dir/log.poll" 2>/dev/null || echo 'polls: no count')"
        fi
        kill -INT "$CAP_PID" 2>/dev/null || true
        i=0
        while kill -0 "$CAP_PID" 2>/dev/null && [ "$i" -lt 300 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        if kill -0 "$CAP_PID" 2>/dev/null; then
            kill -KILL "$CAP_PID" 2>/dev/null || true
            remark="${remark:+$remark; }killed: no exit 30 s after SIGINT"
        fi
        wait "$CAP_PID" 2>/dev/null || true
        CAP_PID=
        "cap_parse_$fn" "$dir/log"
        [ -n "$RECEIVED" ] || remark="${remark:+$remark; }no counts in its output (see $dir/log)"
    fi
    rx1=$(cat "/sys/class/net/$IF_H/statistics/rx_packets")
    sd1=$(stack_drops)
    local warm_sent sent sent_pps late elapsed
    warm_sent=$(json_num packets "$dir/warmup.json")
    sent=$(json_num packets "$dir/blast.json")
    sent_pps=$(json_num pps "$dir/blast.json")
    late=$(json_num late "$dir/blast.json")
    elapsed=$(json_num elapsed_s "$dir/blast.json")
    awk -F, -v OFS=, -v profile="$profile" -v pps="$pps" -v cap="$cap" -v warm="$warm_sent" \
        -v sent="$sent" -v sent_pps="$sent_pps" -v late="$late" -v if_rx=$((rx1 - rx0)) \
        -v sd=$((sd1 - sd0)) -v kseen="$KSEEN" -v recv="$RECEIVED" -v kdrops="$KDROPS" \
        -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$CLK_TCK" -v elapsed="$elapsed" \
        -v load1="$load1" -v remark="${remark//,/;}" 'BEGIN {
            lost = ""; loss = ""; cpu = ""; us = ""; ss = ""; per = ""; pct = ""
            if (cap != "none" && recv != "") {
                lost = warm + sent - recv
                loss = sprintf("%.3f", sent > 0 ? 100 * lost / sent : 0)
                cpu = sprintf("%.3f", (c1 - c0) / 1e9)
                split(t0, a, " "); split(t1, b, " ")
                us = sprintf("%.2f", (b[1] - a[1]) / tck); ss = sprintf("%.2f", (b[2] - a[2]) / tck)
                got = recv - warm; if (got > 0) per = sprintf("%.1f", (c1 - c0) / got)
                if (elapsed > 0) pct = sprintf("%.0f", 100 * (c1 - c0) / 1e9 / elapsed)
            }
            print profile, pps, cap, warm, sent, sent_pps, late, if_rx, sd, kseen, recv, kdrops, lost, loss, cpu, us, ss, per, pct, "", load1, remark
        }' >>"$CSV"
    note "$(tail -1 "$CSV")"
}

# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: bench/capture.sh $ARGS_GIVEN"
    echo "git: $(cd "$ROOT" && git log -1 --format='%h %s' 2>/dev/null || echo unknown)"
    dirty=$(cd "$ROOT" && git status --porcelain --untracked-files=no -- crates Cargo.lock 2>/dev/null | wc -l)
    [ "$dirty" = 0 ] || echo "git: plus uncommitted changes in $dirty file(s) under crates/ or Cargo.lock (trawl was built from the working tree)"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
    echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "sender: blast on CPU $SEND_CPU (batch $BATCH, sendmmsg, PACKET_QDISC_BYPASS), $PACKETS packets per run; capturer on CPU $CAP_CPU"
    echo "net.core.netdev_max_backlog: $(cat /proc/sys/net/core/netdev_max_backlog)"
    command -v tcpdump >/dev/null && echo "tcpdump: $(tcpdump --version 2>&1 | head -2 | tr '\n' ' ')"
    command -v dumpcap >/dev/null && echo "dumpcap: $(dumpcap --version 2>&1 | head -1)"
    [ -x "$TRAWL" ] && echo "trawl: $("$TRAWL" --version 2>&1 | head -1)"
    echo "rustc: $(rustc --version 2>/dev/null)"
} >"$ENV_TXT"

# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------
run_list=()
for cap in ${CAPTURERS//,/ }; do
    fn=${cap//-/_}
    if [ "$cap" != none ]; then
        declare -F "cap_start_$fn" >/dev/null || die "unknown capturer $cap"
        why=$("cap_check_$fn" || true)
        if [ -n "$why" ]; then
            note "skipping $cap: $why"
            echo "skipped: $cap: $why" >>"$ENV_TXT"
            continue
        fi
    fi
    run_list+=("$cap")
done
for rate in ${RATES//,/ }; do
    [ "$(rate_number "$rate")" != bad ] || die "bad rate $rate (examples: 250k, 1.5M, 800000, max)"
done

if [ "$CONTEND" = 1 ]; then
    taskset -c "$CAP_CPU" bash -c 'while :; do :; done' &
    HOG_PID=$!
    echo "contention: a busy loop (pid $HOG_PID, nice 0) on CPU $CAP_CPU during all runs" >>"$ENV_TXT"
fi
setup_veth
note "veth $IF_N (netns $NS, blast on CPU $SEND_CPU) -> $IF_H (capturers on CPU $CAP_CPU)"
for profile in ${PROFILES//,/ }; do
    trace=$(profile_trace "$profile")
    warmup=$([ "$profile" = a ] && echo 100000 || echo 1000) # one pass over the trace
    if [ -z "$trace" ]; then
        note "skipping profile $profile: no trace (run bench/run.sh --quick first to make bench/work/a-quick.pcap)"
        echo "skipped: profile $profile: no trace" >>"$ENV_TXT"
        continue
    fi
    echo "profile $profile: $trace" >>"$ENV_TXT"
    note "profile $profile: $trace"
    for rate in ${RATES//,/ }; do
        for cap in "${run_list[@]}"; do
            [ "$cap" = none ] && [ "$rate" != max ] && continue
            measure "$profile" "$trace" "$warmup" "$rate" "$cap"
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$ENV_TXT"

# CPU per packet relative to tcpdump's (default settings) at the same profile and target rate.
awk -F, -v OFS=, 'NR == FNR { if (FNR > 1 && $3 == "tcpdump" && $18 > 0) base[$1 "," $2] = $18; next }
    FNR == 1 { print; next }
    { k = $1 "," $2; if ((k in base) && $18 > 0) $20 = sprintf("%.2f", $18 / base[k]); print }' \
    "$CSV" "$CSV" >"$CSV.tmp" && mv "$CSV.tmp" "$CSV"

echo
cat "$ENV_TXT"
echo
awk -F, 'NR == 1 { printf "%-4s %8s %-13s %9s %9s %9s %9s %7s %7s %8s %6s %7s %6s  %s\n", "prof", "target", "capturer", "sent", "sent/s", "received", "kdrops", "lost %", "CPU s", "ns/pkt", "CPU %", "vs tcpd", "load", "note"; next }
    { printf "%-4s %8s %-13s %9s %9s %9s %9s %7s %7s %8s %6s %7s %6s  %s%s\n", $1, ($2 == 0 ? "max" : $2), $3, $5, $6, ($11 != "" ? $11 - $4 : ""), $12, $14, $15, $18, $19, $20, $21, ($9 > 0 ? "stack drops " $9 "; " : ""), $22 }' "$CSV"

# Per capturer: the highest target rate up to which it lost nothing (every lower rate included).
echo
echo "highest loss-free rate (all lower rates loss-free too; 'max' = blast's top speed):"
awk -F, 'NR > 1 && $3 != "none" && $13 != "" {
        k = $1 "," $3
        if (!(k in state)) { state[k] = "ok"; best[k] = "none"; order[++n] = k }
        if (state[k] == "ok") {
            if ($13 == 0) best[k] = ($2 == 0 ? "max (" $6 " pkt/s)" : $2)
            else { state[k] = "lost"; first[k] = ($2 == 0 ? "max" : $2) " (" $13 " packets, " $14 " %)" }
        }
    }
    END { for (i = 1; i <= n; i++) { split(order[i], p, ",")
        printf "  %-2s %-13s %s%s\n", p[1], p[2], best[order[i]], (order[i] in first ? ", first loss at " first[order[i]] : "") } }' "$CSV"

# Per capturer: median CPU per packet over its loss-free runs, its ratio to tcpdump's, and the
# rate one CPU would sustain at that cost (a projection: 1e9 / ns per packet).
echo
echo "CPU per packet, median over loss-free runs (projected single-CPU rate = 1e9 / ns per packet):"
awk -F, 'function median(list,   v, n, i, j, t) {
        n = split(list, v, " ")
        for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    NR > 1 && $3 != "none" && $13 == 0 && $18 > 0 {
        k = $1 "," $3; if (!(k in per)) order[++n] = k; per[k] = per[k] " " $18
        if ($20 != "") ratio[k] = ratio[k] " " $20 }
    END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ","); m = median(per[k])
        printf "  %-2s %-13s %7.1f ns/pkt  %5s x tcpdump  projected %5.1f M pkt/s\n", p[1], p[2], m,
            (k in ratio ? sprintf("%.2f", median(ratio[k])) : "-"), 1e3 / m } }' "$CSV"

# The shared ring's lossy listeners: the producer's CPU per packet with 1 and 2 of them against
# none, at the same rates (the cost of each listener as a share of the producer's capacity).
if grep -q ',trawl-run-L[12],' "$CSV"; then
    echo
    echo "trawl run: producer CPU per packet with lossy listeners (cost vs no listener):"
    awk -F, 'NR > 1 && $3 ~ /^trawl-run/ && $18 > 0 { v[$1 "," $2 "," $3] = $18; if (!(($1 "," $2) in seen)) { seen[$1 "," $2] = 1; order[++n] = $1 "," $2 } }
        END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ","); b = v[k ",trawl-run"]
            line = sprintf("  %-2s %8s  0: %s", p[1], (p[2] == 0 ? "max" : p[2]), (b == "" ? "-" : b))
            for (l = 1; l <= 2; l++) { x = v[k ",trawl-run-L" l]
                if (x != "") line = line sprintf("   %d: %s", l, x) (b > 0 ? sprintf(" (%+.0f %%)", 100 * (x - b) / b) : "") }
            print line } }' "$CSV"
fi
# The HTTP API with a polling client against the same monitor without it (issue 20: capture
# CPU per packet moves < 5 %, no packet lost that the run without the API kept).
if grep -q ',trawl-db-api,' "$CSV"; then
    echo
    echo "trawl run --db: CPU per packet and losses with the API polled (vs without the API):"
    awk -F, 'NR > 1 && $3 ~ /^trawl-db/ && $18 > 0 { v[$1 "," $2 "," $3] = $18; l[$1 "," $2 "," $3] = $13
            if (!(($1 "," $2) in seen)) { seen[$1 "," $2] = 1; order[++n] = $1 "," $2 } }
        END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ","); b = v[k ",trawl-db"]; x = v[k ",trawl-db-api"]
            printf "  %-2s %8s  without: %s ns/pkt (lost %s)   with: %s ns/pkt (lost %s)%s\n", p[1],
                (p[2] == 0 ? "max" : p[2]), (b == "" ? "-" : b), l[k ",trawl-db"], (x == "" ? "-" : x),
                l[k ",trawl-db-api"], (b > 0 && x > 0 ? sprintf("  ratio %.3f", x / b) : "") } }' "$CSV"
fi
echo "raw results: $CSV"
