#!/usr/bin/env bash
# Installs the system packages trawl needs to build (Debian/Ubuntu), skipping those present.
#   libpcap-dev: trawl-bpf compiles tcpdump filter expressions with libpcap.
set -euo pipefail

packages=(
    libpcap-dev
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all present (${packages[*]})"
    exit 0
fi

echo "deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
fi
"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
