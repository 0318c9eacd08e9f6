"""A volume the pods cannot write, on the real local cluster: the staging Job fails at once, and
`pulumi up` says whose directory it is and how to fix it; once fixed, the next plain `pulumi up`
stages again and trains to the end.

The volume is a hostPath directory left as a fresh disk, the kubelet (DirectoryOrCreate) or an
NFS server leaves one: root's, mode 0755. The stack cannot change that (hostPath has no mode
option, and a "restricted" pod cannot chown), so it fails fast with the message instead; the
two fixes the message names are each tested: the owner changed on the node, and the pods run
as the directory's owner (pods.runAsUser, pods.runAsGroup). NAS, where the stack can, gets a
mode on its PV (tests/infra/test_infra_volume.py); this kernel has no NFS.

(Not tests/cluster/test_stack_ownership.py, which is about Kubernetes objects two stacks share.)
"""

from __future__ import annotations

import calendar
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.preview.engine import PulumiProject

from .kube import REPO, Kube, job_condition
from .stack import PROJECT_FILES, TINY_RUN, engine_home, owner_config, pod_volume

pytestmark = pytest.mark.cluster

#: The smallest run (stack.py's TINY_RUN), each test in a namespace of its own.
TINY = TINY_RUN | {"createNamespace": "true"}
PREFIX = "mnist"
STAGING = f"{PREFIX}-stage-data"
TASKS = (f"{PREFIX}-chief-0", f"{PREFIX}-worker-0")
#: How long a staging Job may take to fail on an unwritable volume: its one pod starts and exits
#: (a few seconds here), and no retry follows.
FAIL_FAST_S = 60


@contextmanager
def _stack(
    local_cluster: Kube,
    tmp_path_factory: pytest.TempPathFactory,
    namespace: str,
    owner: tuple[int, int] | None,
) -> Iterator[tuple[PulumiProject, Path, Kube]]:
    """Stack ``dev`` of a project copy on a fresh volume (root's, or ``owner``'s), in ``namespace``;
    destroyed, and the volume removed, on exit."""
    toolchain, home = engine_home(tmp_path_factory)
    project = PulumiProject(
        REPO,
        tmp_path_factory.mktemp(namespace),
        toolchain,
        include=PROJECT_FILES,
        pulumi_home=home,
        venv=REPO / ".venv",
    )
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, namespace)
    volume = pod_volume(f"{namespace}-", owner)
    project.init_stack("dev")
    for key, value in {
        **TINY,
        "namespace": namespace,
        "kubeconfig": str(kube.kubeconfig),
        "hostPath.path": str(volume),
    }.items():
        project.set_config(key, value, path=True)
    try:
        yield project, volume, kube
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False, timeout=600)
        shutil.rmtree(volume, ignore_errors=True)


def _failed_up(project: PulumiProject, kube: Kube) -> str:
    """`pulumi up` on a volume the pods cannot write: it fails, the staging Job failed fast with
    its first pod, and no task Job exists. Returns the CLI's output."""
    started = time.monotonic()
    proc = project.pulumi("up", "--yes", "--skip-preview", check=False, timeout=900)
    took = time.monotonic() - started
    output = proc.stdout + proc.stderr
    print(f"\nthe failed `pulumi up` took {took:.0f} s and said:\n{output[-3000:]}")
    # (The engine interrupts the program once a resource fails, and the Python language host
    # prints that KeyboardInterrupt's traceback beside the Job's error: not the program's.)
    assert proc.returncode != 0, output
    job = kube.get("job", STAGING)
    failed = [
        c for c in job["status"].get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"
    ]
    assert failed and failed[0]["reason"] == "BackoffLimitExceeded", job["status"]
    created = _seconds(job["metadata"]["creationTimestamp"])
    assert _seconds(failed[0]["lastTransitionTime"]) - created < FAIL_FAST_S, job["status"]
    assert job["status"].get("failed") == 1, job["status"]  # no retry
    jobs = {j["metadata"]["name"] for j in kube.get("jobs")["items"]}
    assert STAGING in jobs and not jobs & set(TASKS), jobs  # training never started
    return output


def _seconds(stamp: str) -> float:
    """Seconds since the epoch of an API server timestamp (RFC 3339, UTC, whole seconds)."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _trains(project: PulumiProject, kube: Kube, volume: Path) -> dict:
    """A plain `pulumi up` that stages and trains to the end; the run's result.json."""
    failed_uid = kube.get("job", STAGING)["metadata"]["uid"]
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert kube.get("job", STAGING)["metadata"]["uid"] != failed_uid, "the failed staging Job was kept"
    assert job_condition(kube, STAGING) == "Complete"
    ends = {
        name: kube.wait_for(f"{name} to end", lambda n=name: job_condition(kube, n), timeout=600, every=2)
        for name in TASKS
    }
    assert ends == {name: "Complete" for name in TASKS}, ends
    run_dir = json.loads(project.pulumi("stack", "output", "--json").stdout)["runDir"]
    result = json.loads((volume / run_dir.removeprefix("/data/") / "result.json").read_text())
    assert result["epochs"] == 1, result
    return result


def _kept(project: PulumiProject, kube: Kube) -> None:
    """One more plain `pulumi up` leaves the complete staging Job and the finished run alone."""
    uids = {j["metadata"]["name"]: j["metadata"]["uid"] for j in kube.get("jobs")["items"]}
    project.pulumi("up", "--yes", "--skip-preview", timeout=600)
    assert {j["metadata"]["name"]: j["metadata"]["uid"] for j in kube.get("jobs")["items"]} == uids


def test_a_root_owned_volume_fails_fast_and_trains_once_chowned(local_cluster, tmp_path_factory) -> None:
    with _stack(local_cluster, tmp_path_factory, "tf-mnist-root-volume", None) as (project, volume, kube):
        output = _failed_up(project, kube)
        # The message names the directory, its owner and mode, the pods' uid, and the fixes.
        for said in (
            "--dest /data/mnist/",
            "cannot create it: /data belongs to uid 0, gid 0, mode 0755 "
            "(drwxr-xr-x), and this process runs as uid 10001, gid 10001",
            f"The volume at /data is hostPath.path {volume} on the node.",
            f"Fix: on the node, `chown -R 10001:10001 {volume}`",
            "`pulumi config set pods.runAsUser <its uid>`",
            "Then run `pulumi up` again: it replaces the failed staging Job.",
        ):
            assert said in output, (said, output)
        assert not (volume / "mnist").exists()

        os.chown(volume, 10001, 10001)  # the fix the message gives, on the node
        _trains(project, kube, volume)
        _kept(project, kube)


def test_pods_run_as_the_owner_of_a_users_directory(local_cluster, tmp_path_factory) -> None:
    owner = (2000, 3000)
    with _stack(local_cluster, tmp_path_factory, "tf-mnist-user-volume", owner) as (project, volume, kube):
        output = _failed_up(project, kube)
        assert (
            "/data belongs to uid 2000, gid 3000, mode 0755 (drwxr-xr-x), and this process runs as uid "
            "10001, gid 10001" in output
        ), output

        for key, value in owner_config(owner).items():
            project.set_config(key, value)
        _trains(project, kube, volume)
        owners = {(p.stat().st_uid, p.stat().st_gid) for p in volume.rglob("*")}
        assert owners == {owner}, owners
        # TensorBoard runs as that user too and serves (its Deployment became available in the up).
        tensorboard = kube.get("deployment", f"{PREFIX}-tensorboard")
        assert tensorboard["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 2000
        assert tensorboard["status"].get("availableReplicas") == 1, tensorboard["status"]
        _kept(project, kube)
