#!/usr/bin/env bash
# Builds trawl and runs it on the bundled sample capture (a 2.9 MB, 4,700-packet mix of HTTP,
# DNS, TLS, SSH, ... from PcapPlusPlus's examples, stored gzip-compressed) at every granularity:
# flow records as JSON lines into target/sample-flows.jsonl (first lines shown), per-second
# series into target/sample-series.csv, every packet into the packet store target/sample-packets
# (then its DNS packets back out as target/sample-dns.pcap), and the flow records into the flow
# database target/sample-db (then its top conversations); then the same capture through a
# composition of blocks (compositions/offline.toml). Summaries go to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -p trawl-cli
trawl="${CARGO_TARGET_DIR:-target}/release/trawl"
mkdir -p target
sample=testdata/oracle/many-protocols.pcap.gz
"$trawl" flows -r "$sample" -o target/sample-flows.jsonl
echo "--- first flow records (target/sample-flows.jsonl):"
head -n 3 target/sample-flows.jsonl
echo "--- per-second series (target/sample-series.csv):"
"$trawl" series -r "$sample" --format csv -o target/sample-series.csv
head -n 5 target/sample-series.csv
echo "--- packet store (target/sample-packets), DNS back out (target/sample-dns.pcap):"
rm -rf target/sample-packets target/sample-db
"$trawl" dump -r "$sample" -w target/sample-packets
"$trawl" packets -r target/sample-packets -f 'udp port 53' -w target/sample-dns.pcap
echo "--- flow database (target/sample-db), top conversations:"
"$trawl" ingest -r "$sample" --db target/sample-db -i sample --summary none
"$trawl" query -d target/sample-db talk_conv --limit 5
echo "--- the same through a composition of blocks (compositions/offline.toml, files in target/sample-comp):"
mkdir -p target/sample-comp
set_files=(--set "file.files=[\"$sample\"]"
    --set flows.path=target/sample-comp/flows.jsonl
    --set series.path=target/sample-comp/series.csv
    --set alarms.path=target/sample-comp/alarms.jsonl)
"$trawl" check -c compositions/offline.toml "${set_files[@]}"
"$trawl" run -c compositions/offline.toml "${set_files[@]}"
cmp target/sample-comp/flows.jsonl target/sample-flows.jsonl && echo "flow records: identical to trawl flows"
