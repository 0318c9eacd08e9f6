"""checkov 3.3.30 and kube-score v1.20.0, the checkers platform teams run on what they deploy,
find nothing in any Kubernetes object the stack creates (marker ``checkers``), but what a
user's choice makes (render_manifests.CHOSEN_FINDINGS); and every suppression still suppresses
a finding.

The objects come from tools/render-manifests (the program under the mock engine, every
configuration of its CONFIGS), the checkers from tools/checkers/checkers.sh; what each finds is
tools/checkers/run_checkers.py's. What is right for this workload and still flagged is
suppressed by an annotation from infra/components/checker_suppressions.py (docs/checkers.md);
the checkers run a second time over the same files with those annotations taken off, and each
(checker, check id) the annotations name must be found there on an object that carries it,
else the suppression is stale.

Missing checkers skip the test with the command that installs them, except with
``REQUIRE_CHECKERS=1`` (scripts/test.sh, which installs them first in its build:checkers phase,
and so CI): then it fails.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from infra.components import checker_suppressions as suppress

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.checkers


def _load(path: Path) -> ModuleType:
    """A tool's module by its file (the tools' folders have hyphens: no package names)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


render_manifests = _load(REPO / "tools" / "render-manifests" / "render_manifests.py")
run_checkers = _load(REPO / "tools" / "checkers" / "run_checkers.py")


@pytest.fixture(scope="module")
def binaries() -> dict[str, Path]:
    """The cached checkers (checkers.sh --cached); skip, or fail with REQUIRE_CHECKERS=1."""
    try:
        return run_checkers.install(cached_only=True)
    except RuntimeError as error:
        message = f"{error}\n(install them: bash tools/checkers/checkers.sh)"
        if os.environ.get("REQUIRE_CHECKERS") == "1":
            pytest.fail(message + "; REQUIRE_CHECKERS=1")
        pytest.skip(message)


def chosen(finding) -> bool:
    """Whether ``finding`` is one that its configuration's user chose (CHOSEN_FINDINGS)."""
    config = finding.file.removesuffix(".yaml")
    return (finding.checker, finding.check_id) in render_manifests.CHOSEN_FINDINGS.get(config, {})


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """Every configuration of CONFIGS rendered once: (its directory, name -> file)."""
    directory = tmp_path_factory.mktemp("manifests")
    return directory, render_manifests.write(directory)


def test_the_checkers_find_nothing_in_any_configuration(binaries, rendered, capsys):
    directory, files = rendered
    assert sorted(files) == sorted(render_manifests.CONFIGS)
    kinds = {
        line.split(":", 1)[1].strip()
        for path in files.values()
        for line in path.read_text().splitlines()
        if line.startswith("kind:")
    }
    # Every kind the stack creates is checked.
    assert kinds == {
        "ConfigMap",
        "Deployment",
        "Job",
        "Namespace",
        "NetworkPolicy",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Role",
        "RoleBinding",
        "Secret",
        "Service",
        "ServiceAccount",
    }
    # The secret data source is in a Secret of its own, which the staging Job reads.
    secret_source = files["secret-data-source"].read_text()
    assert "name: mnist-data-source" in secret_source and "secretKeyRef:" in secret_source
    # The rendered Secret's value is redacted: neither the URL's key id nor its signature appears
    # (the word "Signature" does: the code ConfigMaps hold trainer.stage's presigned-URL rule).
    assert "LTAI5tExample" not in secret_source and "bWFkZS11cA" not in secret_source
    found = run_checkers.run(directory, binaries)
    # The counts go to the terminal, captured or not: CI's log shows them.
    with capsys.disabled():
        for checker, findings in found.items():
            print(f"\n{checker}: {len(findings)} findings over {len(files)} configurations", end="")
    every = [f for findings in found.values() for f in findings]
    listed = "\n".join(str(f) for f in every if not chosen(f))
    assert not listed, (
        "fix the objects, or where the finding is right for this workload add it with its reason to "
        f"infra/components/checker_suppressions.py and docs/checkers.md:\n{listed}"
    )
    # A chosen finding that is no longer found is a stale entry (or a configuration that no
    # longer makes what it is named for).
    seen = {(f.file.removesuffix(".yaml"), f.checker, f.check_id) for f in every}
    missing = [
        f"{config}: {checker} {check}"
        for config, pairs in render_manifests.CHOSEN_FINDINGS.items()
        for checker, check in pairs
        if (config, checker, check) not in seen
    ]
    assert not missing, f"render_manifests.CHOSEN_FINDINGS lists what the checkers no longer find: {missing}"
    # Each makes a finding on every object it is about, not on one by chance.
    about_namespace = {
        f"{d['kind']}.default.{d['metadata']['name']}"
        for d in documents(files["namespace-default"])
        if d["kind"] not in NOT_IN_NAMESPACE_CHECK
    }
    assert {f.object for f in every if f.check_id == "CKV_K8S_21"} == about_namespace
    templates = [d for d in documents(files["no-network-policy"]) if d["kind"] in ("Job", "Deployment")]
    assert sum(f.check_id == "pod-networkpolicy" for f in every) == len(templates)


#: The kinds of the stack's objects that checkov's CKV_K8S_21 (the default namespace) does not
#: check: the cluster-scoped PersistentVolume, and two kinds its check leaves out.
NOT_IN_NAMESPACE_CHECK = frozenset({"PersistentVolume", "PersistentVolumeClaim", "NetworkPolicy"})


def documents(path: Path) -> list[dict]:
    """The objects of a rendered manifest file."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_every_suppression_still_suppresses_a_finding(binaries, rendered, tmp_path):
    directory, files = rendered
    carried = run_checkers.strip_suppressions(directory, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.yaml")) == sorted(p.name for p in files.values())
    unsuppressed = [f for findings in run_checkers.run(tmp_path, binaries).values() for f in findings]
    idle = run_checkers.idle_suppressions(carried, unsuppressed)
    names: dict[tuple[str, str], list[str]] = {}
    for entry in suppress.SUPPRESSIONS:
        for checker, checks in (("checkov", entry.checkov), ("kube-score", entry.kube_score)):
            for check in checks:
                names.setdefault((checker, check), []).append(entry.name)
    stale = "\n".join(
        f"suppression {' or '.join(names.get(pair, ['(not in the table)']))}: {pair[0]} {pair[1]} on "
        + ", ".join(f"{kind}/{namespace}/{name} ({file})" for file, kind, namespace, name in keys)
        for pair, keys in idle.items()
    )
    assert not stale, (
        "these annotations suppress nothing: without them the checkers report no such finding on the "
        "objects that carry them. Narrow the entry's roles or only_if, or remove it, in "
        f"infra/components/checker_suppressions.py and docs/checkers.md:\n{stale}"
    )
    # Every entry of the table is on some object of some configuration, so each was checked.
    applied = {pair for pairs in carried.values() for pair in pairs}
    assert set(names) <= applied, f"no configuration carries: {sorted(set(names) - applied)}"
    assert applied <= set(names), f"annotations not in the table: {sorted(applied - set(names))}"
