"""job.waitForChief on the real local cluster: `pulumi up` waits until the chief's Job ends,
succeeds with a chief that succeeded, and fails with one that exits for good (exit 3, bad data)
as soon as its Job has failed, printing the Job's reason and what the exit code means
(infra/components/chief_await.py). An up that changes nothing then only warns, and `pulumi
destroy --run-program` (the README's teardown, which runs the program too) tears the stack down.

One stack of the smallest run (stack.py's TINY_RUN) in a namespace of its own; the tests run in
file order and share it. The second run's chief meets bad data: each run's staging Job verifies
the staged files (and makes the run's directory), so the test spoils one staged file on the
volume (as root, on the host) once the second run's staging Job has completed, before that run's
chief, which Pulumi creates only then, has started.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.preview.engine import PulumiProject

from .kube import Kube, job_condition
from .stack import TINY_RUN, on_volume, stack_on_cluster

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-wait"
PREFIX = "mnist"
CHIEF = f"{PREFIX}-chief-0"
STAGING = f"{PREFIX}-stage-data"
#: `pulumi up` waits for the chief, for at most an hour: far more than a failure may take.
CONFIG = TINY_RUN | {
    "createNamespace": "true",
    "namespace": NAMESPACE,
    "job.waitForChief": "true",
    "job.waitTimeoutMinutes": "60",
}
#: The staged file the test spoils, and what the chief then says of it (trainer/data.py).
SPOILED = "train-labels-idx1-ubyte.gz"


@pytest.fixture(scope="module")
def stack(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PulumiProject, Path]]:
    """The stack, with job.waitForChief, and its volume's host directory."""
    with stack_on_cluster(local_cluster, tmp_path_factory, "dev", CONFIG) as (project, volume):
        yield project, volume


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Kube:
    return Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)


def _up_in_background(project: PulumiProject, log: Path) -> subprocess.Popen:
    """`pulumi up --yes --skip-preview` of ``project``, both streams into ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(
            [str(project.toolchain.bin_dir / "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive"],
            cwd=project.dir,
            env=project.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _stop(up: subprocess.Popen) -> None:
    """Cancel a `pulumi up` that is still running (SIGINT: Pulumi cancels its operations), then end it."""
    if up.poll() is None:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=120)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()


def test_up_waits_for_a_chief_that_succeeds_and_succeeds(stack, kube: Kube) -> None:
    project, _ = stack
    proc = project.pulumi("up", "--yes", "--skip-preview", timeout=1800)
    # `up` returned once the chief's Job had ended: it is complete already.
    assert job_condition(kube, CHIEF) == "Complete", kube.get("job", CHIEF)["status"]
    assert "The chief's Job" not in proc.stdout + proc.stderr, proc.stdout


def test_a_chief_that_exits_3_fails_up_once_its_job_failed(stack, kube: Kube, tmp_path: Path) -> None:
    project, volume = stack
    spoiled = on_volume(project, volume, "dataDir") / SPOILED
    assert spoiled.is_file(), sorted(p.name for p in spoiled.parent.iterdir())
    first_staging = kube.get("job", STAGING)["metadata"]["uid"]
    project.set_config("hyperparams.learningrate", "0.002", path=True)
    log = tmp_path / "up.log"
    up = _up_in_background(project, log)
    try:
        kube.wait_for(
            "the second run's staging Job to complete",
            lambda: _staged_again(kube, first_staging) or up.poll() is not None,
            timeout=900,
            every=0.2,
        )
        spoiled.write_bytes(b"spoiled by the test: not gzip\n")  # in place: its owner stays the pods'
        # No wall-clock bound: `pulumi up` ends by itself either way. With the chief awaited
        # until its Job ends it fails at once with the chief's reason (asserted below); with
        # Pulumi's own Job await it would wait out job.waitTimeoutMinutes and end with an
        # await timeout instead, failing the assertions on the message.
        up.wait()
    finally:
        _stop(up)
    out = log.read_text()
    assert up.returncode != 0 and job_condition(kube, CHIEF) == "Failed", out[-3000:]
    job = kube.get("job", CHIEF)
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    assert [c["reason"] for c in failed] == ["PodFailurePolicy"], job["status"]
    # `up` printed the Job's condition, what exit 3 means and where the chief's error is.
    assert f"The chief's Job {NAMESPACE}/{CHIEF} failed (PodFailurePolicy): Container tensorflow" in out, out
    assert "failed with exit code 3 matching FailJob rule" in out, out
    assert "Exit 3 of the trainer means bad data" in out, out
    assert f"logs/chief-0.log on the volume (`kubectl -n {NAMESPACE} logs job/{CHIEF}`)" in out, out
    assert f"{SPOILED}: not a gzip file" in kube.logs(f"job/{CHIEF}")


def _staged_again(kube: Kube, first_uid: str) -> bool:
    """Whether the staging Job is another than ``first_uid`` and has completed."""
    found = kube.run("get", "job", STAGING, "-o", "json", check=False)
    if found.returncode != 0:
        return False
    job = json.loads(found.stdout)
    complete = any(
        (c["type"], c["status"]) == ("Complete", "True")
        for c in job.get("status", {}).get("conditions") or []
    )
    return job["metadata"]["uid"] != first_uid and complete


def test_an_up_that_leaves_the_failed_chief_alone_only_warns(stack) -> None:
    project, _ = stack
    proc = project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    out = proc.stdout + proc.stderr
    assert f"The chief's Job {NAMESPACE}/{CHIEF} failed (PodFailurePolicy)" in out, out
    assert "An earlier `pulumi up` failed on this Job; this one leaves it as it is." in out, out


def test_destroy_with_the_program_tears_the_stack_down_after_a_failed_chief(stack, kube: Kube) -> None:
    project, _ = stack
    project.pulumi("destroy", "--run-program", "--yes", "--skip-preview", timeout=900)
    assert kube.run("get", "namespace", NAMESPACE, check=False).returncode != 0
    assert kube.run("get", "job", CHIEF, check=False).returncode != 0
