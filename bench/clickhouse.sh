#!/usr/bin/env bash
# trawl's consumer → ClickHouse benchmark (issue 22): rows per second that
# `trawl clickhouse load` inserts into the ClickHouse 18.16 server of this machine
# (scripts/services.sh), from a Kafka topic of trawl's Protobuf (or JSON) flow records. One
# broker and one server on loopback; the topic is filled first by the export bench binary of
# trawl-export (the synthetic records of bench/export.sh), then loaded to its end.
#
#   bench/clickhouse.sh [--records N] [--format protobuf|json] [--batch-rows N]
#
# Reports the load's rows/s over its whole run (consumer start and group join included) and
# its CPU seconds, with the server's; raw output in bench/work/clickhouse/. Stops what it
# started.
set -euo pipefail
export LC_ALL=C

RECORDS=2000000
FORMAT=protobuf
BATCH=262144
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --format) FORMAT=$2; shift ;;
        --batch-rows) BATCH=$2; shift ;;
        *) echo "clickhouse.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bench/work/clickhouse
mkdir -p "$WORK"
note() { echo "== $*" >&2; }

note "building (release, feature kafka)"
(cd "$ROOT" && cargo build -q --release -p trawl-cli --features kafka)
TRAWL=${CARGO_TARGET_DIR:-$ROOT/target}/release/trawl
BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --features kafka --bench export_throughput --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$BENCH_BIN" ] || { echo "clickhouse.sh: bench binary missing" >&2; exit 1; }

export TRAWL_SERVICES_DIR=$WORK/services TRAWL_KAFKA_PORT=${TRAWL_KAFKA_PORT:-39192} \
    TRAWL_CLICKHOUSE_PORT=${TRAWL_CLICKHOUSE_PORT:-38123}
trap '"$ROOT"/scripts/services.sh stop kafka >/dev/null 2>&1 || true; "$ROOT"/scripts/services.sh stop clickhouse >/dev/null 2>&1 || true; rm -rf "$TRAWL_SERVICES_DIR"' EXIT
BROKER=$("$ROOT"/scripts/services.sh start kafka --brokers 1 | tail -1)
URL=$("$ROOT"/scripts/services.sh start clickhouse --shards 1 | tail -1)
TOPIC=bench-ch-$FORMAT-$$

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "kafka: 4.3.1, 1 broker, $BROKER; clickhouse: $(curl -s "$URL/?query=SELECT%20version()") at $URL"
    echo "records: $RECORDS $FORMAT, batch rows $BATCH"
} | tee "$WORK/env.txt"

note "filling $TOPIC"
"$BENCH_BIN" to "$RECORDS" "kafka://$BROKER/$TOPIC?format=$FORMAT" >&2
curl -s "$URL/" --data-binary "DROP TABLE IF EXISTS trawl.flows" >/dev/null

note "loading"
server_pid=$(cat "$TRAWL_SERVICES_DIR/clickhouse/server1/pid")
server_cpu() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
s0=$(server_cpu)
/usr/bin/time -f "%U %S %e" -o "$WORK/time.txt" \
    "$TRAWL" clickhouse load --kafka "$BROKER/$TOPIC" --url "$URL" --create --kafka-end \
    --batch-rows "$BATCH" --summary json 2> "$WORK/summary.json"
s1=$(server_cpu)
tail -1 "$WORK/summary.json"
read -r user sys wall < "$WORK/time.txt"
rows=$(curl -s "$URL/" --data-binary "SELECT count() FROM trawl.flows")
ticks=$(getconf CLK_TCK)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/env.txt"
printf 'rows in the table: %s\n' "$rows"
printf 'trawl clickhouse load: %.1f s wall, %.1f s CPU (user %s, sys %s): %.0f rows/s, %.0f rows per CPU-second\n' \
    "$wall" "$(echo "$user + $sys" | bc -l)" "$user" "$sys" \
    "$(echo "$rows / $wall" | bc -l)" "$(echo "$rows / ($user + $sys)" | bc -l)"
printf 'clickhouse-server 18.16: %.1f s CPU\n' "$(echo "($s1 - $s0) / $ticks" | bc -l)"
