"""tools/test-pipeline/pipeline.py: which phase waits for which. No phase runs: the phases are
only built (for a selection, with the venv phase's run and the marker collection faked)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "tools" / "test-pipeline" / "pipeline.py"


@pytest.fixture(scope="module")
def pipeline():
    spec = importlib.util.spec_from_file_location("tf_mnist_test_pipeline", PIPELINE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def needs(phases) -> dict[str, list[str]]:
    return {p.name: list(p.needs) for p in phases}


def test_the_cluster_builds_after_the_kubernetes_provider(pipeline) -> None:
    """build:cluster reuses the packages build:engine compiled (one Go module for both)."""
    phases = needs(pipeline.build_phases(["-ra"], as_root=True))
    assert phases["build:cluster"] == ["build:engine"]
    assert phases["build:engine"] == ["venv"]
    assert phases["build:images"] == ["venv"]
    assert phases["tests:cluster-base"] == ["build:cluster", "build:images"]
    assert set(phases["tests:cluster"]) == {"build:engine", "build:cluster", "build:images"}
    assert phases["build:alicloud"] == ["build:engine"]


def test_the_builds_off_the_longest_chain_yield_to_it(pipeline) -> None:
    """build:alicloud starts with build:cluster, which the cluster tests wait for, and
    build:checkers feeds only its tests: both run below the chain (nice 5), and the tests phase
    below them (nice 10)."""
    phases = {p.name: p for p in pipeline.build_phases(["-ra"], as_root=True)}
    names = ("build:engine", "build:cluster", "build:alicloud", "build:checkers", "tests")
    assert [phases[n].nice for n in names] == [0, 0, 5, 5, 10]


def test_without_root_there_is_no_cluster_phase(pipeline) -> None:
    phases = needs(pipeline.build_phases(["-ra"], as_root=False))
    assert not [name for name in phases if "cluster" in name]
    assert phases["build:engine"] == ["venv"]


def test_a_selection_of_cluster_tests_builds_the_cluster_after_the_provider(pipeline, monkeypatch) -> None:
    class VenvRan:  # the venv phase, run first to collect the selection: passed
        def __init__(self, phases) -> None:
            assert [p.name for p in phases] == ["venv"]

        def run(self, summary: bool = True) -> int:
            return 0

    monkeypatch.setattr(pipeline, "Pipeline", VenvRan)
    monkeypatch.setattr(pipeline, "selected_markers", lambda args: {"cluster"})
    phases = {p.name: p for p in pipeline.build_phases(["-m", "cluster"], as_root=True)}
    assert phases["build:engine"].env["PULUMI_TOOLCHAIN_PROVIDERS"] == "kubernetes"
    assert list(phases["build:cluster"].needs) == ["build:engine"]
    assert set(phases["tests"].needs) == {"build:engine", "build:cluster", "build:images"}
