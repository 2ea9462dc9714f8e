#!/usr/bin/env bash
# trawl's consumer → ClickHouse benchmark (issue 22): rows per second that
# `trawl clickhouse load` inserts into the ClickHouse 18.16 server of this machine
# (scripts/services.sh), from a Kafka topic of trawl's Protobuf (or JSON) flow records. One
# broker and one server on loopback; the topic is filled first by the export bench binary of
# trawl-export (the synthetic records of bench/export.sh), then loaded to its end.
#
#   bench/clickhouse.sh [--records N] [--format protobuf-delimited|protobuf|json]
#                       [--kafka-batch BYTES|0] [--batch-rows N]
#
# The topic's messages are batched (`batch=BYTES`, default 262144; 0: one record per
# message). Reports the load's rows/s over its whole run (consumer start and group join
# included) and its CPU seconds, with the server's; then the server's own insert rate: the
# same rows read back and inserted again: with curl over HTTP in inserts of --batch-rows
# rows as RowBinary in arrival order (what the loader sent before 2026-11-27 late night) and
# as Native blocks in sorting-key order (what it sends now), and with clickhouse-client
# (native protocol, one insert). Raw output in bench/work/clickhouse/. Stops what it started.
set -euo pipefail
export LC_ALL=C

RECORDS=2000000
FORMAT=protobuf-delimited
KBATCH=262144
BATCH=262144
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --format) FORMAT=$2; shift ;;
        --kafka-batch) KBATCH=$2; shift ;;
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
# The bench profile (release code with line tables, in target/release like the bench binary):
# the dependencies built once serve both binaries.
[ -n "${TRAWL_BIN:-}" ] || (cd "$ROOT" && cargo build --profile bench -q -p trawl-cli --features kafka)
TRAWL=${TRAWL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/trawl}
# BENCH_BIN=PATH / TRAWL_BIN=PATH: binaries already built (no cargo run here).
[ -n "${BENCH_BIN:-}" ] || BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --features kafka --bench export_throughput --no-run --message-format=json 2>/dev/null \
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
    echo "records: $RECORDS $FORMAT, Kafka batch $KBATCH bytes, insert batch rows $BATCH"
} | tee "$WORK/env.txt"

note "filling $TOPIC"
DEST="kafka://$BROKER/$TOPIC?format=$FORMAT"
[ "$KBATCH" = 0 ] || DEST="$DEST&batch=$KBATCH"
"$BENCH_BIN" to "$RECORDS" "$DEST" >&2
curl -s "$URL/" --data-binary "DROP TABLE IF EXISTS trawl.flows" >/dev/null

note "loading"
server_pid=$(cat "$TRAWL_SERVICES_DIR/clickhouse/server1/pid")
broker_pid=$(cat "$TRAWL_SERVICES_DIR/kafka/node1/pid")
ticks=$(getconf CLK_TCK)
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
server_cpu() { cpu_of "$server_pid"; }
# The server's CPU for an insert includes its background merges of the parts the insert
# made: read it once no merge runs (at most 30 s after the inserts).
settled_server_cpu() {
    local i
    for ((i = 0; i < 60; i++)); do
        [ "$(curl -s "$URL/" --data-binary "SELECT count() FROM system.merges")" = 0 ] && break
        sleep 0.5
    done
    server_cpu
}
# The server's own CPU while idle over 5 s (its background threads), in ticks per second.
i0=$(server_cpu); sleep 5; idle_rate=$(echo "($(server_cpu) - $i0) / 5" | bc -l)
s0=$(server_cpu)
b0=$(cpu_of "$broker_pid")
/usr/bin/time -f "%U %S %e" -o "$WORK/time.txt" \
    "$TRAWL" clickhouse load --kafka "$BROKER/$TOPIC" --url "$URL" --create --kafka-end \
    --batch-rows "$BATCH" --summary json 2> "$WORK/summary.json"
s_end=$(server_cpu)
b1=$(cpu_of "$broker_pid")
s1=$(settled_server_cpu)
tail -1 "$WORK/summary.json"
read -r user sys wall < "$WORK/time.txt"
rows=$(curl -s "$URL/" --data-binary "SELECT count() FROM trawl.flows")
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/env.txt"
printf 'rows in the table: %s\n' "$rows"
printf 'trawl clickhouse load: %.1f s wall, %.1f s CPU (user %s, sys %s): %.0f rows/s, %.0f rows per CPU-second\n' \
    "$wall" "$(echo "$user + $sys" | bc -l)" "$user" "$sys" \
    "$(echo "$rows / $wall" | bc -l)" "$(echo "$rows / ($user + $sys)" | bc -l)"
printf 'clickhouse-server 18.16: %.2f s CPU during the load, %.2f s with the merges after it (idle: %.2f s CPU per s)\n' \
    "$(echo "($s_end - $s0) / $ticks" | bc -l)" "$(echo "($s1 - $s0) / $ticks" | bc -l)" \
    "$(echo "$idle_rate / $ticks" | bc -l)"
printf 'kafka broker: %.2f s CPU during the load\n' "$(echo "($b1 - $b0) / $ticks" | bc -l)"

# The server alone: the same rows as RowBinary, inserted again (the loader's insert size over
# HTTP, then clickhouse-client's native protocol), wall time of each.
COLS=$(curl -s "$URL/" --data-binary "SELECT arrayStringConcat(groupArray(name), ', ') FROM system.columns WHERE database = 'trawl' AND table = 'flows'")
curl -s "$URL/" --data-binary "SELECT $COLS FROM trawl.flows FORMAT RowBinary" > "$WORK/rows.bin"
ROW_BYTES=$(( $(stat -c %s "$WORK/rows.bin") / rows ))
# The bench's rows are all as long (one probe name, fixed-width columns otherwise): the file
# cuts into whole rows. Otherwise it goes as one insert.
if [ $(( $(stat -c %s "$WORK/rows.bin") % rows )) = 0 ]; then
    split -b $((ROW_BYTES * BATCH)) -d -a 4 "$WORK/rows.bin" "$WORK/part."
else
    cp "$WORK/rows.bin" "$WORK/part.0000"
fi
note "server alone ($(stat -c %s "$WORK/rows.bin") bytes of RowBinary, $ROW_BYTES bytes a row)"
server_insert() { # label, command...
    local label=$1 t0 t1 n c0 c1 c2
    shift
    curl -s "$URL/" --data-binary "TRUNCATE TABLE trawl.flows" >/dev/null
    settled_server_cpu >/dev/null
    c0=$(server_cpu)
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    c1=$(server_cpu)
    c2=$(settled_server_cpu)
    n=$(curl -s "$URL/" --data-binary "SELECT count() FROM trawl.flows")
    printf '%s: %s rows in %.2f s: %.0f rows/s; server %.2f s CPU during the inserts, %.2f s with the merges after\n' \
        "$label" "$n" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$n / ($t1 - $t0)" | bc -l)" \
        "$(echo "($c1 - $c0) / $ticks" | bc -l)" "$(echo "($c2 - $c0) / $ticks" | bc -l)"
}
http_parts() {
    for f in "$WORK"/part.*; do
        curl -s -f "$URL/?query=INSERT%20INTO%20trawl.flows%20($(echo "$COLS" | sed 's/, /,/g'))%20FORMAT%20RowBinary" \
            --data-binary @"$f" >/dev/null
    done
}
# What the loader sends: Native blocks of --batch-rows rows in the table's sorting-key order
# (the key of `trawl clickhouse schema`'s flow table).
KEY="time, probe, iface, src_ip, dst_ip, src_port, dst_port, proto"
for ((o = 0; o < rows; o += BATCH)); do
    curl -s "$URL/?max_block_size=$BATCH" --data-binary \
        "SELECT $COLS FROM trawl.flows ORDER BY $KEY LIMIT $BATCH OFFSET $o FORMAT Native" \
        > "$WORK/native.$(printf %010d $o)"
done
http_native() {
    for f in "$WORK"/native.*; do
        curl -s -f "$URL/?query=INSERT%20INTO%20trawl.flows%20($(echo "$COLS" | sed 's/, /,/g'))%20FORMAT%20Native" \
            --data-binary @"$f" >/dev/null
    done
}
native() {
    clickhouse-client --port $(( ${URL##*:} + 900 )) \
        --query "INSERT INTO trawl.flows ($COLS) FORMAT RowBinary" < "$WORK/rows.bin"
}
server_insert "server alone, curl over HTTP, inserts of $BATCH rows" http_parts
server_insert "server alone, curl over HTTP, sorted Native blocks of $BATCH rows" http_native
server_insert "server alone, clickhouse-client, one insert" native
rm -f "$WORK"/rows.bin "$WORK"/part.* "$WORK"/native.*
