#!/usr/bin/env bash
# Two trawl binaries on the same command, run alternately (old, new, old, new, ...), each run's
# CPU time (user + system) from /usr/bin/time; prints every run, the medians and the ratio
# new/old of the medians. Alternating spreads the machine's drift over both binaries; the ratio
# is what to read, not the seconds.
#
#   bench/ab.sh [--runs N] OLD_TRAWL NEW_TRAWL -- ARGS...
#
# e.g. bench/ab.sh --runs 5 old/trawl target/release/trawl -- flows -r bench/work/b.pcap \
#          --format csv -o /dev/null --summary none --progress never
set -euo pipefail

runs=5
if [ "${1:-}" = --runs ]; then runs=$2; shift 2; fi
[ $# -ge 3 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 2
[ "$1" = -- ] || { echo "ab.sh: expected -- before the arguments" >&2; exit 2; }
shift
for b in "$old" "$new"; do [ -x "$b" ] || { echo "ab.sh: $b is not executable" >&2; exit 2; }; done

out=$(mktemp)
trap 'rm -f "$out"' EXIT
declare -a cpu_old cpu_new
for ((i = 1; i <= runs; i++)); do
    for which in old new; do
        bin=$old
        [ $which = new ] && bin=$new
        /usr/bin/time -f "%U %S" -o "$out" "$bin" "$@" >/dev/null 2>/dev/null ||
            { echo "ab.sh: $which binary failed: $bin $*" >&2; exit 1; }
        read -r user sys <"$out"
        total=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')
        printf '%s run %d: %s s CPU (user %s + sys %s)\n' "$which" "$i" "$total" "$user" "$sys"
        if [ $which = old ]; then cpu_old+=("$total"); else cpu_new+=("$total"); fi
    done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mo=$(median "${cpu_old[@]}")
mn=$(median "${cpu_new[@]}")
printf 'median CPU s: old %s, new %s; ratio new/old %s (load %s)\n' "$mo" "$mn" \
    "$(awk -v n="$mn" -v o="$mo" 'BEGIN {printf "%.3f", n / o}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
