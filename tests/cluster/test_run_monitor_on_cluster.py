"""A run that cannot go on ends, and says why, on the real local cluster: the run monitor
(infra/run_monitor.py) ends every task when the chief's Job fails for good or a task cannot be
scheduled, and ``python -m infra.status`` names a missing image.

One stack (test_stack_on_cluster's fixture: the real engine, kubeconfig mode, hostPath volume),
one name prefix, reconfigured per test; every assertion reads the cluster with kubectl.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from datetime import datetime

import pytest

from .kube import Kube, job_condition
from .stack import kill_the_monitor, paused_chief, run_status, wait_for_tasks
from .test_stack_on_cluster import TASKS, kube, stack  # noqa: F401 - the shared fixtures

pytestmark = pytest.mark.cluster

PREFIX = "mon"
ENDED_BECAUSE = "tf-mnist.io/ended-because"
MISSING_IMAGE = "localhost/tf-mnist/does-not-exist:1"
#: The schedule timeout of the GPU test: long enough for the scheduler's first verdicts.
SCHEDULE_TIMEOUT_S = 20
#: The start timeout of the stuck-pull test: past the kubelet's first pull attempts.
START_TIMEOUT_S = 30


def _up(project, settings: dict[str, str]) -> None:
    for key, value in {"namePrefix": PREFIX, **settings}.items():
        project.set_config(key, value, path=key != "namePrefix")
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)


def _jobs(kube: Kube) -> dict[str, dict]:
    return {
        j["metadata"]["name"]: j
        for j in kube.get("jobs")["items"]
        if j["metadata"]["labels"].get("app.kubernetes.io/instance") == PREFIX
    }


def _failed_at(job: dict) -> float | None:
    """When the Job got the condition Failed (seconds since the epoch), None if it has not."""
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] == "Failed" and cond["status"] == "True":
            return datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    return None


def _live_task_pods(kube: Kube) -> list[str]:
    return [
        f"{p['metadata']['name']} {p['status']['phase']}"
        for p in kube.get("pods")["items"]
        if p["metadata"]["labels"].get("app.kubernetes.io/instance") == PREFIX
        and "tf-replica-type" in p["metadata"]["labels"]
        and p["status"]["phase"] in ("Pending", "Running")
    ]


def _every_task_failed(kube: Kube) -> dict[str, dict] | None:
    jobs = _jobs(kube)
    tasks = {n: j for n, j in jobs.items() if "tf-replica-type" in j["metadata"]["labels"]}
    return jobs if len(tasks) == len(TASKS) and all(_failed_at(j) for j in tasks.values()) else None


def test_a_monitor_killed_three_times_still_watches_a_run_that_ends_well(stack, kube: Kube) -> None:
    # The monitor's pod dies three times (SIGKILL from the host, deletion, SIGKILL) while the
    # run trains: more than its Job's backoffLimit (2), so counted failures would fail the
    # monitor's Job and leave the run unwatched; a kill is not the monitor's failure.
    project, _ = stack
    # The chief is stopped (SIGSTOP) while the monitor is killed, so the run cannot end
    # before the third kill, however fast the machine or slow the monitor's restarts. It is
    # stopped as soon as its processes exist, while `up` still runs (up does not wait for the
    # training): on a fast machine the chief's whole run ends before `up` does.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        up = pool.submit(_up, project, {"hyperparams.epochs": "3"})
        with paused_chief(kube, PREFIX):
            up.result()
            kills = kill_the_monitor(kube, PREFIX, 3)
    outcomes = wait_for_tasks(kube, PREFIX)
    assert outcomes == {f"{PREFIX}-{t}": "Complete" for t in TASKS}, outcomes
    monitor = kube.wait_for(
        "the monitor Job to end", lambda: job_condition(kube, f"{PREFIX}-monitor"), timeout=180
    )
    print(f"\nthe monitor's pod ended by: {kills}")
    assert kills == ["SIGKILL", "delete", "SIGKILL"] and monitor == "Complete", (
        kills,
        kube.run("describe", "job", f"{PREFIX}-monitor").stdout,
    )
    shown = run_status(kube, PREFIX)
    assert shown.returncode == 0 and "FINISHED" in shown.stdout, shown.stdout + shown.stderr


def test_a_chief_that_fails_for_good_ends_every_task_within_30_s(stack, kube: Kube) -> None:
    # backoffLimit 0: the chief's first crash (exit 1, no permanent code, so no failed marker
    # for the trainer's own path) fails its Job; the ps and workers would wait peerTimeout.
    project, _ = stack
    _up(project, {"job.backoffLimit": "0", "hyperparams.epochs": "50", "job.peerTimeoutSeconds": "600"})
    chief = f"{PREFIX}-chief-0"
    kube.wait_for(
        "every task pod Running",
        lambda: len([p for p in _live_task_pods(kube) if "Running" in p]) == len(TASKS),
        timeout=300,
        every=2,
    )
    kube.wait_for(
        "the chief's first step",
        lambda: "Step:" in kube.run("logs", f"job/{chief}", check=False).stdout,
        timeout=300,
        every=2,
    )

    # Ctrl-C to the trainer (pid 1): KeyboardInterrupt, exit 1. CPython raises it wherever the
    # main thread is, and one raised inside a __del__ or a weakref callback (TensorFlow runs
    # many) is printed and dropped, so the interrupt is sent again until the Job has failed.
    interrupts = []

    def interrupted_until_failed() -> bool:
        if job_condition(kube, chief) == "Failed":
            return True
        interrupt = "import os, signal; os.kill(1, signal.SIGINT)"
        interrupts.append(kube.run("exec", f"job/{chief}", "--", "python", "-c", interrupt, check=False))
        return False

    kube.wait_for(f"job {chief} to fail", interrupted_until_failed, timeout=120, every=3)
    print(f"\nSIGINTs sent to the chief before its Job failed: {len(interrupts)}")
    jobs = kube.wait_for("every task Job to fail", lambda: _every_task_failed(kube), timeout=90, every=1)
    chief_job = jobs[chief]
    assert [c["reason"] for c in chief_job["status"]["conditions"] if c["type"] == "Failed"] == [
        "BackoffLimitExceeded"
    ], chief_job["status"]
    lags = {
        n: _failed_at(j) - _failed_at(chief_job)
        for n, j in jobs.items()
        if n != chief and "tf-replica-type" in j["metadata"]["labels"]
    }
    print(f"\ntasks failed after the chief's Job: {lags} s")
    assert all(lag <= 30 for lag in lags.values()), lags
    for name in lags:
        job = jobs[name]
        assert job["metadata"]["annotations"][ENDED_BECAUSE].startswith(
            f"the chief's Job {chief} failed: BackoffLimitExceeded"
        ), job["metadata"]
        assert [c["reason"] for c in job["status"]["conditions"] if c["type"] == "Failed"] == [
            "DeadlineExceeded"
        ]
    assert _live_task_pods(kube) == []
    kube.wait_for(
        "the monitor Job to complete",
        lambda: job_condition(kube, f"{PREFIX}-monitor") == "Complete",
        timeout=180,
    )
    shown = run_status(kube, PREFIX)
    assert shown.returncode == 1 and "FAILED" in shown.stdout, shown.stdout + shown.stderr
    assert (
        f"worker-0: ended by the run monitor: the chief's Job {chief} failed: BackoffLimitExceeded"
        in shown.stdout
    )


def test_a_missing_image_shows_as_image_pull_back_off_with_its_name(stack, kube: Kube) -> None:
    project, _ = stack
    _up(project, {"job.backoffLimit": "4", "worker.image": MISSING_IMAGE})

    def pull_back_off() -> str | None:
        shown = run_status(kube, PREFIX)
        lines = [line for line in shown.stdout.splitlines() if "worker-0: ImagePullBackOff" in line]
        return lines[0] if lines else None

    line = kube.wait_for("infra.status to show ImagePullBackOff", pull_back_off, timeout=180, every=3)
    assert f"(image {MISSING_IMAGE})" in line, line
    facts = json.loads(run_status(kube, PREFIX, "-o", "json").stdout)
    worker = next(t for t in facts["tasks"] if t["task"] == "worker-0")
    assert any(w.startswith("ImagePullBackOff") and MISSING_IMAGE in w for w in worker["why"]), worker
    assert any(MISSING_IMAGE in w["message"] for w in facts["warnings"]), facts["warnings"]


def test_a_pull_that_never_succeeds_ends_the_run_after_the_start_timeout(stack, kube: Kube) -> None:
    # The workers' pods are scheduled but their image never pulls: without a start timeout
    # they would hold their nodes until the Jobs' deadline (about an hour).
    project, _ = stack
    started = time.time()
    _up(project, {"worker.image": MISSING_IMAGE, "job.startTimeoutSeconds": str(START_TIMEOUT_S)})
    try:
        jobs = kube.wait_for(
            "the monitor to end every task Job",
            lambda: _every_task_ended_by_the_monitor(kube),
            timeout=START_TIMEOUT_S + 120,
            every=1,
        )
    finally:
        project.pulumi("config", "rm", "--path", "job.startTimeoutSeconds", check=False)
    ended = time.time()
    reasons = {n: j["metadata"]["annotations"][ENDED_BECAUSE] for n, j in jobs.items()}
    for name, reason in reasons.items():
        assert "did not start" in reason and MISSING_IMAGE in reason, (name, reason)
        assert f"(job.startTimeoutSeconds {START_TIMEOUT_S})" in reason, reason
    kube.wait_for("every task Job to fail", lambda: _every_task_failed(kube), timeout=180, every=2)
    assert _live_task_pods(kube) == []
    shown = run_status(kube, PREFIX)
    assert shown.returncode == 1 and "FAILED" in shown.stdout and MISSING_IMAGE in shown.stdout, shown.stdout
    print(
        f"\nthe monitor ended the run {ended - started:.0f} s after `pulumi up` started: "
        f"{next(iter(reasons.values()))}"
    )


def _every_task_ended_by_the_monitor(kube: Kube) -> dict[str, dict] | None:
    jobs = _jobs(kube)
    tasks = {n: j for n, j in jobs.items() if "tf-replica-type" in j["metadata"]["labels"]}
    marked = all(ENDED_BECAUSE in (j["metadata"].get("annotations") or {}) for j in tasks.values())
    return tasks if len(tasks) == len(TASKS) and marked else None


def test_a_gpu_request_no_node_meets_fails_the_run_after_the_schedule_timeout(stack, kube: Kube) -> None:
    project, _ = stack
    project.pulumi("config", "rm", "--path", "worker.image", check=False)  # set by the test before
    started = time.time()
    _up(project, {"worker.gpuCount": "1", "job.scheduleTimeoutSeconds": str(SCHEDULE_TIMEOUT_S)})
    try:
        jobs = kube.wait_for(
            "the monitor to end every task Job",
            lambda: _every_task_ended_by_the_monitor(kube),
            timeout=SCHEDULE_TIMEOUT_S + 60,
            every=1,
        )
    except AssertionError as err:
        raise AssertionError(
            f"{err}\nmonitor log:\n{kube.run('logs', f'job/{PREFIX}-monitor', check=False).stdout}"
            f"\npods: {_live_task_pods(kube)}"
        ) from None
    ended = time.time()
    worker = jobs[f"{PREFIX}-worker-0"]
    limits = worker["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1", limits
    reasons = {n: j["metadata"]["annotations"][ENDED_BECAUSE] for n, j in jobs.items()}
    for name, reason in reasons.items():
        assert "could not be scheduled" in reason and "Insufficient nvidia.com/gpu" in reason, (name, reason)
        assert f"(job.scheduleTimeoutSeconds {SCHEDULE_TIMEOUT_S})" in reason, reason
    # The Jobs fail once their pods have gone: the pending workers at once, the chief and the
    # ps within their grace period (TASK_GRACE_SECONDS, 120 s).
    kube.wait_for("every task Job to fail", lambda: _every_task_failed(kube), timeout=180, every=2)
    print(
        f"\nthe monitor ended the run {ended - started:.0f} s after `pulumi up` started, every Job failed "
        f"{time.time() - started:.0f} s after; {next(iter(reasons.values()))}"
    )
    assert _live_task_pods(kube) == []
    shown = run_status(kube, PREFIX)
    assert shown.returncode == 1 and "FAILED" in shown.stdout, shown.stdout + shown.stderr
    assert "ended by the run monitor: pod" in shown.stdout and "Insufficient nvidia.com/gpu" in shown.stdout
