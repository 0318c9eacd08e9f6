#!/usr/bin/env bash
# The test command: installs what the tests need, then runs the whole suite.
#   scripts/test.sh                 everything (unit, real TensorFlow, real `pulumi preview`,
#                                   the real local Kubernetes cluster and the stack on it)
#   scripts/test.sh -m "not slow and not engine and not cluster"   the fast unit tests only
# Extra arguments go to pytest. The run is a pipeline (tools/test-pipeline/pipeline.py): the
# Pulumi engine and, as root on Linux, the local cluster build from Go modules while the tests
# that need neither already run; the engine and cluster tests start once their builds are done.
# A selection (-m, -k, a path) runs one pytest after building only what it needs. The last line
# gives each phase's wall and CPU time.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
exec python3 tools/test-pipeline/pipeline.py "$@"
