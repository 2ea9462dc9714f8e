#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 20) with cargo-fuzz on nightly:
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh --replay        replay fuzz/regressions/ on stable (part of scripts/test.sh)
# Targets: pcap_reader (any bytes through FileSource), decode (any frame through the decoder,
# both tunnel modes), bpf_filter (any program through validation and the interpreter),
# tpacket_block (any bytes as a TPACKET_V3 block through the live capture walk), packet_store
# (any bytes as a stored segment and its index: reading, index parsing, crash repair),
# flow_decoder (any bytes as a sequence of IPFIX / NetFlow v9 / v5 messages through the
# collector's decoder), sflow (any bytes as an sFlow v5 datagram through the parser and the
# decoder: no panic, errors inside the datagram, no more records than raw headers, each scaled
# by a rate of at least 1), query_syntax (any text as a `trawl query` condition: errors point inside
# it, what parses round-trips through its canonical form), composition (any text as a
# composition file through the checker: no panic, refusals name a problem, accepted plans are
# consistent), store_pages (any bytes as a column chunk through the flow store's direct page
# decoder, every column kind and codec: no panic, one value per row, indices inside the
# dictionary), flow_meter (packets built from the bytes, few hosts and ports, times that jump
# past 2^32 ns or go back, frames past 65535 bytes, through a small table with short timeouts:
# no panic or overflow, every packet counted in a flow is in exactly one record).
# sip_message (any bytes as a SIP datagram through the parser, its SDP and a small call table),
# sdp_body (any bytes as an SDP body), rtp_stream (any bytes cut into RTP/RTCP datagrams at
# times that jump or go back, in batches through a small call table's prefetching path,
# `on_packets`, as `rtp_calls` feeds it).
# dns_message (any bytes as a DNS message over UDP and as a TCP stream through the framer and
# a small joiner: no panic, sections within their counts, names within their bound), tls_hello
# (any bytes as the start of a TCP direction, whole and in segments, and as a hello body: no
# panic, one answer, the same hello either way, fingerprints computable), http_stream (any
# bytes as a request and a response direction, whole and in segments: no panic, the same heads).
# anonymize_packet (any frame of any link type through `trawl anonymize`'s rewriter, payloads
# cut or not: no panic, frames not rewritten come back unchanged, none grows, deterministic).
# partial_decode (any bytes as a probe's answer to /api/v1/partial, half of them behind a valid
# header: no panic, inflation bounded by max_groups, what decodes re-encodes to the same groups
# and merges). tcp_reassembly (segments cut from the bytes at any sequence numbers, overlapping,
# retransmitted and out of order, through the bounded reassembler of the log blocks: no panic,
# memory within its caps, bytes delivered in order). stream_conns (packets between a few
# endpoints on ports 53/80/443, any flags and nearby sequence numbers, payloads starting as TLS,
# HTTP, DNS-over-TCP or anything, through `stream_log`'s shared connection table with every
# analyser on: no panic, connections and waiting bytes within their caps, nothing held after
# the end). tunnel_decode (any tunnel header and
# payload behind a valid Ethernet / IPv4 frame, by UDP port or GRE type: GTP-U, Geneve, Teredo,
# MPLS over UDP, VXLAN, ERSPAN I/II/III, WCCP, MPLS, Aruba 802.11, PPTP: no panic, a descended
# packet names the outer addresses and its tunnel type, any other keeps the outer key).
# app_classify (any bytes as the two
# directions' first payload bytes under TCP, UDP and another protocol, on ports the bytes
# choose: no panic, the same answer twice, the same label from the kept prefix alone).
#
# Every input that made a target fail (fuzz/artifacts/TARGET/{crash,oom,timeout,leak}-*) is
# copied into fuzz/regressions/TARGET/, to be committed with its fix: `--replay` runs each
# target once over its regression inputs, without nightly (the libFuzzer binaries built by
# stable cargo run given inputs; they just cannot fuzz), so a fixed crash stays fixed.
#
# Nightly and cargo-fuzz: installed when missing (rustup, cargo install). Where that cannot be
# done (no network), the script says so and exits 0, or 1 under CI (CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
targets_all=(pcap_reader decode bpf_filter tpacket_block packet_store flow_decoder sflow query_syntax composition store_pages flow_meter sip_message sdp_body rtp_stream dns_message tls_hello http_stream anonymize_packet partial_decode tcp_reassembly stream_conns tunnel_decode app_classify quic_initial x509_certificate)

in_ci() { [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; }

# unavailable WHAT: nightly fuzzing cannot run here; fail under CI, a loud note elsewhere.
unavailable() {
    echo "=================================================================="
    echo "fuzz.sh: cannot fuzz: $1"
    if in_ci; then
        echo "         (CI: this is a failure)"
        echo "=================================================================="
        exit 1
    fi
    echo "         SKIPPED the fuzz runs (the regression replay in scripts/test.sh still runs)"
    echo "=================================================================="
    exit 0
}

if [ "${1:-}" = --replay ]; then
    # The fuzz crate is outside the workspace; build its binaries with the stable toolchain, in
    # the workspace's target directory so that the trawl crates built for the tests are reused.
    CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-target}")
    export CARGO_TARGET_DIR
    (cd fuzz && cargo build --quiet --bins)
    bin=$CARGO_TARGET_DIR/debug
    for t in "${targets_all[@]}"; do
        dir=fuzz/regressions/$t
        [ -d "$dir" ] || { echo "fuzz.sh: $dir missing (every target has one)"; exit 1; }
        n=$(find "$dir" -type f ! -name README.md | wc -l)
        # -runs=0 on a directory: each input once, then exit; any failure exits non-zero.
        "$bin/$t" -runs=0 -artifact_prefix="/tmp/trawl-fuzz-replay-$t-" "$dir" >"/tmp/trawl-fuzz-replay-$t.log" 2>&1 || {
            cat "/tmp/trawl-fuzz-replay-$t.log"
            echo "fuzz.sh: $t fails on an input of $dir"
            exit 1
        }
        echo "fuzz.sh: $t: $n regression inputs replayed"
    done
    exit 0
fi

scripts/deps.sh
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal \
        || unavailable "no nightly toolchain, and rustup could not install one (offline?)"
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked \
        || unavailable "no cargo-fuzz, and cargo could not install it (offline?)"
fi
failed=()
for t in "${targets[@]}"; do
    echo "fuzz: $t for ${seconds}s"
    if ! (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048); then
        failed+=("$t")
    fi
    # Keep what failed as regression inputs (cargo-fuzz leaves them in fuzz/artifacts/).
    for f in fuzz/artifacts/"$t"/{crash,oom,timeout,leak}-*; do
        [ -e "$f" ] || continue
        mkdir -p "fuzz/regressions/$t"
        cp -n "$f" "fuzz/regressions/$t/"
        echo "fuzz: kept $f as fuzz/regressions/$t/$(basename "$f")"
    done
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (inputs in fuzz/regressions/; replay: scripts/fuzz.sh --replay)"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no failure"
