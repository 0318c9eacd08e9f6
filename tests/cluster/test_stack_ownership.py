"""Two stacks on one real local cluster: the second never takes over the first one's objects.

Stack ``dev`` (backend A) deploys a tiny run (chief + 1 worker, 1 epoch of the 10,000-digit
sample) into its own namespace on a hostPath volume. Then, in another file backend B, a
``dev`` stack (the same tf-mnist.io/stack label) and a ``second`` stack, both with the same
namePrefix and namespace, are refused by preview and up before they change anything, with an
error naming the objects, their owner and the key to change; the first stack's objects keep
their uids and its run finishes. With namePrefix ``other`` the second stack deploys beside the
first, on the same volume, and both runs finish with their own checkpoints.

Reuses test_stack_on_cluster's way of bringing a stack up (a project copy driven by the real CLI
and kubernetes provider, in kubeconfig mode).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.preview.engine import PulumiProject

from .kube import Kube, job_condition
from .stack import TINY_RUN, VOLUME_OWNER, engine_home, owner_config, pod_volume

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.dev.yaml", "infra", "trainer", "docker")
NAMESPACE = "tf-mnist-owners"
PREFIX = "mnist"
TASKS = ("chief-0", "worker-0")
#: The smallest run (stack.py's TINY_RUN) in this test's namespace, its pods running as the owner
#: of the shared volume (VOLUME_OWNER).
TINY = TINY_RUN | {"namespace": NAMESPACE, **owner_config()}


def _stack(project: PulumiProject, name: str, kube: Kube, volume: Path, **config: str) -> None:
    """Create stack ``name`` in ``project`` (its config the committed dev file's) set up for here."""
    if name != "dev":
        shutil.copy(REPO / "Pulumi.dev.yaml", project.dir / f"Pulumi.{name}.yaml")
    project.init_stack(name)
    for key, value in {
        **TINY,
        "kubeconfig": str(kube.kubeconfig),
        "hostPath.path": str(volume),
        **config,
    }.items():
        project.set_config(key, value, path=True)


def _project(toolchain, home: Path, workdir: Path) -> PulumiProject:
    return PulumiProject(
        REPO, workdir, toolchain, include=PROJECT_FILES, pulumi_home=home, venv=REPO / ".venv"
    )


@pytest.fixture(scope="module")
def stacks(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PulumiProject, PulumiProject, Path, Kube]]:
    """Backend A with stack dev deployed; backend B (no stack yet); the shared volume; kubectl."""
    toolchain, home = engine_home(tmp_path_factory)
    first = _project(toolchain, home, tmp_path_factory.mktemp("backend-a"))
    second = _project(toolchain, home, tmp_path_factory.mktemp("backend-b"))
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)
    volume = pod_volume("tf-mnist-owners-volume-", VOLUME_OWNER)
    _stack(first, "dev", kube, volume, createNamespace="true")
    try:
        yield first, second, volume, kube
    finally:
        for project in (second, first):  # the first stack owns the namespace: it goes last
            project.pulumi("destroy", "--yes", "--skip-preview", check=False, timeout=600)
        shutil.rmtree(volume, ignore_errors=True)


def _uids(project: PulumiProject, kube: Kube) -> dict[str, str]:
    """'Kind namespace/name' -> the live uid, for every Kubernetes object in the stack's state."""
    state = json.loads(project.pulumi("stack", "export").stdout)
    uids = {}
    for r in state["deployment"]["resources"]:
        if not r["type"].startswith("kubernetes:"):
            continue
        meta, kind = r["outputs"]["metadata"], r["outputs"]["kind"]
        args = ["get", kind, meta["name"], "-o", "jsonpath={.metadata.uid}"]
        live = kube.run(*args, *(["-n", meta["namespace"]] if meta.get("namespace") else []), check=False)
        assert live.returncode == 0, f"{kind} {meta['name']}: {live.stderr}"
        uids[f"{kind} {meta.get('namespace', '')}/{meta['name']}"] = live.stdout
    return uids


def _wait_for_run(kube: Kube, prefix: str) -> dict[str, str]:
    names = [f"{prefix}-{t}" for t in TASKS]

    def outcomes() -> dict[str, str] | None:
        found = {n: job_condition(kube, n) for n in names}
        return found if all(found.values()) else None

    return kube.wait_for(f"{names} to end", outcomes, timeout=600, every=2)


def _run_dir(project: PulumiProject, volume: Path) -> Path:
    run_dir = json.loads(project.pulumi("stack", "output", "--json").stdout)["runDir"]
    assert run_dir.startswith("/data/"), run_dir
    return volume / run_dir[len("/data/") :]


def _refused(proc, *lines: str) -> str:
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "Traceback" not in output, output
    for line in lines:
        assert line in output, output
    return output


def test_the_same_prefix_is_refused_and_another_prefix_trains_beside_it(stacks) -> None:
    first, second, volume, kube = stacks
    first.pulumi("up", "--yes", "--skip-preview", timeout=900)
    before = _uids(first, kube)
    kinds = sorted(key.split()[0] for key in before)
    # The run's objects, the run monitor's ServiceAccount, Role, RoleBinding, ConfigMap, Job,
    # and the run's four NetworkPolicies.
    assert kinds == sorted(
        [
            "Namespace",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "ConfigMap",
            "ConfigMap",
            "Job",
            "Job",
            "Job",
            "Service",
            "Service",
            "Service",
            "Deployment",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Job",
            "NetworkPolicy",
            "NetworkPolicy",
            "NetworkPolicy",
            "NetworkPolicy",
        ]
    ), before
    first_run_id = json.loads(first.pulumi("stack", "output", "--json").stdout)["runId"]
    config_map = f"ConfigMap {NAMESPACE}/{PREFIX}-run"
    fix = (
        "`pulumi config set namePrefix <another prefix>` or `pulumi config set namespace <another namespace>`"
    )

    # A stack of the same name in another backend carries the same label: its state tells it apart.
    _stack(second, "dev", kube, volume)
    _refused(
        second.pulumi("up", "--yes", "--skip-preview", check=False, timeout=600),
        "Kubernetes objects that stack dev would create already exist and are not this stack's; "
        "nothing was deployed:",
        f"  {config_map}: labelled as this stack's (tf-mnist.io/stack=organization.tf-mnist.dev) but not in "
        "this stack's state",
        fix,
    )

    _stack(second, "second", kube, volume)
    owner = f"  {config_map}: created by stack organization.tf-mnist.dev (label tf-mnist.io/stack)"
    _refused(second.pulumi("preview", check=False, timeout=600), owner, fix)
    refused = _refused(second.pulumi("up", "--yes", "--skip-preview", check=False, timeout=600), owner, fix)
    lines = refused.splitlines()
    start = next(i for i, line in enumerate(lines) if "already exist" in line)
    end = next(i for i, line in enumerate(lines) if "names of its own" in line)
    print("\nthe second stack's up said:\n" + "\n".join(lines[start : end + 1]))
    assert f"  Job {NAMESPACE}/{PREFIX}-chief-0: created by stack organization.tf-mnist.dev" in refused
    assert "PersistentVolume mnist-data-" in refused, refused  # the cluster-scoped one too
    assert _uids(first, kube) == before
    state = json.loads(second.pulumi("stack", "export").stdout)["deployment"].get("resources") or []
    assert [r["type"] for r in state if r["type"].startswith("kubernetes:")] == [], state

    # The first stack still owns its objects: an update of it checks them and passes.
    no_op = first.pulumi("preview", "--expect-no-changes", check=False, timeout=600)
    assert no_op.returncode == 0, no_op.stdout + no_op.stderr

    second.set_config("namePrefix", "other")
    second.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _wait_for_run(kube, PREFIX) == {f"{PREFIX}-{t}": "Complete" for t in TASKS}
    assert _wait_for_run(kube, "other") == {f"other-{t}": "Complete" for t in TASKS}
    assert _uids(first, kube) == before
    assert json.loads(first.pulumi("stack", "output", "--json").stdout)["runId"] == first_run_id
    runs = {name: _run_dir(project, volume) for name, project in (("dev", first), ("second", second))}
    assert runs["dev"].parent == volume / "runs" / f"dev-{NAMESPACE}-{PREFIX}", runs
    assert runs["second"].parent == volume / "runs" / f"second-{NAMESPACE}-other", runs
    for name, run_dir in runs.items():
        checkpoints = run_dir / "checkpoints"
        assert (checkpoints / "checkpoint").is_file() and list(checkpoints.glob("ckpt-*.index")), (
            name,
            sorted(str(p.relative_to(volume)) for p in run_dir.rglob("*")),
        )
        assert json.loads((run_dir / "result.json").read_text())["epochs"] == 1, name
