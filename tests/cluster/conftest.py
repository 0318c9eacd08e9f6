"""The real local cluster for tests marked ``cluster`` (tools/local-cluster, as root on Linux).

One cluster serves every test module of a pytest session: the ``local_cluster`` fixture brings
it up for the first module that asks (and again for a later one where a test took it down, as
test_local_cluster.py's last test does), and the session takes it down at its end. A cluster's
``up`` and image import cost minutes on a 2-core machine, once per session instead of once per
module; each module keeps to a namespace and a hostPath volume of its own and destroys its
stacks, so none sees another's objects. Where it cannot run (not root, not Linux) the tests skip
with the reason, except with REQUIRE_LOCAL_CLUSTER=1 (scripts/test.sh sets it when run as root):
then they fail.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .kube import Kube, cluster_unavailable
from .session_cluster import SessionCluster

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


@pytest.fixture(scope="session", autouse=True)
def cluster_turn() -> Iterator[None]:
    """Holds CLUSTER_LOCK for the session (waits, with a line, while another run holds it)."""
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


@pytest.fixture(scope="session")
def session_cluster() -> Iterator[SessionCluster]:
    """The session's cluster, taken down at the session's end."""
    cluster = SessionCluster()
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def local_cluster(session_cluster: SessionCluster) -> Kube:
    """A running cluster (images built and imported), shared by the session's modules."""
    reason = cluster_unavailable()
    if reason:
        if os.environ.get("REQUIRE_LOCAL_CLUSTER") == "1":
            pytest.fail(reason + "; REQUIRE_LOCAL_CLUSTER=1")
        pytest.skip(reason)
    return session_cluster.get()
