"""The real local cluster for tests marked ``cluster`` (tools/local-cluster, as root on Linux).

Each test module that needs it brings it up with the ``local_cluster`` fixture and takes it
down at the end. Where it cannot run (not root, not Linux) the tests skip with the reason,
except with REQUIRE_LOCAL_CLUSTER=1 (scripts/test.sh sets it when run as root): then they fail.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from pathlib import Path

from .kube import Kube, binaries_dir, cluster_unavailable, host_netns, host_sysctls, run_tool


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Kube]:
    """A running cluster (images built and imported), torn down after the module's tests."""
    reason = cluster_unavailable()
    if reason:
        if os.environ.get("REQUIRE_LOCAL_CLUSTER") == "1":
            pytest.fail(reason + "; REQUIRE_LOCAL_CLUSTER=1")
        pytest.skip(reason)
    if run_tool("status").returncode != 3:
        pytest.fail("a local cluster is already running; these tests start and stop their own: "
                    "run tools/local-cluster/local-cluster down first")
    bins = binaries_dir()
    before, netns_before = host_sysctls(), host_netns()
    try:
        up = run_tool("up")
        assert up.returncode == 0, f"local-cluster up failed:\n{up.stderr[-4000:]}"
        kube = Kube(bins / "kubectl", Path(up.stdout.strip().splitlines()[-1]), host_before=before,
                    netns_before=netns_before)
        images = run_tool("images")
        assert images.returncode == 0, f"local-cluster images failed:\n{images.stderr[-4000:]}"
        yield kube
    finally:
        run_tool("down")
