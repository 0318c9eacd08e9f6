"""infra.status while the data staging Job runs, before any task Job exists, from recorded
objects (the shapes ``kubectl get -o json`` returns): STAGING PENDING with the pod's reason,
STAGING RUNNING, STAGING FAILED with the stager's error or the Job's deadline, and their exit
codes (3 going, 1 failed)."""

from __future__ import annotations

import json

from test_status import NOW, Recorded, job, pod
from test_status_why import IMAGE, PULL_MESSAGE, SCHEDULER, claim, event

from infra import status

STAGER_ERROR = (
    "error: http://10.244.0.1:8000/moved/mnist.npz: not found (HTTP 404); not tried again "
    "(a permanent error: check data.source)"
)


def staging_job(*, active: int = 0, failed: dict | None = None) -> dict:
    """The staging Job as the stack labels it (component stage-data, no tf-replica-type)."""
    return {
        "kind": "Job",
        "metadata": {
            "name": "mnist-stage-data",
            "creationTimestamp": "2026-01-02T11:59:00Z",
            "labels": {"app.kubernetes.io/instance": "mnist", "app.kubernetes.io/component": "stage-data"},
        },
        "spec": {"activeDeadlineSeconds": 600, "template": {"spec": {"containers": [{"name": "stage"}]}}},
        "status": {
            "startTime": "2026-01-02T11:59:00Z",
            "active": active,
            "failed": 1 if failed else 0,
            "conditions": [{"type": "Failed", "status": "True", **failed}] if failed else [],
        },
    }


def staging_pod(phase: str, **status_fields) -> dict:
    p = pod("stage", 0, phase, created="2026-01-02T11:59:01Z")
    p["metadata"]["name"] = "mnist-stage-data-x7k2p"
    p["metadata"]["labels"]["job-name"] = "mnist-stage-data"
    p["spec"] = {
        "containers": [{"name": "stage", "image": IMAGE}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "mnist-data-1a2b"}}],
    }
    p["status"].update(status_fields)
    return p


def _shown(cluster: Recorded, capsys) -> tuple[int, str]:
    code = status.main(["--namespace", "default", "--prefix", "mnist", "--kubeconfig", "k"], cluster=cluster)
    return code, capsys.readouterr().out


def test_a_pending_staging_pod_shows_why_and_exits_3(capsys):
    pulling = staging_pod(
        "Pending",
        containerStatuses=[
            {
                "name": "stage",
                "restartCount": 0,
                "image": IMAGE,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": PULL_MESSAGE}},
            }
        ],
    )
    code, out = _shown(Recorded([staging_job(active=1), pulling, claim("Bound")], {}), capsys)
    assert code == status.EXIT_RUNNING == 3
    assert out.splitlines()[0] == "Run mnist (namespace default): STAGING PENDING"
    assert "stage-data  mnist-stage-data  Pending  Pending" in out
    assert f"  stage-data: ImagePullBackOff (image {IMAGE}): {PULL_MESSAGE}" in out
    assert "Staging:     kubectl --namespace default logs job/mnist-stage-data" in out


def test_an_unbound_claim_and_the_schedulers_message_are_shown():
    stuck = staging_pod(
        "Pending",
        conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": SCHEDULER}
        ],
    )
    run = status.collect(
        Recorded([staging_job(active=1), stuck, claim("Pending")], {}), "mnist", "default", NOW
    )
    assert (run.state, run.exit_code, run.tasks) == ("Staging pending", 3, [])
    assert run.staging.why == [f"Unschedulable: {SCHEDULER}", "claim mnist-data-1a2b is Pending, not Bound"]


def test_a_running_stager_is_staging_running():
    run = status.collect(
        Recorded([staging_job(active=1), staging_pod("Running"), claim("Bound")], {}), "mnist", "default", NOW
    )
    assert (run.state, run.exit_code, run.staging.phase, run.staging.why) == (
        "Staging running",
        3,
        "Running",
        [],
    )


def test_a_failed_stager_shows_its_last_line_and_exits_1(capsys):
    exited = staging_pod(
        "Failed",
        containerStatuses=[
            {
                "name": "stage",
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 1,
                        "reason": "Error",
                        "message": f"Traceback line\n{STAGER_ERROR}\n",
                    }
                },
            }
        ],
    )
    failed = {"reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
    code, out = _shown(Recorded([staging_job(failed=failed), exited, claim("Bound")], {}), capsys)
    assert code == status.EXIT_FAILED == 1
    assert out.splitlines()[0] == "Run mnist (namespace default): STAGING FAILED"
    assert f"  stage-data: exited 1 (Error): {STAGER_ERROR}" in out
    assert (
        "  stage-data: Job failed: BackoffLimitExceeded: Job has reached the specified backoff limit" in out
    )


def test_a_deadline_shows_the_warnings_of_the_pod_it_deleted(capsys):
    # DeadlineExceeded deletes the pod: its events are what is left of the reason.
    failed = {"reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}
    events = [
        event(
            "mnist-stage-data-x7k2p",
            "Failed",
            f'Failed to pull image "{IMAGE}": not found',
            "2026-01-02T11:59:30Z",
            count=3,
        ),
        event(
            "mnist-stage-data",
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            "2026-01-02T11:59:50Z",
            kind="Job",
        ),
        event("other-stage-data-x", "Failed", "not this run", "2026-01-02T11:59:55Z"),
    ]
    cluster = Recorded([staging_job(failed=failed), claim("Bound")], {}, events)
    code, out = _shown(cluster, capsys)
    assert code == 1 and "STAGING FAILED" in out.splitlines()[0]
    assert "stage-data  mnist-stage-data  Failed  -" in out
    warnings = status.collect(cluster, "mnist", "default", NOW).warnings
    assert [(w.object, w.reason) for w in warnings] == [
        ("job/mnist-stage-data", "DeadlineExceeded"),
        ("pod/mnist-stage-data-x7k2p", "Failed"),
    ]


def test_once_tasks_exist_a_complete_staging_job_is_not_shown(capsys):
    done = staging_job()
    done["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    code, out = _shown(Recorded([done, job("chief", 0, active=1), pod("chief", 0, "Running")], {}), capsys)
    assert code == 3 and "RUNNING" in out.splitlines()[0]
    assert "stage-data" not in out


def test_staging_is_in_the_json_output(capsys):
    code = status.main(
        ["--namespace", "default", "--prefix", "mnist", "--kubeconfig", "k", "-o", "json"],
        cluster=Recorded([staging_job(active=1), staging_pod("Running")], {}),
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["state"] == "Staging running" and out["exit_code"] == 3
    assert out["staging"]["job"] == "mnist-stage-data" and out["staging"]["state"] == "Running"
