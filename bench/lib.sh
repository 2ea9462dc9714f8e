# Shared by trawl's bench scripts (sourced): the seed capture of the realistic traces.
# Needs WORK, BENCH, note and die defined by the caller.

# find_seed: prints the seed capture for the realistic traces (TRAWL_BENCH_SEED, the corpus copy,
# bench/work/seed.pcap, or rebuilt from an nDPI checkout in NDPI_DIR); prints nothing if none.
find_seed() {
    local c
    for c in "${TRAWL_BENCH_SEED:-}" /work/shared/corpus/bench/ndpi-default-ether-merged.pcap \
        "$WORK/seed.pcap"; do
        [ -n "$c" ] && [ -f "$c" ] && { echo "$c"; return; }
    done
    if [ -n "${NDPI_DIR:-}" ]; then
        command -v mergecap >/dev/null || die "NDPI_DIR given but mergecap (wireshark-common) missing"
        note "rebuilding the seed from $NDPI_DIR with mergecap"
        (cd "$NDPI_DIR/tests/cfgs/default/pcap" &&
            mergecap -F pcap -w "$WORK/seed.pcap.tmp" $(sed 's#^ndpi/default/##' "$BENCH/seed-sources.txt")) ||
            die "mergecap failed"
        mv "$WORK/seed.pcap.tmp" "$WORK/seed.pcap"
        echo "$WORK/seed.pcap"
    fi
}
