# Shared by trawl's bench scripts (sourced): the seed capture of the realistic traces.
# Needs WORK, BENCH, note and die defined by the caller (and TRACEGEN for make_trace).

# find_seed: prints the seed capture for the realistic traces (TRAWL_BENCH_SEED, the corpus copy,
# bench/work/seed.pcap, or rebuilt from an nDPI checkout in NDPI_DIR); prints nothing if none.
find_seed() {
    local c
    # The corpus as the tests find it: $TRAWL_CORPUS, else ../shared/corpus beside the repository.
    for c in "${TRAWL_BENCH_SEED:-}" "${TRAWL_CORPUS:-$BENCH/../../shared/corpus}/bench/ndpi-default-ether-merged.pcap" \
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

# make_trace NAME MODE ARGS...: bench/work/NAME.pcap made by `tracegen MODE ARGS` (realistic
# traces get the seed capture), reused when the same arguments (and seed) made it; prints the
# path.
make_trace() {
    local name=$1 mode=$2 path=$WORK/$1.pcap want seed
    shift 2
    local args=("$@")
    want="generated_with=$mode $*"
    if [ "$mode" = realistic ]; then
        seed=$(find_seed)
        [ -n "$seed" ] || die "no seed capture: set TRAWL_BENCH_SEED=FILE (see bench/README.md)"
        args+=(--seed-pcap "$seed")
        want="$want seed_sha256=$(sha256sum "$seed" | cut -d' ' -f1)"
    fi
    if [ -f "$path" ] && [ -f "$path.stats" ] && grep -qxF "$want" "$path.stats"; then
        note "reusing $path"
    else
        note "generating $path: tracegen $mode $*"
        "$TRACEGEN" "$mode" "${args[@]}" -o "$path" >"$path.stats.tmp" || die "tracegen failed"
        echo "$want" >>"$path.stats.tmp"
        mv "$path.stats.tmp" "$path.stats"
    fi
    echo "$path"
}
