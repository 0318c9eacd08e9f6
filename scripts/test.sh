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
# The real local cluster's binaries build from Go modules beside the Pulumi toolchain: on a cold
# machine the alicloud provider's compile keeps about one of the two cores busy for ~11 minutes,
# and the cluster's build uses the other. Warm, both are cache hits in about a second.
cluster_build_pid=""
if [[ "$(id -u)" == 0 && "$(uname -s)" == Linux ]]; then
  cluster_build_log="$(mktemp -t local-cluster-build.XXXXXX.log)"
  echo "test.sh: building the local cluster's binaries in the background (log: $cluster_build_log)" >&2
  # its own process group, so that the trap stops its go builds too
  setsid bash tools/local-cluster/build.sh >"$cluster_build_log" 2>&1 &
  cluster_build_pid=$!
  trap '[[ -z "$cluster_build_pid" ]] || kill -- -"$cluster_build_pid" 2>/dev/null || true' EXIT
fi
# The real Pulumi engine (CLI, language host, providers): found on PATH or built from Go modules
# into a cache outside the repo; the last line printed is the directory holding the binaries.
toolchain_bin="$(bash tools/pulumi-toolchain/pulumi-toolchain.sh | tail -n 1)"
export PATH="$toolchain_bin:$repo/.venv/bin:$PATH"
export REQUIRE_PULUMI_ENGINE=1   # preview tests fail, not skip, without the engine
if [[ -n "$cluster_build_pid" ]]; then
  # A failed build is not fatal here: the cluster tests' own `local-cluster up` runs it again
  # and fails them with its message.
  if ! wait "$cluster_build_pid"; then
    echo "test.sh: the local cluster's build failed; its last lines ($cluster_build_log):" >&2
    tail -n 20 "$cluster_build_log" >&2
  else
    rm -f "$cluster_build_log"
  fi
  cluster_build_pid=""
fi
# The real local cluster (tests/cluster, marker cluster) needs root on Linux; there, a cluster
# that cannot start fails the run instead of skipping (tools/local-cluster builds what it needs).
if [[ "$(id -u)" == 0 && "$(uname -s)" == Linux ]]; then export REQUIRE_LOCAL_CLUSTER=1; fi
exec "$repo/.venv/bin/python" -m pytest "$@"
