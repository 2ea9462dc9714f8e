#!/usr/bin/env bash
# Prepares the container image's root file system in target/container-root/ (the release
# binary, the shared libraries ldd names for it and their loader, /etc/trawl/trawl.toml, the
# store directories) and builds Containerfile from it with podman (or docker) when one is
# installed; then runs the image once (`trawl --version`, `trawl check` of its composition).
# Usage: scripts/container.sh [--no-build]   (--no-build: use the binary already built)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
target=${CARGO_TARGET_DIR:-$PWD/target}
[ "${1:-}" = --no-build ] || cargo build --release -p trawl-cli
bin=$target/release/trawl
root=target/container-root
rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/etc/trawl" "$root/var/lib/trawl" "$root/var/log/trawl" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$bin" "$root/usr/bin/trawl"
# Every library the binary loads, at the path the loader looks for it (and the loader itself).
ldd "$bin" | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
cp packaging/trawl.toml "$root/etc/trawl/trawl.toml"
echo "container.sh: root file system in $root ($(du -sh "$root" | cut -f1))"
engine=$(command -v podman || command -v docker || true)
if [ -z "$engine" ]; then
    echo "container.sh: neither podman nor docker is installed: image not built (docs/deploy.md)"
    exit 0
fi
"$engine" build -f Containerfile -t trawl "$root"
"$engine" run --rm --network none trawl --version
"$engine" run --rm --network none trawl check -c /etc/trawl/trawl.toml
echo "container.sh: image trawl built and run with $engine"
