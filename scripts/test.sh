#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, lints, docs, and every
# test of the workspace. The corpus sweeps read ../shared/corpus (or $TRAWL_CORPUS) when it is
# there and print "SKIPPED: corpus not found" otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
# The live capture tests make network namespaces and veth pairs: they need root.
if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the live capture tests need root (network namespaces); re-running under sudo"
    exec sudo --preserve-env=HOME,TRAWL_CORPUS,CARGO_TARGET_DIR env "PATH=$PATH" "$0" "$@"
fi
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
corpus=${TRAWL_CORPUS:-../shared/corpus}
corpus_note() {
    if [ -f "$corpus/MANIFEST.tsv" ]; then
        echo "test.sh: whole-corpus sweeps read $corpus"
    else
        echo "=================================================================="
        echo "test.sh: SKIPPED the whole-corpus sweeps: no corpus at $corpus"
        echo "         (set TRAWL_CORPUS=DIR to run them); everything else ran."
        echo "=================================================================="
    fi
}
corpus_note
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test --workspace
# The fuzz targets live outside the workspace (cargo-fuzz needs nightly): make sure they build.
(cd fuzz && cargo check --quiet --bins)
corpus_note
