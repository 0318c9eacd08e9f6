"""Suite-wide hooks.

With ``TF_MNIST_NEEDS_FILE`` set (tools/test-pipeline/pipeline.py, for a selection of tests),
the markers ``engine``, ``cluster`` and ``checkers`` that the selected tests carry are written
to that file, one a line, so that the run builds the Pulumi engine, the local cluster or the
policy checkers only when a selected test needs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

#: The markers whose tests need something built first: the Pulumi engine, the local cluster,
#: the policy checkers.
_BUILD_MARKERS = ("engine", "cluster", "checkers")


# Hypothesis' timing checks measure the machine, not the code: the suite shares 2 cores with
# the engine and cluster builds, and one draw of a topology once took 32 s there (its regex
# strategies, built on first use, waited for a core), which failed the health check on a
# property that holds. So no deadline per example and no "input generation is slow" check;
# every other health check stays.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get("TF_MNIST_NEEDS_FILE")
    if not target:
        return
    found = {name for item in session.items for name in _BUILD_MARKERS if item.get_closest_marker(name)}
    Path(target).write_text("".join(f"{name}\n" for name in sorted(found)))
