#!/usr/bin/env bash
# Local servers of the engines operators run beside trawl, for the tests and for trying trawl's
# Kafka and ClickHouse paths by hand. Everything stays on loopback and in one scratch directory.
#
#   scripts/services.sh start kafka [--brokers N]        Apache Kafka 4.3.1, KRaft, N nodes
#   scripts/services.sh start clickhouse [--shards N]    ClickHouse (Debian's server), N servers
#   scripts/services.sh stop kafka|clickhouse [--node I] stop all, or only node/shard I (1-based)
#   scripts/services.sh status
#
# `start` installs what is missing (OpenJDK 17 and Maven, then Kafka's jars from Maven Central;
# Debian's clickhouse-server), starts the servers, returns once every one answers, and prints
# the address to use on its LAST line: Kafka's bootstrap list `127.0.0.1:P1,127.0.0.1:P2,...`,
# ClickHouse's HTTP URL of the first server (`http://127.0.0.1:P`). Starting what already runs
# prints its address again. `stop --node I` stops one broker (or shard) and leaves its data, so
# `start` brings it back: the tests kill a broker during an export this way.
#
# Kafka nodes are combined broker+controller (a quorum of all N). With N >= 2 the cluster
# replicates every topic N times with min.insync.replicas = N - 1, so one node may be down
# without losing an acknowledged record. ClickHouse with N shards defines the cluster `trawl`
# of N single-replica shards (one server each), for Distributed tables.
#
# Environment: TRAWL_SERVICES_DIR (default target/services beside this repository),
# TRAWL_KAFKA_PORT (first broker's port, default 19092; node I listens on PORT+2(I-1) and its
# controller on the next port), TRAWL_CLICKHOUSE_PORT (first HTTP port, default 18123; native
# port = HTTP + 900 + I).
set -euo pipefail

KAFKA_VERSION=4.3.1
LOG4J_VERSION=2.24.3
SLF4J_VERSION=2.0.16

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${TRAWL_SERVICES_DIR:-$root/target/services}
kafka_port=${TRAWL_KAFKA_PORT:-19092}
ch_port=${TRAWL_CLICKHOUSE_PORT:-18123}

die() { echo "services.sh: error: $*" >&2; exit 1; }
say() { echo "services.sh: $*" >&2; }

usage() { sed -n '2,24p' "$0"; exit "${1:-0}"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# Whether something accepts TCP connections on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Waits up to $2 seconds for port $1; fails naming $3's log.
wait_port() {
    local port=$1 secs=$2 log=$3 i
    for ((i = 0; i < secs * 10; i++)); do
        listening "$port" && return 0
        sleep 0.1
    done
    tail -20 "$log" >&2 || true
    die "nothing answers on 127.0.0.1:$port after ${secs}s (log: $log)"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() {
    local pidfile=$1 i
    alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    local pid
    pid=$(cat "$pidfile")
    kill "$pid"
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

# --- Kafka --------------------------------------------------------------------------------

kafka_libs() {
    local libs=$dir/kafka-$KAFKA_VERSION/libs
    if [ -f "$libs/.complete" ]; then
        echo "$libs"
        return
    fi
    apt_install openjdk-17-jre-headless maven
    mkdir -p "$dir/kafka-$KAFKA_VERSION"
    # The broker and its tools from Maven Central, with a logging backend (Kafka ships none).
    cat >"$dir/kafka-$KAFKA_VERSION/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>trawl.services</groupId><artifactId>kafka</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
    say "fetching Apache Kafka $KAFKA_VERSION from Maven Central"
    (cd "$dir/kafka-$KAFKA_VERSION" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
        -DoutputDirectory=libs >maven.log 2>&1) \
        || { tail -20 "$dir/kafka-$KAFKA_VERSION/maven.log" >&2; die "maven could not fetch Kafka $KAFKA_VERSION"; }
    touch "$libs/.complete"
    echo "$libs"
}

kafka_node_port() { echo $((kafka_port + 2 * ($1 - 1))); }

kafka_bootstrap() {
    local n=$1 i list=()
    for ((i = 1; i <= n; i++)); do list+=("127.0.0.1:$(kafka_node_port "$i")"); done
    (IFS=,; echo "${list[*]}")
}

kafka_java() {
    local libs=$1 node_dir=$2
    shift 2
    java -Xms256m -Xmx512m -cp "$libs/*" \
        -Dlog4j2.configurationFile="$dir/kafka/log4j2.properties" -Dkafka.logs.dir="$node_dir" "$@"
}

start_kafka() {
    local n=$1 libs i
    libs=$(kafka_libs)
    mkdir -p "$dir/kafka"
    if [ -f "$dir/kafka/brokers" ] && [ "$(cat "$dir/kafka/brokers")" != "$n" ]; then
        die "a $(cat "$dir/kafka/brokers")-node Kafka was made in $dir/kafka: stop it and remove that directory for $n nodes"
    fi
    echo "$n" >"$dir/kafka/brokers"
    cat >"$dir/kafka/log4j2.properties" <<'EOF'
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
appender.file.type=File
appender.file.name=file
appender.file.fileName=${sys:kafka.logs.dir}/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=%d %p %c - %m%n
EOF
    local voters=() replicas=$n isr=$((n > 1 ? n - 1 : 1))
    for ((i = 1; i <= n; i++)); do voters+=("$i@127.0.0.1:$(($(kafka_node_port "$i") + 1))"); done
    local cluster_id
    if [ -f "$dir/kafka/cluster-id" ]; then
        cluster_id=$(cat "$dir/kafka/cluster-id")
    else
        cluster_id=$(kafka_java "$libs" "$dir/kafka" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
        echo "$cluster_id" >"$dir/kafka/cluster-id"
    fi
    for ((i = 1; i <= n; i++)); do
        local node=$dir/kafka/node$i port
        port=$(kafka_node_port "$i")
        mkdir -p "$node"
        if alive "$node/pid"; then continue; fi
        listening "$port" && die "127.0.0.1:$port is taken by another program (set TRAWL_KAFKA_PORT)"
        cat >"$node/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$(IFS=,; echo "${voters[*]}")
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$node/data
num.partitions=1
default.replication.factor=$replicas
min.insync.replicas=$isr
offsets.topic.replication.factor=$replicas
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$isr
group.initial.rebalance.delay.ms=0
EOF
        if [ ! -f "$node/data/meta.properties" ]; then
            kafka_java "$libs" "$node" kafka.tools.StorageTool format -t "$cluster_id" \
                -c "$node/server.properties" >"$node/format.log" 2>&1 \
                || { cat "$node/format.log" >&2; die "formatting Kafka node $i failed"; }
        fi
        # setsid: the broker outlives this script and ignores the caller's terminal signals.
        setsid bash -c "exec java -Xms256m -Xmx512m -cp '$libs/*' \
            -Dlog4j2.configurationFile='$dir/kafka/log4j2.properties' -Dkafka.logs.dir='$node' \
            kafka.Kafka '$node/server.properties'" >"$node/stdout.log" 2>&1 </dev/null &
        echo $! >"$node/pid"
    done
    for ((i = 1; i <= n; i++)); do
        wait_port "$(kafka_node_port "$i")" 90 "$dir/kafka/node$i/server.log"
    done
    say "Kafka $KAFKA_VERSION: $n node(s) in $dir/kafka"
    kafka_bootstrap "$n"
}

stop_kafka() {
    local only=$1 n i
    [ -f "$dir/kafka/brokers" ] || { say "no Kafka in $dir/kafka"; return 0; }
    n=$(cat "$dir/kafka/brokers")
    for ((i = 1; i <= n; i++)); do
        [ -n "$only" ] && [ "$only" != "$i" ] && continue
        stop_pid "$dir/kafka/node$i/pid"
    done
}

# --- ClickHouse -----------------------------------------------------------------------------

ch_http_port() { echo $((ch_port + $1 - 1)); }

start_clickhouse() {
    local n=$1 i shards=""
    apt_install clickhouse-server clickhouse-client
    mkdir -p "$dir/clickhouse"
    if [ -f "$dir/clickhouse/shards" ] && [ "$(cat "$dir/clickhouse/shards")" != "$n" ]; then
        die "ClickHouse with $(cat "$dir/clickhouse/shards") shard(s) was made in $dir/clickhouse: stop it and remove that directory for $n"
    fi
    echo "$n" >"$dir/clickhouse/shards"
    for ((i = 1; i <= n; i++)); do
        shards+="<shard><replica><host>127.0.0.1</host><port>$(($(ch_http_port "$i") + 900))</port></replica></shard>"
    done
    for ((i = 1; i <= n; i++)); do
        local node=$dir/clickhouse/server$i http
        http=$(ch_http_port "$i")
        mkdir -p "$node/data" "$node/tmp" "$node/log"
        if alive "$node/pid"; then continue; fi
        listening "$http" && die "127.0.0.1:$http is taken by another program (set TRAWL_CLICKHOUSE_PORT)"
        # The old server's XML (root <yandex>, which current servers still read).
        cat >"$node/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$node/log/server.log</log><errorlog>$node/log/error.log</errorlog><console>0</console></logger>
  <http_port>$http</http_port>
  <tcp_port>$((http + 900))</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$node/data/</path>
  <tmp_path>$node/tmp/</tmp_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <remote_servers><trawl>$shards</trawl></remote_servers>
  <macros><shard>$i</shard><replica>1</replica></macros>
  <!-- librdkafka settings of Kafka-engine tables: a new consumer group reads a topic from its
       start, as trawl's consumers do (librdkafka's default is the end). -->
  <kafka><auto_offset_reset>smallest</auto_offset_reset></kafka>
</yandex>
EOF
        cat >"$node/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
        setsid clickhouse-server --config-file="$node/config.xml" >"$node/log/stdout.log" 2>&1 </dev/null &
        echo $! >"$node/pid"
    done
    for ((i = 1; i <= n; i++)); do
        local http j
        http=$(ch_http_port "$i")
        for ((j = 0; j < 600; j++)); do
            [ "$(curl -s "http://127.0.0.1:$http/ping" 2>/dev/null)" = "Ok." ] && break
            sleep 0.1
        done
        [ "$j" -lt 600 ] || { tail -20 "$dir/clickhouse/server$i/log/error.log" >&2 || true; die "ClickHouse server $i does not answer on $http"; }
    done
    say "ClickHouse $(curl -s "http://127.0.0.1:$(ch_http_port 1)/?query=SELECT%20version()"): $n server(s) in $dir/clickhouse"
    echo "http://127.0.0.1:$(ch_http_port 1)"
}

stop_clickhouse() {
    local only=$1 n i
    [ -f "$dir/clickhouse/shards" ] || { say "no ClickHouse in $dir/clickhouse"; return 0; }
    n=$(cat "$dir/clickhouse/shards")
    for ((i = 1; i <= n; i++)); do
        [ -n "$only" ] && [ "$only" != "$i" ] && continue
        stop_pid "$dir/clickhouse/server$i/pid"
    done
}

status() {
    local d
    for d in "$dir"/kafka/node* "$dir"/clickhouse/server*; do
        [ -d "$d" ] || continue
        if alive "$d/pid"; then echo "up    $d"; else echo "down  $d"; fi
    done
}

[ $# -ge 1 ] || usage 2
action=$1
shift
case $action in
    -h | --help) usage ;;
    status) status; exit 0 ;;
    start | stop) ;;
    *) die "unknown action '$action' (start, stop, status)" ;;
esac
[ $# -ge 1 ] || die "$action what? kafka or clickhouse"
service=$1
shift
count=""
node=""
while [ $# -gt 0 ]; do
    case $1 in
        --brokers | --shards) count=${2:?$1 needs a number}; shift ;;
        --node) node=${2:?--node needs a number}; shift ;;
        *) die "unknown argument '$1'" ;;
    esac
    shift
done
# Without --brokers/--shards, `start` brings back the cluster made before (one node at first).
made=$dir/$service/$([ "$service" = kafka ] && echo brokers || echo shards)
[ -n "$count" ] || count=$(cat "$made" 2>/dev/null || echo 1)
[[ $count =~ ^[1-9]$ ]] || die "between 1 and 9 nodes, not '$count'"
mkdir -p "$dir"
case $action/$service in
    start/kafka) start_kafka "$count" ;;
    stop/kafka) stop_kafka "$node" ;;
    start/clickhouse) start_clickhouse "$count" ;;
    stop/clickhouse) stop_clickhouse "$node" ;;
    *) die "unknown service '$service' (kafka, clickhouse)" ;;
esac
