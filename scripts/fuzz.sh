#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) with cargo-fuzz on nightly:
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# Targets: pcap_reader (any bytes through FileSource), decode (any frame through the decoder,
# both tunnel modes), bpf_filter (any program through validation and the interpreter),
# tpacket_block (any bytes as a TPACKET_V3 block through the live capture walk), packet_store
# (any bytes as a stored segment and its index: reading, index parsing, crash repair),
# flow_decoder (any bytes as a sequence of IPFIX / NetFlow v9 / v5 messages through the
# collector's decoder), query_syntax (any text as a `trawl query` condition: errors point inside
# it, what parses round-trips through its canonical form), composition (any text as a
# composition file through the checker: no panic, refusals name a problem, accepted plans are
# consistent), store_pages (any bytes as a column chunk through the flow store's direct page
# decoder, every column kind and codec: no panic, one value per row, indices inside the
# dictionary), flow_meter (packets built from the bytes, few hosts and ports, times that jump
# past 2^32 ns or go back, frames past 65535 bytes, through a small table with short timeouts:
# no panic or overflow, every packet counted in a flow is in exactly one record).
# Installs the nightly toolchain and cargo-fuzz when missing. Crashes land in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pcap_reader decode bpf_filter tpacket_block packet_store flow_decoder query_syntax composition store_pages flow_meter)
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
for t in "${targets[@]}"; do
    echo "fuzz: $t for ${seconds}s"
    (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048)
done
