#!/usr/bin/env bash
# Prepares the container image's root file system in target/container-root/ (the binary, the
# shared libraries ldd names for it and their loader, /etc/trawl/trawl.toml, the store
# directories) and builds Containerfile from it with podman (installed with apt-get when
# missing; no registry is needed: the image is FROM scratch), then runs the image once
# (`trawl --version`, `trawl check` of its composition).
#
# With --test (root), it also captures as a container would be deployed (docs/deploy.md): a
# veth pair whose one end is in a network namespace, the container attached to that namespace
# (`--network ns:/run/netns/NAME`) with every capability dropped but NET_RAW, `trawl run` on
# the namespace's end while tcpreplay sends a capture into it from the host's end: every packet
# sent must be counted. Then the same run without NET_RAW must be refused.
#
# Usage: scripts/container.sh [--no-build | --bin PATH] [--test]
#   (default: cargo build --release; --no-build: the release binary already built;
#    --bin PATH: that binary, stripped on the way, e.g. the suite's target/debug/trawl)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
target=${CARGO_TARGET_DIR:-$PWD/target}
bin=$target/release/trawl
build=true
run_test=false
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) build=false ;;
        --bin) bin=$2; build=false; shift ;;
        --test) run_test=true ;;
        *) echo "usage: scripts/container.sh [--no-build | --bin PATH] [--test]" >&2; exit 2 ;;
    esac
    shift
done
$build && cargo build --release -p trawl-cli
root=target/container-root
rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/etc/trawl" "$root/var/lib/trawl" "$root/var/log/trawl" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$bin" "$root/usr/bin/trawl"
# A no-op on the release binary (stripped already); a debug binary loses its debug info.
strip --strip-unneeded "$root/usr/bin/trawl"
# Every library the binary loads, at the path the loader looks for it (and the loader itself).
ldd "$bin" | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
cp packaging/trawl.toml "$root/etc/trawl/trawl.toml"
echo "container.sh: root file system in $root ($(du -sh "$root" | cut -f1))"

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
    echo "container.sh: installing podman and runc"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc >/dev/null
fi
# runc, not Debian's default crun: crun refuses a machine whose cgroups are in hybrid mode (v1
# controllers beside a v2 hierarchy), as the machines this was written on are.
podman=(podman --runtime runc)
# The limits podman asks for by default (1M files) exceed what a container or sandbox that
# runs the build may grant: ask for what trawl needs, within this shell's hard limit.
nofile=$(ulimit -Hn)
if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)
"${podman[@]}" build -q -f Containerfile -t trawl "$root" >/dev/null
# The image this replaced (66 MB each build) goes.
"${podman[@]}" image prune -f >/dev/null
"${podman[@]}" run --rm "${limits[@]}" --network none trawl --version
"${podman[@]}" run --rm "${limits[@]}" --network none trawl check -c /etc/trawl/trawl.toml >/dev/null
echo "container.sh: image trawl built with $(podman --version) (runc), runs, its composition checks"
$run_test || exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "container.sh: --test makes a network namespace and a veth pair: run as root" >&2
    exit 2
fi
fail() { echo "container.sh: FAILED: $*" >&2; exit 1; }
ns=trawl-ctr-$$
host=ctrh$$
peer=ctrc$$
work=$(mktemp -d)
cleanup() {
    ip link del "$host" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$host" type veth peer name "$peer"
ip link set "$peer" netns "$ns"
# No IPv6 on the pair: router solicitations would be captured besides the replay.
sysctl -qw "net.ipv6.conf.$host.disable_ipv6=1"
ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$peer.disable_ipv6=1"
ip link set "$host" up
ip netns exec "$ns" ip link set "$peer" up

# run CAPS...: trawl run on the namespace's end in the container, with these capabilities.
run() {
    local caps=()
    for c in "$@"; do caps+=(--cap-add "$c"); done
    "${podman[@]}" run --rm "${limits[@]}" --network "ns:/run/netns/$ns" --cap-drop all "${caps[@]}" trawl \
        run -i "$peer" --no-ring --duration 3s --stats-interval 200ms --summary json
}
run NET_RAW >"$work/out" 2>"$work/err" &
pid=$!
# Capturing once the first status line is out (the socket is open by then).
for _ in $(seq 100); do
    grep -q packets "$work/err" 2>/dev/null && break
    sleep 0.1
done
sent=$(tcpreplay -i "$host" --topspeed testdata/pcaps/android.pcap 2>&1 |
    awk '/Actual:/{print $2; exit}')
wait "$pid" || { cat "$work/err" >&2; fail "trawl run in the container failed"; }
got=$(tail -1 "$work/err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["packets"])')
[ -n "$sent" ] && [ "$got" = "$sent" ] || fail "sent $sent packets, trawl in the container counted $got"
echo "container.sh: trawl in the container (NET_RAW only, attached to namespace $ns) captured $got of $sent packets"

if run >"$work/out" 2>"$work/err"; then
    fail "trawl captured without NET_RAW"
fi
grep -qE "CAP_NET_RAW|ermission" "$work/err" || { cat "$work/err" >&2; fail "refused, but not for the capability"; }
echo "container.sh: without NET_RAW it is refused: $(grep -m1 -E 'CAP_NET_RAW|ermission' "$work/err")"
echo "container.sh: 2 passed, 0 failed"
