#!/usr/bin/env bash
# trawl's Kafka benchmarks (issue 22), one broker on loopback (scripts/services.sh):
#
#   1. export: flow records delivered to Kafka (in messages the broker acknowledged) per CPU
#      second of the exporting process (its exporter thread and librdkafka's threads; the
#      exporter is lossless, as a capture-file run's; a run that lost records is marked),
#      against writing the same records as JSON
#      lines to /dev/null; the bench binary of trawl-export built in release with the `kafka`
#      feature; the records are the synthetic ones of bench/export.sh (IPv4, TCP/UDP mix,
#      first-packet arrays).
#   2. collector: the same IPFIX stream (bench/export.sh's, deterministic) replayed at a fixed
#      pace into `trawl collect --export kafka://...` and into GoFlow2 with its Kafka
#      transport, one after the other, to the same broker; records that arrived on the topic
#      per CPU second of the receiving process (all its threads, read from /proc before it
#      is stopped). JSON against GoFlow2's JSON, Protobuf against its protobuf (`bin`); trawl
#      both with one record per message (the default) and batched (`batch=BYTES`, JSON lines
#      and `protobuf-delimited`), GoFlow2 one per message (it has no batching).
#
#   bench/kafka.sh [--records N] [--repeat N] [--stream-records N] [--rate DATAGRAMS_PER_S]
#                  [--batch BYTES] [--no-collector]
#
# Each measurement runs --repeat times (default 3); the median is reported. Raw output in
# bench/work/kafka/. GoFlow2 is `go install`ed into $(go env GOPATH)/bin when missing
# (GOFLOW2=PATH uses another). Stops the broker it started.
set -euo pipefail
export LC_ALL=C

RECORDS=2000000
REPEAT=3
STREAM_RECORDS=200000
RATE=20000
BATCH=262144
COLLECTOR=1
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --repeat) REPEAT=$2; shift ;;
        --stream-records) STREAM_RECORDS=$2; shift ;;
        --rate) RATE=$2; shift ;;
        --batch) BATCH=$2; shift ;;
        --no-collector) COLLECTOR=0 ;;
        *) echo "kafka.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bench/work/kafka
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$WORK"
note() { echo "== $*" >&2; }

note "building (release, feature kafka)"
# BENCH_BIN=PATH / TRAWL_BIN=PATH: binaries already built (no cargo run here).
[ -n "${BENCH_BIN:-}" ] || BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --features kafka --bench export_throughput --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH_BIN" ] || { echo "kafka.sh: bench binary missing" >&2; exit 1; }
TRAWL=${TRAWL_BIN:-$TARGET_DIR/release/trawl}
if [ "$COLLECTOR" = 1 ]; then
    # The bench profile (release code with line tables, in target/release like the bench binary):
    # the dependencies built once serve both binaries.
    [ -n "${TRAWL_BIN:-}" ] || (cd "$ROOT" && cargo build --profile bench -q -p trawl-cli --features kafka)
    GOFLOW2=${GOFLOW2:-$(go env GOPATH)/bin/goflow2}
    if [ ! -x "$GOFLOW2" ]; then
        note "installing GoFlow2 (go install)"
        go install github.com/netsampler/goflow2/v2/cmd/goflow2@latest
    fi
fi

export TRAWL_SERVICES_DIR=$WORK/services TRAWL_KAFKA_PORT=${TRAWL_KAFKA_PORT:-39092}
# The broker's log holds every record of every run (8 GB for the default sizes): removed with it.
trap '"$ROOT"/scripts/services.sh stop kafka >/dev/null 2>&1 || true; rm -rf "$TRAWL_SERVICES_DIR"' EXIT
BROKER=$("$ROOT"/scripts/services.sh start kafka --brokers 1 | tail -1)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "kafka: 4.3.1, 1 broker, $BROKER"
    echo "rustc: $(rustc --version)"
    [ "$COLLECTOR" = 1 ] && echo "goflow2: $("$GOFLOW2" -v 2>&1 | head -1)"
    true
} | tee "$WORK/env.txt"

# Deletes a topic once measured: the broker's disk then holds one run's records (2.7 GB of
# JSON at the default sizes), not every run's (a full disk stops the broker mid-run).
delete_topic() {
    java -Xmx256m -cp "$TRAWL_SERVICES_DIR/kafka-4.3.1/libs/*" org.apache.kafka.tools.TopicCommand \
        --bootstrap-server "$BROKER" --delete --topic "$1" >/dev/null 2>&1 || note "could not delete topic $1"
}

# One destination REPEAT times; prints the median records per CPU second, counting the
# records delivered (acknowledged by the broker), and the fewest delivered of any run.
measure() { # label destination
    local label=$1 dest=$2 i run
    : > "$WORK/$label.txt"
    for ((i = 1; i <= REPEAT; i++)); do
        run=${dest//RUN/$i}
        "$BENCH_BIN" to "$RECORDS" "$run" | tee -a "$WORK/$label.txt" >&2
        case $run in
            kafka://*) run=${run#kafka://*/}; delete_topic "${run%%\?*}" ;;
        esac
    done
    echo "$(sed -n 's/.*records_per_cpu_s=\([0-9]*\).*/\1/p' "$WORK/$label.txt" | sort -n | sed -n "$(((REPEAT + 1) / 2))p")" \
        "$(sed -n 's/.* delivered=\([0-9]*\).*/\1/p' "$WORK/$label.txt" | sort -n | head -1)"
}

json=$(measure json-devnull "json:/dev/null")
kjson=$(measure kafka-json "kafka://$BROKER/bench-json-RUN?format=json")
kpb=$(measure kafka-protobuf "kafka://$BROKER/bench-pb-RUN?format=protobuf")
kjsonb=$(measure kafka-json-batch "kafka://$BROKER/bench-jsonb-RUN?format=json&batch=$BATCH")
kpbd=$(measure kafka-pbd-batch "kafka://$BROKER/bench-pbd-RUN?format=protobuf-delimited&batch=$BATCH")
{
    echo "export ($RECORDS records, median of $REPEAT; records delivered per CPU second):"
    printf '  %-40s %14s %8s %s\n' destination records/cpu-s "vs json" "fewest delivered"
    json=${json%% *}
    printf '  %-40s %14s %8s\n' "json:/dev/null" "$json" 1.00
    row() { # label, "rate fewest-delivered"
        set -- "$1" ${2}
        printf '  %-40s %14s %8.2f %s%s\n' "$1" "$2" "$(echo "$2 / $json" | bc -l)" "$3" \
            "$([ "$3" = "$RECORDS" ] || echo " (LOST RECORDS)")"
    }
    row "kafka json" "$kjson"
    row "kafka protobuf" "$kpb"
    row "kafka json batch=$BATCH" "$kjsonb"
    row "kafka protobuf-delimited batch=$BATCH" "$kpbd"
} | tee "$WORK/summary.txt"

[ "$COLLECTOR" = 1 ] || exit 0

note "collector: $STREAM_RECORDS records as IPFIX datagrams, replayed at $RATE datagrams/s"
"$BENCH_BIN" stream "$STREAM_RECORDS" "$WORK/stream.bin" | tee "$WORK/stream.txt"

# CPU time of all live threads of a process, ns (schedstat, as bench/export.sh reads it).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

# Records on a topic now: one per message, or (COUNT=json) JSON lines, or (COUNT=delimited)
# varint-delimited Protobuf records in messages (kcat's %R: each message's 4-byte length).
COUNT=messages
topic_count() {
    case $COUNT in
        json) kcat -C -b "$BROKER" -t "$1" -o beginning -e -q -f '%s\n' 2>/dev/null | wc -l ;;
        delimited) kcat -C -b "$BROKER" -t "$1" -o beginning -e -q -f '%R%s' 2>/dev/null | python3 -c '
import sys
b, at, n = sys.stdin.buffer.read(), 0, 0
while at + 4 <= len(b):
    end = at + 4 + int.from_bytes(b[at:at + 4], "big")
    at += 4
    while at < end:
        size, shift = 0, 0
        while True:
            c = b[at]; at += 1
            size |= (c & 0x7f) << shift; shift += 7
            if c < 0x80: break
        at += size; n += 1
print(n)' ;;
        *) kcat -C -b "$BROKER" -t "$1" -o beginning -e -q -f 'x\n' 2>/dev/null | wc -l ;;
    esac
}

# One receiver on PORT into TOPIC (the words PORT and TOPIC in its command are replaced):
# starts it, replays the stream, waits until the topic holds every record (at most 60 s),
# and prints "CPU_NS RECORDS_ON_TOPIC".
receive() { # label, topic, port, receiver command...
    local label=$1 TOPIC=$2 PORT=$3
    shift 3
    local cmd=("${@//PORT/$PORT}")
    cmd=("${cmd[@]//TOPIC/$TOPIC}")
    "${cmd[@]}" > "$WORK/$label.out" 2> "$WORK/$label.err" &
    local pid=$!
    sleep 2
    local c0 c1 n=0 i
    c0=$(cpu_ns $pid)
    "$BENCH_BIN" replay "$WORK/stream.bin" "127.0.0.1:$PORT" "$RATE" > "$WORK/replay-$label.txt"
    for ((i = 0; i < 60; i++)); do
        sleep 1
        n=$(topic_count "$TOPIC")
        [ "$n" -ge "$STREAM_RECORDS" ] && break
    done
    c1=$(cpu_ns $pid)
    kill -INT $pid
    wait $pid || true
    echo "$((c1 - c0)) $n"
}

: > "$WORK/collect.txt"
port=$((TRAWL_KAFKA_PORT + 100))
for ((i = 1; i <= REPEAT; i++)); do
    for fmt in json protobuf; do
        t=$(receive "trawl-$fmt-$i" "collect-$fmt-$i" $port \
            "$TRAWL" collect --listen udp://127.0.0.1:PORT --no-output --summary json \
            --export "kafka://$BROKER/TOPIC?format=$fmt")
        echo "trawl-$fmt $t" | tee -a "$WORK/collect.txt"
        port=$((port + 1))
        gofmt=$([ "$fmt" = json ] && echo json || echo bin)
        t=$(receive "goflow2-$fmt-$i" "goflow2-$fmt-$i" $port \
            "$GOFLOW2" -listen "netflow://127.0.0.1:PORT" -format "$gofmt" -transport kafka \
            -transport.kafka.brokers "$BROKER" -transport.kafka.topic TOPIC)
        echo "goflow2-$fmt $t" | tee -a "$WORK/collect.txt"
        port=$((port + 1))
    done
    for fmt in json protobuf-delimited; do
        COUNT=$([ "$fmt" = json ] && echo json || echo delimited)
        t=$(receive "trawl-$fmt-batch-$i" "collect-$fmt-batch-$i" $port \
            "$TRAWL" collect --listen udp://127.0.0.1:PORT --no-output --summary json \
            --export "kafka://$BROKER/TOPIC?format=$fmt&batch=$BATCH")
        echo "trawl-$fmt-batch $t" | tee -a "$WORK/collect.txt"
        COUNT=messages
        port=$((port + 1))
    done
done

python3 - "$STREAM_RECORDS" "$RATE" "$WORK/collect.txt" <<'PY' | tee -a "$WORK/summary.txt"
import sys, statistics
sent, rate, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
runs = {}
for line in open(path):
    name, cpu_ns, n = line.split()
    runs.setdefault(name, []).append((int(cpu_ns) / 1e9, int(n)))
print(f"collector, IPFIX in -> Kafka ({sent} records at {rate} datagrams/s, median of runs):")
def rate_of(name):
    return statistics.median(n / cpu for cpu, n in runs[name] if cpu > 0)
for fmt, batched in (("json", "json-batch"), ("protobuf", "protobuf-delimited-batch")):
    t, g, tb = rate_of(f"trawl-{fmt}"), rate_of(f"goflow2-{fmt}"), rate_of(f"trawl-{batched}")
    for name, r in ((f"trawl-{fmt}", t), (f"trawl-{batched}", tb), (f"goflow2-{fmt}", g)):
        got = [n for _, n in runs[name]]
        cpus = [cpu for cpu, _ in runs[name]]
        print(f"  {name:30} {r/1e3:7.0f} k records/CPU-s (records on topic {min(got)}-{max(got)}, "
              f"CPU {min(cpus):.2f}-{max(cpus):.2f} s)")
    print(f"  trawl / goflow2 ({fmt}): {t/g:.2f}x one record per message, {tb/g:.2f}x batched")
PY
