"""infra.status on a run that cannot start, from recorded objects (the shapes ``kubectl get -o
json`` returns): each pod's waiting reason with its image, the scheduler's message, an unbound
claim, the newest Warning events, the run monitor's verdict, and ``-o json``."""

from __future__ import annotations

import json

from test_status import NOW, Recorded, job, pod

from infra import status
from infra.run_monitor import ENDED_BECAUSE

IMAGE = "localhost/tf-mnist/does-not-exist:1"
PULL_MESSAGE = f'Back-off pulling image "{IMAGE}"'
SCHEDULER = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def pulling_pod() -> dict:
    p = pod("worker", 0, "Pending")
    p["spec"]["containers"] = [{"name": "tensorflow", "image": IMAGE}]
    p["status"]["containerStatuses"] = [
        {
            "name": "tensorflow",
            "restartCount": 0,
            "image": IMAGE,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": PULL_MESSAGE}},
        }
    ]
    return p


def unschedulable_pod() -> dict:
    p = pod("worker", 1, "Pending")
    p["spec"] = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "mnist-data-1a2b"}}]}
    p["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": SCHEDULER}
        ],
    }
    return p


def claim(phase: str) -> dict:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "mnist-data-1a2b"},
        "status": {"phase": phase},
    }


def event(name: str, reason: str, message: str, at: str, kind: str = "Pod", count: int = 1) -> dict:
    return {
        "kind": "Event",
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": at,
        "involvedObject": {"kind": kind, "name": name},
    }


def stuck_run() -> Recorded:
    objects = [
        job("chief", 0, active=1),
        job("worker", 0, active=1),
        job("worker", 1, active=1),
        pod("chief", 0, "Running"),
        pulling_pod(),
        unschedulable_pod(),
        claim("Bound"),
    ]
    events = [
        event(
            "mnist-worker-0-abcde",
            "Failed",
            f'Failed to pull image "{IMAGE}": not found',
            "2026-01-02T11:59:30Z",
            count=4,
        ),
        event("mnist-worker-1-abcde", "FailedScheduling", SCHEDULER, "2026-01-02T11:59:50Z", count=3),
        event("someone-elses-pod", "BackOff", "not this run", "2026-01-02T11:59:59Z"),
    ]
    return Recorded(objects, {}, events)


def test_a_waiting_pod_shows_its_reason_with_the_image_and_the_scheduler_its_message():
    run = status.collect(stuck_run(), "mnist", "default", NOW)
    rows = {r.task: r for r in run.tasks}
    assert rows["worker-0"].why == [f"ImagePullBackOff (image {IMAGE}): {PULL_MESSAGE}"]
    assert rows["worker-1"].why == [f"Unschedulable: {SCHEDULER}"]
    assert rows["chief-0"].why == []
    text = status.render(run)
    assert f"  worker-0: ImagePullBackOff (image {IMAGE}): {PULL_MESSAGE}" in text.splitlines()
    assert f"  worker-1: Unschedulable: {SCHEDULER}" in text.splitlines()
    # The newest warnings of the run's own objects, newest first; another pod's are left out.
    warnings = text.split("Warnings (newest first):\n")[1].split("\n\n")[0].splitlines()
    assert [w.split()[:4] for w in warnings] == [
        ["AGE", "OBJECT", "REASON", "COUNT"],
        ["10s", "pod/mnist-worker-1-abcde", "FailedScheduling", "3"],
        ["30s", "pod/mnist-worker-0-abcde", "Failed", "4"],
    ]
    assert "not this run" not in text


def test_a_claim_that_does_not_bind_is_named_on_the_pod_and_below_the_table():
    cluster = stuck_run()
    cluster.objects[-1] = claim("Pending")
    run = status.collect(cluster, "mnist", "default", NOW)
    assert "claim mnist-data-1a2b is Pending, not Bound" in {r.task: r for r in run.tasks}["worker-1"].why
    assert "Claim mnist-data-1a2b: Pending, not Bound (the pods that mount it wait)" in status.render(run)


def test_the_monitors_reason_and_the_jobs_failure_are_shown():
    reason = f"pod mnist-worker-1-abcde of Job mnist-worker-1 could not be scheduled for 60 s: {SCHEDULER}"
    cluster = stuck_run()
    for obj in cluster.objects[:3]:
        obj["metadata"]["annotations"] = {ENDED_BECAUSE: reason}
        obj["status"] = {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        }
    # The Job controller deleted the pods: only the Jobs and the annotation say why.
    cluster.objects = cluster.objects[:3] + [
        {
            "kind": "Job",
            "metadata": {
                "name": "mnist-monitor",
                "labels": {"app.kubernetes.io/instance": "mnist", "app.kubernetes.io/component": "monitor"},
            },
            "status": {"conditions": [{"type": "Complete", "status": "True"}]},
        }
    ]
    run = status.collect(cluster, "mnist", "default", NOW)
    assert run.state == "Failed" and run.monitor == "Complete"
    assert {r.ended_because for r in run.tasks} == {reason}
    text = status.render(run)
    assert f"  worker-1: ended by the run monitor: {reason}" in text.splitlines()
    assert "  chief-0: Job failed: DeadlineExceeded: Job was active longer than specified deadline" in text
    assert (
        "Monitor:     Complete (job mnist-monitor; kubectl --namespace default logs job/mnist-monitor)"
        in text
    )


def test_a_monitor_that_never_reached_the_api_server_says_where_it_called():
    # Its pod's status ends with the script's last line (FallbackToLogsOnError): the address
    # and port, so a closed port shows as such, not as a run nobody watches.
    gave_up = (
        "run monitor: cannot reach the API server at https://10.96.0.1:443 (TCP port 443): 6 tries in 31 s"
    )
    cluster = stuck_run()
    monitor = {
        "kind": "Job",
        "metadata": {
            "name": "mnist-monitor",
            "labels": {"app.kubernetes.io/instance": "mnist", "app.kubernetes.io/component": "monitor"},
        },
        "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]},
    }
    older, newest = (
        pod("monitor", 0, "Failed", created=f"2026-01-02T11:5{m}:00Z", suffix=s) for m, s in ("1x", "3y")
    )
    for p in (older, newest):
        p["metadata"]["labels"]["job-name"] = "mnist-monitor"
        p["status"]["containerStatuses"] = [
            {
                "name": "monitor",
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 3,
                        "reason": "Error",
                        "message": f"... cannot read the run (6 of 6): GET ...: timed out\n{gave_up}\n",
                    }
                },
            }
        ]
    older["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "an older pod's end\n"
    cluster.objects += [monitor, newest, older]
    run = status.collect(cluster, "mnist", "default", NOW)
    assert run.monitor == "Failed" and run.monitor_why == [f"exited 3 (Error): {gave_up}"]
    lines = status.render(run).splitlines()
    at = lines.index(
        "Monitor:     Failed (job mnist-monitor; kubectl --namespace default logs job/mnist-monitor)"
    )
    assert lines[at + 1] == f"             exited 3 (Error): {gave_up}"
    # Without its pods (deleted), the Job's own failure.
    cluster.objects = [o for o in cluster.objects if o not in (newest, older)]
    assert status.collect(cluster, "mnist", "default", NOW).monitor_why == [
        "Job failed: BackoffLimitExceeded: no message"
    ]


def test_json_output_holds_the_same_facts(capsys):
    code = status.main(
        ["--kubeconfig", "k", "--namespace", "default", "--prefix", "mnist", "-o", "json"],
        cluster=stuck_run(),
        clock=lambda: NOW,
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["exit_code"] == 3 and out["state"] == "Running"
    tasks = {t["task"]: t for t in out["tasks"]}
    assert tasks["worker-0"]["why"] == [f"ImagePullBackOff (image {IMAGE}): {PULL_MESSAGE}"]
    assert tasks["worker-1"]["why"] == [f"Unschedulable: {SCHEDULER}"]
    assert out["claims"] == {"mnist-data-1a2b": "Bound"}
    assert [(w["object"], w["reason"], w["count"], w["age_s"]) for w in out["warnings"]] == [
        ("pod/mnist-worker-1-abcde", "FailedScheduling", 3, 10.0),
        ("pod/mnist-worker-0-abcde", "Failed", 4, 30.0),
    ]
    assert out["progress"]["line"] == "no progress lines yet" and out["progress"]["done"] is False


def test_a_failed_container_shows_its_exit():
    cluster = stuck_run()
    crashed = pod("chief", 0, "Failed")
    crashed["status"]["containerStatuses"] = [
        {
            "name": "tensorflow",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
        }
    ]
    cluster.objects[3] = crashed
    assert {r.task: r for r in status.collect(cluster, "mnist", "default", NOW).tasks}["chief-0"].why == [
        "exited 137 (OOMKilled)"
    ]
