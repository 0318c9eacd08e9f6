"""The real local cluster for tests marked ``cluster`` (tools/local-cluster, as root on Linux).

Each test module that needs it brings it up with the ``local_cluster`` fixture and takes it
down at the end. Where it cannot run (not root, not Linux) the tests skip with the reason,
except with REQUIRE_LOCAL_CLUSTER=1 (scripts/test.sh sets it when run as root): then they fail.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .kube import Kube, binaries_dir, cluster_unavailable, host_netns, host_sysctls, run_tool

#: One local cluster per machine (its state is /var/lib/tf-mnist-local-cluster): every test module
#: here holds this lock while it runs, so two test runs (two checkouts, a CI run beside a
#: developer's) take turns instead of failing on each other's cluster. Do not wrap pytest in
#: `flock` on this same file: the second open would wait for the first forever.
CLUSTER_LOCK = Path("/tmp/tf-mnist-local-cluster.lock")


#: The walk-through runs the page's `pulumi-offline-env.sh`, which finds or builds every provider,
#: alicloud too: scripts/test.sh builds that one beside the cluster tests, so the walk-through
#: goes last, once it is built, instead of waiting minutes for its lock.
LAST_MODULE = "tests/cluster/test_readme_walkthrough.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Moves the walk-through's tests after every other test, in their order."""
    items.sort(key=lambda item: item.nodeid.startswith(LAST_MODULE + "::"))


@pytest.fixture(scope="module", autouse=True)
def cluster_turn() -> Iterator[None]:
    """Holds CLUSTER_LOCK for the test module (waits, with a line, while another run holds it)."""
    with open(CLUSTER_LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {CLUSTER_LOCK}: another test run has the local cluster", file=sys.stderr)
            started = time.monotonic()
            fcntl.flock(lock, fcntl.LOCK_EX)
            print(f"got {CLUSTER_LOCK} after {time.monotonic() - started:.0f} s", file=sys.stderr)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Kube]:
    """A running cluster (images built and imported), torn down after the module's tests."""
    reason = cluster_unavailable()
    if reason:
        if os.environ.get("REQUIRE_LOCAL_CLUSTER") == "1":
            pytest.fail(reason + "; REQUIRE_LOCAL_CLUSTER=1")
        pytest.skip(reason)
    if run_tool("status").returncode != 3:
        pytest.fail(
            "a local cluster is already running; these tests start and stop their own: "
            "run tools/local-cluster/local-cluster down first"
        )
    bins = binaries_dir()
    before, netns_before = host_sysctls(), host_netns()
    try:
        up = run_tool("up")
        assert up.returncode == 0, f"local-cluster up failed:\n{up.stderr[-4000:]}"
        kube = Kube(
            bins / "kubectl",
            Path(up.stdout.strip().splitlines()[-1]),
            host_before=before,
            netns_before=netns_before,
        )
        images = run_tool("images")
        assert images.returncode == 0, f"local-cluster images failed:\n{images.stderr[-4000:]}"
        yield kube
    finally:
        run_tool("down")
