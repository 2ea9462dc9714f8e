#!/usr/bin/env bash
# Installs what trawl needs to build and test on Debian/Ubuntu, skipping what is present:
#   build-essential, pkg-config: the C parts of the zstd and libpcap bindings.
#   libpcap-dev: trawl-bpf compiles tcpdump filter expressions with libpcap.
#   curl, ca-certificates: to fetch the Rust toolchain (rustup) when cargo is missing.
#   iproute2, tcpreplay: live capture tests make veth pairs in network namespaces and put
#     corpus traffic on them with tcpreplay (an independent sender).
#   tshark, nfdump, softflowd: the export tests check trawl's IPFIX and NetFlow v9 against
#     tshark's cflow dissector and nfdump's nfcapd collector, and trawl's collector against
#     softflowd's export (independent implementations, run live in the tests).
#   python3, python3-pip: the flow-store tests read a trawl database with DuckDB's Python
#     package (installed with pip below), as users of the Parquet files will; the
#     anonymization tests compare trawl-anon with PyPI's yacryptopan, and the API tests
#     parse /metrics with the Prometheus project's own parser (prometheus_client; both pip).
#   openssl: the API's TLS test makes a self-signed certificate.
#   sip-tester (SIPp): the VoIP test places real calls with RTP across a veth pair.
#   sox: the VoIP audio test decodes G.711 payloads with it (an independent decoder).
#   zlib1g-dev: librdkafka, built from source for the `kafka` feature (docs/adr/0009-kafka-client.md).
#   pmacct: the sFlow test replays captured datagrams to trawl's collector and to pmacct's
#     sfacctd and compares their totals; python's mmdb-writer and maxminddb (pip below):
#     the enrichment test writes MaxMind DB files and reads them back as the oracle.
#   kcat, protobuf-compiler: the Kafka tests consume trawl's topic with kcat and decode its
#     Protobuf messages with protoc, without trawl (the brokers: scripts/services.sh).
#   chromium, chromium-driver: the console's end-to-end test drives a headless Chromium over
#     WebDriver (chromedriver) through the operator's workflow (crates/cli/tests/it/console.rs).
# The flow tests need no tshark: its outputs there are committed as golden files.
set -euo pipefail

packages=(build-essential pkg-config libpcap-dev curl ca-certificates iproute2 tcpreplay tshark nfdump softflowd pmacct python3 python3-pip sip-tester sox zlib1g-dev kcat protobuf-compiler openssl chromium chromium-driver)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: system packages present (${packages[*]})"
else
    echo "deps: installing ${missing[*]}"
    "${sudo_cmd[@]}" apt-get update
    # tshark asks whether non-root users may capture: answer no, non-interactively.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | "${sudo_cmd[@]}" debconf-set-selections 2>/dev/null || true
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    echo "deps: installing the Rust toolchain with rustup (minimal profile, stable)"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
fi

if ! python3 -c 'import duckdb' 2>/dev/null; then
    echo "deps: installing the duckdb Python package (pip)"
    python3 -m pip install --quiet duckdb 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages duckdb \
        || echo "deps: WARNING: could not install duckdb; the DuckDB test will say SKIPPED"
fi

if ! python3 -c 'import yacryptopan' 2>/dev/null; then
    echo "deps: installing the yacryptopan Python package (pip)"
    python3 -m pip install --quiet yacryptopan 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages yacryptopan \
        || echo "deps: WARNING: could not install yacryptopan; trawl-anon's oracle test will fail"
fi

if ! python3 -c 'import chdb' 2>/dev/null; then
    echo "deps: installing the chdb Python package (pip): a current ClickHouse engine"
    python3 -m pip install --quiet chdb 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages chdb \
        || echo "deps: WARNING: could not install chdb; the ClickHouse SQL test will fail"
fi

if ! python3 -c 'import fastavro' 2>/dev/null; then
    echo "deps: installing the fastavro Python package (pip): Avro read without trawl"
    python3 -m pip install --quiet fastavro 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages fastavro \
        || echo "deps: WARNING: could not install fastavro; the Kafka Avro test will fail"
fi

if ! python3 -c 'import mmdb_writer, maxminddb' 2>/dev/null; then
    echo "deps: installing the mmdb-writer and maxminddb Python packages (pip)"
    python3 -m pip install --quiet mmdb-writer maxminddb 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages mmdb-writer maxminddb \
        || echo "deps: WARNING: could not install mmdb-writer/maxminddb; the enrichment test will fail"
fi

if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    echo "deps: installing the prometheus_client Python package (pip)"
    python3 -m pip install --quiet prometheus_client 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages prometheus_client \
        || echo "deps: WARNING: could not install prometheus_client; the API metrics test will fail"
fi

# GoFlow2 (the Kafka collector test and bench/kafka.sh compare trawl's collector with it):
# `go install`ed into $HOME/go/bin, where the test looks ($GOFLOW2 overrides), when Go is here.
goflow2=${GOFLOW2:-$HOME/go/bin/goflow2}
if [ ! -x "$goflow2" ]; then
    go_cmd=$(command -v go || true)
    [ -z "$go_cmd" ] && [ -x /usr/local/go/bin/go ] && go_cmd=/usr/local/go/bin/go
    if [ -n "$go_cmd" ]; then
        echo "deps: installing GoFlow2 (go install, into $HOME/go/bin)"
        GOBIN=$HOME/go/bin "$go_cmd" install github.com/netsampler/goflow2/v2/cmd/goflow2@v2.2.3 \
            || GOBIN=$HOME/go/bin "$go_cmd" install github.com/netsampler/goflow2/v2/cmd/goflow2@latest \
            || echo "deps: WARNING: could not install GoFlow2; the GoFlow2 Kafka test will fail"
    else
        echo "deps: WARNING: no Go toolchain; the GoFlow2 Kafka test needs ~/go/bin/goflow2 (go install github.com/netsampler/goflow2/v2/cmd/goflow2@latest)"
    fi
fi
