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

#: The markers whose tests need something built first: the Pulumi engine, the local cluster,
#: the policy checkers.
_BUILD_MARKERS = ("engine", "cluster", "checkers")


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get("TF_MNIST_NEEDS_FILE")
    if not target:
        return
    found = {name for item in session.items for name in _BUILD_MARKERS if item.get_closest_marker(name)}
    Path(target).write_text("".join(f"{name}\n" for name in sorted(found)))
