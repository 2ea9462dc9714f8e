#!/usr/bin/env bash
# The Python package's tests (python/tests/, pytest): builds the wheel once from the checkout
# (`pip install ./python`: maturin from PyPI, the Rust extension compiled here, no prebuilt
# artifact) into a virtual environment under the target directory, with pyarrow, pandas,
# Polars and matplotlib, and runs the tests against the trawl binary `cargo test` built.
# Called by scripts/test.sh; alone: scripts/python-test.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
target=${CARGO_TARGET_DIR:-$PWD/target}
export CARGO_TARGET_DIR=$target
venv=$target/python-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py=$venv/bin/python
# The build backend runs the `maturin` executable: the environment's own.
export PATH="$venv/bin:$PATH"
# What the tests import, and the build backend (installed here so the build needs no isolated
# environment of its own each run).
"$py" -m pip install --quiet --disable-pip-version-check maturin pyarrow pandas polars matplotlib pytest
# The test build: the dev profile, in the workspace's target directory: the extension's
# dependencies (arrow, parquet, zstd, trawl's crates) are the ones `cargo test` built already,
# so only pyo3 and the extension compile (about 25 crates instead of 144 at opt-level 1, the
# largest part of this script's time). Users' `pip install ./python` builds release.
MATURIN_PEP517_ARGS="--profile dev" \
    "$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./python
bin=$target/debug/trawl
if [ ! -x "$bin" ]; then
    cargo build -p trawl-cli
fi
# From outside python/: its source tree (trawl/ without the extension) would shadow the
# installed package.
tests=$PWD/python/tests
cd "$target"
TRAWL_BIN=$bin "$py" -m pytest -q -p no:cacheprovider "$tests" "$@"
