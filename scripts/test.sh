#!/usr/bin/env bash
# The test command: installs what the tests need, then runs the whole suite.
#   scripts/test.sh                 everything (unit, real TensorFlow, real `pulumi preview`)
#   scripts/test.sh -m "not slow and not engine"   the fast unit tests only
# Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/bootstrap.sh
# The real Pulumi engine (CLI, language host, providers): found on PATH or built from Go modules
# into a cache outside the repo; the last line printed is the directory holding the binaries.
toolchain_bin="$(bash tools/pulumi-toolchain.sh | tail -n 1)"
export PATH="$toolchain_bin:$repo/.venv/bin:$PATH"
export REQUIRE_PULUMI_ENGINE=1   # preview tests fail, not skip, without the engine
exec "$repo/.venv/bin/python" -m pytest "$@"
