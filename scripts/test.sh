#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, lints, docs, every test
# of the workspace, and the fuzz regression inputs replayed.
#
# Tests that need something the repository does not hold (the shared corpus, tshark, DuckDB)
# find it through trawl_testkit::needs: under CI (CI=true) a missing one FAILS the test;
# elsewhere the test is skipped and says so in the skip log, which this script prints at the
# end. The corpus is $TRAWL_CORPUS, else ../shared/corpus beside the repository;
# TRAWL_CORPUS=none skips the corpus tests on purpose (also under CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# The live capture tests make network namespaces and veth pairs: they need root.
if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the live capture tests need root (network namespaces); re-running under sudo"
    exec sudo --preserve-env=HOME,TRAWL_CORPUS,TRAWL_TSHARK_SWEEP,CARGO_TARGET_DIR,CI env "PATH=$PATH" "$0" "$@"
fi
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
export TRAWL_SKIP_LOG=${CARGO_TARGET_DIR:-$PWD/target}/trawl-skipped.txt
mkdir -p "$(dirname "$TRAWL_SKIP_LOG")"
: >"$TRAWL_SKIP_LOG"

# Printed at the end, pass or fail: what did not run, and why.
skip_summary() {
    if [ -s "$TRAWL_SKIP_LOG" ]; then
        echo "=================================================================="
        echo "test.sh: $(wc -l <"$TRAWL_SKIP_LOG") tests SKIPPED (under CI=true they fail):"
        sort "$TRAWL_SKIP_LOG"
        echo "=================================================================="
    else
        echo "test.sh: no test skipped"
    fi
}
trap skip_summary EXIT

case ${TRAWL_CORPUS:-} in
    none) echo "test.sh: TRAWL_CORPUS=none: the corpus tests are skipped" ;;
    "") echo "test.sh: corpus: ../shared/corpus (TRAWL_CORPUS unset)" ;;
    *) echo "test.sh: corpus: $TRAWL_CORPUS" ;;
esac
# Each step's wall time, printed as it ends: the suite must stay well inside CI's budget.
step() {
    local t0=$SECONDS
    "$@"
    echo "test.sh: [$((SECONDS - t0)) s] $*"
}
step cargo fmt --all -- --check
# Optional features the suite checks too: Kafka export (librdkafka built from source,
# docs/adr/0009-kafka-client.md), tested against real brokers that the tests start
# (scripts/services.sh); JA4S, behind a feature its licence asks for (crates/app/Cargo.toml).
# The tests build once, with them on: a second build of the CLI without them would double the
# suite's build time. Lints run on both: the default build is what `cargo install` gives users.
FEATURES=trawl-cli/kafka,trawl-app/ja4s
step cargo clippy --workspace --all-targets -- -D warnings
step cargo clippy --workspace --all-targets --features "$FEATURES" -- -D warnings
step env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
step cargo test --workspace --features "$FEATURES"
# The Debian package, from the binary the tests just built (scripts/deb-pack.py: dpkg-deb, no
# cargo-deb, no release build): installed with dpkg, its unit through systemd-analyze verify,
# its composition through `trawl check`, then purged (docs/deploy.md).
step scripts/deb.sh --dev --test
# The container image from the same binary (podman and runc installed when missing), run
# attached to a network namespace with NET_RAW alone: it captures a replay, and without the
# capability it is refused (docs/deploy.md).
step scripts/container.sh --bin "${CARGO_TARGET_DIR:-$PWD/target}/debug/trawl" --test
# The Python package (python/: pyo3 + maturin): its wheel built once, its pytest suite against
# the CLI built above (tables equal to the CLI's JSON, pandas/Polars, no copy, Ctrl-C).
step scripts/python-test.sh
# The fuzz targets live outside the workspace (fuzzing needs nightly): build them on stable and
# replay their regression inputs (fuzz/regressions/). The timed fuzz runs are scripts/fuzz.sh.
step scripts/fuzz.sh --replay
