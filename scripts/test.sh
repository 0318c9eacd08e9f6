#!/usr/bin/env bash
# The test command: installs what the tests need, then runs the whole suite.
#   scripts/test.sh                 everything (unit, real TensorFlow, real `pulumi preview`,
#                                   the real local Kubernetes cluster and the stack on it)
#   scripts/test.sh -m "not slow and not engine and not cluster"   the fast unit tests only
# Extra arguments go to pytest. As root on Linux, the whole suite runs as two pytest processes
# side by side (-m cluster and -m "not cluster"; see below).
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
if [[ "$(id -u)" != 0 || "$(uname -s)" != Linux ]]; then
  exec "$repo/.venv/bin/python" -m pytest "$@"
fi
export REQUIRE_LOCAL_CLUSTER=1
# The whole suite (only options given, no -m, -k or paths): the cluster tests spend most of their
# time waiting for pods (load under 1 on 2 cores in a cold run), so they run in a second pytest
# beside the others, and the run takes about the longer of the two instead of their sum. Both
# must pass; each fails on its own when it collects nothing (pytest's exit 5).
selects=0
for arg in "$@"; do
  case "$arg" in
    -m*|-k*|--deselect*|--lf|--last-failed) selects=1 ;;
    -*) ;;
    *) selects=1 ;;  # a path or node id (or an option's separate value: then one pytest, as ever)
  esac
done
if [[ "$selects" == 1 ]]; then
  exec "$repo/.venv/bin/python" -m pytest "$@"
fi
cluster_log="$(mktemp -t tf-mnist-cluster-tests.XXXXXX.log)"
echo "test.sh: the cluster tests (-m cluster) run beside the others; their output follows theirs (live: $cluster_log)" >&2
# A background command of a script starts with SIGINT ignored; `trap -` gives it back, so that
# the SIGINT below reaches it. Its own session: a Ctrl-C reaches it only through that trap.
( trap - INT QUIT; exec setsid "$repo/.venv/bin/python" -m pytest -m cluster -p no:cacheprovider "$@" \
    >"$cluster_log" 2>&1 ) &
cluster_tests_pid=$!
# Ctrl-C (or SIGTERM) while the others run: they stop, and the cluster tests get SIGINT, so that
# their fixtures still take the local cluster down; the script then waits for them below. On any
# other way out, the EXIT trap does the same.
stop_cluster_tests() { kill -INT -- -"$cluster_tests_pid" 2>/dev/null || true; }
interrupted=0  # before the trap that sets it, so that a Ctrl-C in between is not forgotten
trap 'stop_cluster_tests; interrupted=1' INT TERM
trap 'stop_cluster_tests; wait "$cluster_tests_pid" 2>/dev/null || true' EXIT
others_rc=0
"$repo/.venv/bin/python" -m pytest -m "not cluster" "$@" || others_rc=$?
cluster_rc=0
wait "$cluster_tests_pid" || cluster_rc=$?
# A trapped signal ends `wait` early: wait again until their teardown is over.
while kill -0 "$cluster_tests_pid" 2>/dev/null; do wait "$cluster_tests_pid" || cluster_rc=$?; done
trap - EXIT
echo "==================== the cluster tests (-m cluster), run beside the others ===================="
cat "$cluster_log"
rm -f "$cluster_log"
echo "test.sh: pytest -m \"not cluster\" exited $others_rc, pytest -m cluster exited $cluster_rc" >&2
if [[ "$interrupted" == 1 ]]; then exit 130; fi
if [[ "$others_rc" != 0 ]]; then exit "$others_rc"; fi
exit "$cluster_rc"
