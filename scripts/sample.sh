#!/usr/bin/env bash
# Builds trawl and meters the bundled sample capture (a 2.9 MB, 4,700-packet mix of HTTP, DNS,
# TLS, SSH, ... from PcapPlusPlus's examples, stored gzip-compressed): flow records as JSON
# lines into target/sample-flows.jsonl (first lines shown), per-second series into
# target/sample-series.csv, and trawl's summary on standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -p trawl-cli
sample=testdata/oracle/many-protocols.pcap.gz
target/release/trawl flows -r "$sample" -o target/sample-flows.jsonl
echo "--- first flow records (target/sample-flows.jsonl):"
head -n 3 target/sample-flows.jsonl
target/release/trawl series -r "$sample" --format csv -o target/sample-series.csv
echo "--- per-second series (target/sample-series.csv):"
head -n 5 target/sample-series.csv
