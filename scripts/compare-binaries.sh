#!/usr/bin/env bash
# Compares two trawl binaries on every capture of testdata/ and the shared corpus: standard
# output, standard error (run times masked) and exit code of each command that reads capture
# files, and for `trawl dump` every file of the packet store it wrote. Prints one line per difference and a count; exits 1 if anything differs.
#
#   scripts/compare-binaries.sh OLD_TRAWL NEW_TRAWL [STRIDE]
#
# STRIDE n compares every n-th capture only (default 1: all); ONLY=PREFIX only the commands
# whose label starts with PREFIX (ONLY=dump: trawl dump and the store it wrote). The corpus is found as the tests
# find it: $TRAWL_CORPUS, else ../shared/corpus next to the repository.
set -uo pipefail

old=$(realpath "$1")
new=$(realpath "$2")
stride=${3:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
corpus=${TRAWL_CORPUS:-$repo/../shared/corpus}
work=$(mktemp -d /tmp/compare-binaries.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Run times differ from run to run: masked in text and JSON summaries.
mask() {
    sed -E -e 's/ in [0-9.]+ s \([^)]*\)/ in <t> s (<rate>)/' \
        -e 's/"elapsed_s":[0-9.e+-]+/"elapsed_s":<t>/g' \
        -e 's/, [0-9.]+ s$/, <t> s/' \
        -e 's/"(busy_ns|elapsed_ns)":[0-9]+/"\1":<t>/g' \
        -e 's/"seconds":[0-9.e+-]+/"seconds":<t>/g'
}

# run NAME BIN ARGS...: output of one command into $work/NAME.{out,err,rc}
run() {
    local name=$1 bin=$2
    shift 2
    "$bin" "$@" >"$work/$name.out" 2>"$work/$name.err.raw"
    echo $? >"$work/$name.rc"
    mask <"$work/$name.err.raw" >"$work/$name.err"
    # Paths of the scratch directories differ between the two runs.
    sed -i -e "s#$work/[a-z]*/#<dir>/#g" "$work/$name.err" "$work/$name.out"
}

differ=0
compared=0
# With KEEP=DIR, both sides of each difference are kept there (N.old.WHAT, N.new.WHAT).
keep() {
    [ -n "${KEEP:-}" ] || return 0
    mkdir -p "$KEEP"
    cp "$work/old.$1" "$KEEP/$differ.old.$1"
    cp "$work/new.$1" "$KEEP/$differ.new.$1"
}
# IPFIX files differ in each message's export time (the second it was written): zeroed.
mask_ipfix() {
    python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = 0
while i + 16 <= len(b):
    n = int.from_bytes(b[i + 2:i + 4], "big")
    b[i + 4:i + 8] = bytes(4)
    i += max(n, 16)
sys.stdout.buffer.write(b)
' "$1"
}

# compare LABEL ARGS...: both binaries, same arguments ({D} = a fresh scratch directory, {F}
# = a file name prefix whose files, f.*, are compared too: exporters' files).
compare() {
    local label=$1
    shift
    # ONLY=PREFIX compares only the commands whose label starts with it (ONLY=dump).
    [[ -z "${ONLY:-}" || $label == "$ONLY"* ]] || return 0
    for side in old new; do
        local bin=$old
        [ $side = new ] && bin=$new
        rm -rf "$work/$side" && mkdir -p "$work/$side"
        local args=("${@//\{D\}/$work/$side/d}")
        args=("${args[@]//\{F\}/$work/$side/f}")
        run "$side" "$bin" "${args[@]}"
        if [ -n "${AFTER:-}" ]; then
            local after=("${AFTER_ARGS[@]//\{D\}/$work/$side/d}")
            run "$side.after" "$bin" "${after[@]}"
        fi
    done
    compared=$((compared + 1))
    local what f
    if [ -n "${STORE:-}" ]; then
        # The directory the command wrote ({D}): every file's name and contents.
        for side in old new; do
            (cd "$work/$side/d" 2>/dev/null && find . -type f | sort | xargs -r sha256sum) \
                >"$work/$side.store"
        done
        if ! cmp -s "$work/old.store" "$work/new.store"; then
            echo "DIFF store: $label"
            keep store
            differ=$((differ + 1))
        fi
    fi
    for f in "$work"/old/f.*; do
        [ -e "$f" ] || continue
        local other=$work/new/${f#"$work/old/"}
        if [[ $f == *.ipfix ]]; then
            mask_ipfix "$f" >"$work/old.masked"
            mask_ipfix "$other" >"$work/new.masked" 2>/dev/null
            f=$work/old.masked other=$work/new.masked
        fi
        if ! cmp -s "$f" "$other"; then
            echo "DIFF ${f##*/}: $label"
            differ=$((differ + 1))
        fi
    done
    for what in out err rc; do
        if ! cmp -s "$work/old.$what" "$work/new.$what"; then
            echo "DIFF $what: $label"
            keep "$what"
            differ=$((differ + 1))
        fi
        if [ -n "${AFTER:-}" ] && ! cmp -s "$work/old.after.$what" "$work/new.after.$what"; then
            echo "DIFF $what (after): $label"
            keep "after.$what"
            differ=$((differ + 1))
        fi
    done
}

mapfile -t files < <(
    { find "$repo/testdata" -type f; [ -d "$corpus" ] && find "$corpus" -type f; } |
        grep -E '\.(pcap|pcapng|cap|raw|hpcap)(\.gz|\.zst)?$' | sort
)
echo "compare-binaries: ${#files[@]} captures, stride $stride, $old vs $new"
i=0
for f in "${files[@]}"; do
    i=$((i + 1))
    [ $(((i - 1) % stride)) -eq 0 ] || continue
    rel=${f#"$repo/"}
    AFTER=
    compare "flows $rel" flows -r "$f" --summary json
    compare "flows csv $rel" flows -r "$f" --format csv
    compare "series $rel" series -r "$f" --summary json
    compare "flows payload 16 $rel" flows -r "$f" --payload-bytes 16 --summary json
    compare "flows payload 64 csv $rel" flows -r "$f" --payload-bytes 64 --format csv
    compare "flows export $rel" flows -r "$f" --export "ipfix:{F}.ipfix" --export "json:{F}.json" --summary json
    compare "detect synflood $rel" detect synflood -r "$f"
    compare "detect heavy-hitters $rel" detect heavy-hitters -r "$f"
    AFTER=1
    AFTER_ARGS=(query -d "{D}" --format csv --from 0 --to 9999999999 talk_conv -n 1000000)
    compare "ingest+query $rel" ingest -r "$f" -d "{D}" --summary json
    # Long spellings both binaries take (`packets -d` became `-r`, `query -f` `--format`).
    AFTER_ARGS=(packets --dir "{D}" -w - --summary none)
    STORE=1
    compare "dump+packets $rel" dump -r "$f" -w "{D}" --summary json
    compare "dump filtered+packets $rel" dump -r "$f" -w "{D}" -f tcp --iface eth9 --summary json
    STORE=
done
# Several files at once: merged by time (a filter compiled per file).
pair=(-r "$repo/testdata/oracle/443-chrome.pcap" -r "$repo/testdata/oracle/dns-wiresharkrepo.pcap")
AFTER=
compare "flows merged" flows "${pair[@]}" --summary json
compare "flows merged filtered" flows "${pair[@]}" -f "udp" --summary json
compare "series merged" series "${pair[@]}" --summary json
compare "flows merged payload export" flows "${pair[@]}" --payload-bytes 32 --export "ipfix:{F}.ipfix" --export json:- --summary json
compare "series merged export" series "${pair[@]}" --export "json:{F}.json" --summary json
# A failing exporter fails a file run (exit 1, each destination's error in the summary).
compare "flows export refused" flows "${pair[@]}" --export ipfix+tcp://127.0.0.1:1 --summary json
compare "flows export refused text" flows "${pair[@]}" --export ipfix+tcp://127.0.0.1:1 --export "json:{F}.json"
# trawl dump merges by time since issue 19 (it read files one after the other): differences
# here are that change (README, "Changes").
AFTER=1
AFTER_ARGS=(packets --dir "{D}" -w - --summary none)
STORE=1
compare "dump merged" dump "${pair[@]}" -w "{D}" --summary json
compare "dump merged filtered" dump "${pair[@]}" -w "{D}" -f udp --summary json
STORE=
echo "compare-binaries: $compared comparisons, $differ differences"
[ $differ -eq 0 ]
