"""A staging Job that cannot succeed ends `pulumi up` soon, with its reason, on the real local
cluster; ``python -m infra.status`` shows the staging state meanwhile and after.

Two cases, each a stack of its own in a namespace of its own (the real engine, kubeconfig mode,
hostPath volume, as tests/cluster/test_volume_ownership.py's):

* a data.source URL that answers 404 (a server of this test on the cluster's bridge address,
  which pods reach like the cluster DNS; it answers after ANSWER_AFTER_S, while the run monitor
  raises the running staging Job's deadline): the stager gives up at once, the Job fails with
  its first pod, and `pulumi up` fails within a minute, printing the stager's last line;
* a staging image that cannot be pulled: the pod never starts, and the staging Job fails after
  data.startTimeoutSeconds (its activeDeadlineSeconds until the run monitor sees the
  container start), `pulumi up` printing the kubelet's reason; ``infra.status`` shows the
  staging Job pending with that reason while `pulumi up` waits, then failed.
"""

from __future__ import annotations

import calendar
import http.server
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from tests.loopback_http import serving
from tests.preview.engine import PulumiProject

from .kube import REPO, Kube
from .stack import PROJECT_FILES, TINY_RUN, engine_home, infra_status, owner_config, pod_volume

pytestmark = pytest.mark.cluster

PREFIX = "mnist"
STAGING = f"{PREFIX}-stage-data"
#: The smallest run (stack.py's TINY_RUN); staging fails before any task Job exists.
TINY = TINY_RUN | {"createNamespace": "true"}
#: The cluster's bridge address on the host (tools/local-cluster/localcluster/layout.py BRIDGE_IP):
#: pods reach it (the cluster DNS and the API server's relay listen there); nothing leaves the machine.
BRIDGE_IP = "10.244.0.1"
#: What the tests assert of a staging failure: its Job fails within this many seconds of its
#: creation. The stager exits within a second of the 404 (ANSWER_AFTER_S); the rest is the pod's start.
FAIL_FAST_S = 60
#: data.startTimeoutSeconds of the image test: long enough for the kubelet's first pull
#: verdict (ErrImagePull within seconds here), short for the test.
START_TIMEOUT_S = 40
MISSING_IMAGE = "localhost/tf-mnist/does-not-exist:1"


#: How long the 404 server holds each answer: the staging pod runs that long, time for the run
#: monitor (polling every 5 s, its pod started beside the staging pod's) to see it run and raise
#: the Job's deadline; short of the stager's 30 s socket timeout.
ANSWER_AFTER_S = 20


class _NotFound(http.server.BaseHTTPRequestHandler):
    """Answers every GET with 404 after ANSWER_AFTER_S, as a slow data source that moved would."""

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        time.sleep(ANSWER_AFTER_S)
        self.send_error(404, "File not found")

    def log_message(self, *args) -> None:
        pass


@contextmanager
def _not_found_server() -> Iterator[str]:
    """An HTTP server on BRIDGE_IP (a free port) that answers 404; yields its base URL; stopped on exit."""
    with serving(_NotFound, host=BRIDGE_IP) as url:
        yield url


@contextmanager
def _stack(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory, namespace: str, config: dict[str, str]
) -> Iterator[tuple[PulumiProject, Kube]]:
    """Stack ``dev`` of a project copy on a fresh volume the pods can write, in ``namespace``, with
    ``config``; destroyed, and the volume removed, on exit."""
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
    owner = (2000, 3000)
    volume = pod_volume(f"{namespace}-", owner)
    project.init_stack("dev")
    settings = {
        **TINY,
        **owner_config(owner),
        "namespace": namespace,
        "kubeconfig": str(kube.kubeconfig),
        "hostPath.path": str(volume),
        **config,
    }
    for key, value in settings.items():
        project.set_config(key, value, path=True)
    try:
        yield project, kube
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False, timeout=600)
        shutil.rmtree(volume, ignore_errors=True)


def _seconds(stamp: str) -> float:
    """Seconds since the epoch of an API server timestamp (RFC 3339, UTC, whole seconds)."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _failed(kube: Kube) -> dict:
    """The staging Job's Failed condition (asserted there), with ``after_s``: seconds from the
    Job's creation to it."""
    job = kube.get("job", STAGING)
    failed = [
        c for c in job["status"].get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"
    ]
    assert failed, job["status"]
    return {
        **failed[0],
        "after_s": _seconds(failed[0]["lastTransitionTime"]) - _seconds(job["metadata"]["creationTimestamp"]),
    }


def _up(project: PulumiProject) -> tuple[subprocess.CompletedProcess, float]:
    """`pulumi up` (it must fail): the process and its seconds. Its timeout is twice the longest
    this test allows, far short of the staging await's 1200 s."""
    started = time.monotonic()
    proc = project.pulumi("up", "--yes", "--skip-preview", check=False, timeout=600)
    return proc, time.monotonic() - started


def test_a_404_data_source_fails_up_within_a_minute_with_the_stagers_line(
    local_cluster, tmp_path_factory
) -> None:
    with (
        _not_found_server() as base,
        _stack(
            local_cluster, tmp_path_factory, "tf-mnist-bad-source", {"data.source": f"{base}/moved/mnist.npz"}
        ) as (project, kube),
    ):
        proc, took = _up(project)
        output = proc.stdout + proc.stderr
        failed = _failed(kube)
        print(
            f"\nthe failed `pulumi up` took {took:.0f} s, the Job failed {failed['after_s']:.0f} s after its "
            f"creation ({failed['reason']}); it said:\n{output[-3000:]}"
        )
        assert proc.returncode != 0, output
        assert failed["reason"] == "BackoffLimitExceeded" and failed["after_s"] < FAIL_FAST_S, failed
        assert f"error: {base}/moved/mnist.npz: not found (HTTP 404)" in output, output
        job = kube.get("job", STAGING)
        assert job["status"].get("failed") == 1  # no retry of a permanent error
        # The monitor saw the pod run, and raised the deadline from data.startTimeoutSeconds to 1200 s.
        monitor_log = kube.logs(f"job/{PREFIX}-monitor")
        assert job["spec"]["activeDeadlineSeconds"] == 1200, (job["spec"], monitor_log)
        assert f"the pod of Job {STAGING} runs: its activeDeadlineSeconds is now 1200" in monitor_log
        shown = infra_status(kube, "--prefix", PREFIX)
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "STAGING FAILED" in shown.stdout, shown.stdout
        assert f"{base}/moved/mnist.npz: not found (HTTP 404)" in shown.stdout, shown.stdout


def _status_while(kube: Kube, until: float) -> list[subprocess.CompletedProcess]:
    """``infra.status`` every few seconds until ``until`` (monotonic), its first exit other than 3,
    or its first view naming MISSING_IMAGE."""
    shown = []
    while time.monotonic() < until:
        shown.append(infra_status(kube, "--prefix", PREFIX))
        if shown[-1].returncode != 3 or MISSING_IMAGE in shown[-1].stdout:
            break
        time.sleep(3)
    return shown


def test_a_staging_pod_that_never_starts_fails_up_after_the_start_timeout(
    local_cluster, tmp_path_factory
) -> None:
    config = {
        "data.startTimeoutSeconds": str(START_TIMEOUT_S),
        "ps.image": MISSING_IMAGE,
        "worker.image": MISSING_IMAGE,
    }
    with (
        _stack(local_cluster, tmp_path_factory, "tf-mnist-stuck-staging", config) as (project, kube),
        ThreadPoolExecutor(1) as pool,
    ):
        up = pool.submit(_up, project)
        kube.wait_for(
            f"job {STAGING}",
            lambda: kube.run("get", "job", STAGING, check=False).returncode == 0,
            timeout=300,
            every=2,
        )
        during = _status_while(kube, time.monotonic() + START_TIMEOUT_S)
        proc, took = up.result(timeout=900)
        output = proc.stdout + proc.stderr
        failed = _failed(kube)
        print(
            f"\nthe failed `pulumi up` took {took:.0f} s, the Job failed {failed['after_s']:.0f} s after its "
            f"creation ({failed['reason']}); it said:\n{output[-3000:]}\ninfra.status meanwhile said:\n"
            f"{during[-1].stdout}"
        )
        assert proc.returncode != 0, output
        assert failed["reason"] == "DeadlineExceeded", failed
        # (Whole-second timestamps: the deadline counts from the Job's startTime, at its creation.)
        assert START_TIMEOUT_S - 1 <= failed["after_s"] < START_TIMEOUT_S + FAIL_FAST_S, failed
        assert MISSING_IMAGE in output and ("ImagePullBackOff" in output or "ErrImagePull" in output), output
        # While `pulumi up` waited: the staging Job pending, with the kubelet's reason, exit 3.
        last = during[-1]
        assert last.returncode == 3 and "STAGING PENDING" in last.stdout, last.stdout + last.stderr
        assert MISSING_IMAGE in last.stdout, last.stdout
        shown = infra_status(kube, "--prefix", PREFIX)
        assert shown.returncode == 1 and "STAGING FAILED" in shown.stdout, shown.stdout + shown.stderr
        assert MISSING_IMAGE in shown.stdout, shown.stdout
