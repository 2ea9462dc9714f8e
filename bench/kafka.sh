#!/usr/bin/env bash
# trawl's Kafka export benchmark (issue 22): flow records exported to Kafka per CPU second of
# the exporting process (its exporter thread and librdkafka's threads), against writing the
# same records as JSON lines to /dev/null. One broker on loopback (scripts/services.sh), the
# bench binary of trawl-export built in release with the `kafka` feature; the records are the
# synthetic ones of bench/export.sh (IPv4, TCP/UDP mix, first-packet arrays).
#
#   bench/kafka.sh [--records N] [--repeat N]
#
# Each destination runs --repeat times (default 3); the median is reported. Raw output in
# bench/work/kafka/. Stops the broker it started.
set -euo pipefail
export LC_ALL=C

RECORDS=2000000
REPEAT=3
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --repeat) REPEAT=$2; shift ;;
        *) echo "kafka.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bench/work/kafka
mkdir -p "$WORK"
note() { echo "== $*" >&2; }

note "building (release, feature kafka)"
BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --features kafka --bench export_throughput --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH_BIN" ] || { echo "kafka.sh: bench binary missing" >&2; exit 1; }

export TRAWL_SERVICES_DIR=$WORK/services TRAWL_KAFKA_PORT=${TRAWL_KAFKA_PORT:-39092}
trap '"$ROOT"/scripts/services.sh stop kafka >/dev/null 2>&1 || true' EXIT
BROKER=$("$ROOT"/scripts/services.sh start kafka --brokers 1 | tail -1)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "kafka: 4.3.1, 1 broker, $BROKER"
    echo "rustc: $(rustc --version)"
} | tee "$WORK/env.txt"

# One destination REPEAT times; prints the median records per CPU second.
measure() { # label destination
    local label=$1 dest=$2 i
    : > "$WORK/$label.txt"
    for ((i = 1; i <= REPEAT; i++)); do
        "$BENCH_BIN" to "$RECORDS" "${dest//RUN/$i}" | tee -a "$WORK/$label.txt" >&2
    done
    sed -n 's/.*records_per_cpu_s=\([0-9]*\).*/\1/p' "$WORK/$label.txt" | sort -n | sed -n "$(((REPEAT + 1) / 2))p"
}

json=$(measure json-devnull "json:/dev/null")
kjson=$(measure kafka-json "kafka://$BROKER/bench-json-RUN?format=json")
kpb=$(measure kafka-protobuf "kafka://$BROKER/bench-pb-RUN?format=protobuf")
printf '%-22s %14s %8s\n' destination records/cpu-s "vs json"
printf '%-22s %14s %8s\n' "json:/dev/null" "$json" 1.00
printf '%-22s %14s %8.2f\n' "kafka json" "$kjson" "$(echo "$kjson / $json" | bc -l)"
printf '%-22s %14s %8.2f\n' "kafka protobuf" "$kpb" "$(echo "$kpb / $json" | bc -l)"
