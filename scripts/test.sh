#!/usr/bin/env bash
# The test command: installs what the tests need, then runs the whole suite.
#   scripts/test.sh                 everything (unit, real TensorFlow, real `pulumi preview`,
#                                   the real local Kubernetes cluster and the stack on it)
#   scripts/test.sh -m "not slow and not engine and not cluster"   the fast unit tests only
# Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/bootstrap.sh
# The real Pulumi engine (CLI, language host, providers): found on PATH or built from Go modules
# into a cache outside the repo; the last line printed is the directory holding the binaries.
toolchain_bin="$(bash tools/pulumi-toolchain/pulumi-toolchain.sh | tail -n 1)"
export PATH="$toolchain_bin:$repo/.venv/bin:$PATH"
export REQUIRE_PULUMI_ENGINE=1   # preview tests fail, not skip, without the engine
# The real local cluster (tests/cluster, marker cluster) needs root on Linux; there, a cluster
# that cannot start fails the run instead of skipping (tools/local-cluster builds what it needs).
if [[ "$(id -u)" == 0 && "$(uname -s)" == Linux ]]; then export REQUIRE_LOCAL_CLUSTER=1; fi
exec "$repo/.venv/bin/python" -m pytest "$@"
