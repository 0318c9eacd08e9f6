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


def test_the_engine_builds_after_the_cluster_while_the_clusters_own_tests_run(pipeline) -> None:
    """build:engine reuses the packages build:cluster compiled (one Go module for both) and
    starts once it has ended, passed or not; the cluster's own tests need no engine."""
    phases = {p.name: p for p in pipeline.build_phases(["-ra"], as_root=True)}
    wanted = {
        "build:cluster": ["venv"],
        "build:engine": ["venv"],
        "build:images": ["venv"],
        "build:wheels": ["venv"],
        "tests:cluster-base": ["build:cluster", "build:images"],
        "build:alicloud": ["build:engine"],
    }
    assert {name: list(phases[name].needs) for name in wanted} == wanted
    assert list(phases["build:engine"].after) == ["build:cluster"]
    assert set(phases["tests:cluster"].needs) == {"build:engine", "build:cluster", "build:images"}
    assert list(phases["tests:cluster"].after) == ["build:wheels"]


def test_the_builds_off_the_longest_chain_yield_to_it(pipeline) -> None:
    """build:alicloud and build:checkers feed only their tests and build:wheels mostly
    downloads: they run below the chain (nice 5), and the tests phase below them (nice 10)."""
    phases = {p.name: p for p in pipeline.build_phases(["-ra"], as_root=True)}
    names = ("build:engine", "build:cluster", "build:alicloud", "build:wheels", "build:checkers", "tests")
    assert [phases[n].nice for n in names] == [0, 0, 5, 5, 5, 10]


def test_a_phase_after_another_starts_once_it_ended_even_failed(pipeline, tmp_path) -> None:
    """``after`` orders two phases without making one need the other: the second runs after
    the first has failed, and does not start before it ends."""
    marks = tmp_path / "order"
    first = pipeline.Phase("first", ["sh", "-c", f"sleep 0.5; echo first >> {marks}; exit 3"])
    second = pipeline.Phase("second", ["sh", "-c", f"echo second >> {marks}"], after=["first"])
    assert pipeline.Pipeline([first, second]).run(summary=False) == 1
    assert marks.read_text().split() == ["first", "second"]
    assert (first.rc, second.rc) == (3, 0)


def test_without_root_there_is_no_cluster_phase(pipeline) -> None:
    phases = needs(pipeline.build_phases(["-ra"], as_root=False))
    assert not [name for name in phases if "cluster" in name or "wheels" in name]
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
