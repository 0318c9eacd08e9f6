"""Pods that cannot start, as the real scheduler and kubelet leave them, read by the run
monitor's verdict (infra/run_monitor.decide) and by ``infra.status``' reasons
(infra/status/collect.pod_why):

- a container whose Secret does not exist: CreateContainerConfigError with the kubelet's
  message;
- a volume that does not mount (a ConfigMap that does not exist): the pod stays in
  ContainerCreating, and the verdict carries the kubelet's FailedMount Event, not the bare
  state;
- a claim that no volume binds: the scheduler's message, and the claim named as not Bound.

Three Jobs labelled as the task Jobs of one run, in a namespace of their own; the pods, Events,
Jobs and claims are listed with kubectl, as the monitor and infra.status list them, and judged
as if their timeouts had passed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from infra import run_monitor
from infra.status.collect import pod_why

from .kube import Kube

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-faults"
PREFIX = "faults"
#: tools/local-cluster's preloaded stand-in for python:3.11-slim (pulled IfNotPresent).
IMAGE = "python:3.11-slim"
MISSING_SECRET = "no-such-secret"
MISSING_CONFIG_MAP = "no-such-code"
#: A claim's selector that no PersistentVolume of the cluster carries.
NO_VOLUME = {"train": "no-such-volume"}


def task_job(task: str, pod_spec: dict) -> dict:
    """A Job labelled as task ``task`` of the run (run_monitor.TASK_TYPE_LABEL), one pod, no retry."""
    container = {
        "name": "tensorflow",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "600"],
        **pod_spec.pop("container", {}),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{PREFIX}-{task}-0",
            "labels": {"app.kubernetes.io/instance": PREFIX, run_monitor.TASK_TYPE_LABEL: task},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/instance": PREFIX}},
                "spec": {"restartPolicy": "Never", "containers": [container], **pod_spec},
            },
        },
    }


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Iterator[Kube]:
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)
    local_cluster.run("create", "namespace", NAMESPACE)
    try:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "unbound"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "selector": {"matchLabels": NO_VOLUME},
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
            task_job(
                "chief",
                {
                    "container": {
                        "env": [
                            {
                                "name": "TOKEN",
                                "valueFrom": {"secretKeyRef": {"name": MISSING_SECRET, "key": "token"}},
                            }
                        ]
                    }
                },
            ),
            task_job(
                "worker",
                {
                    "container": {"volumeMounts": [{"name": "code", "mountPath": "/code"}]},
                    "volumes": [{"name": "code", "configMap": {"name": MISSING_CONFIG_MAP}}],
                },
            ),
            task_job(
                "ps",
                {
                    "container": {"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "unbound"}}],
                },
            ),
        )
        yield kube
    finally:
        local_cluster.run("delete", "namespace", NAMESPACE, "--wait=true", check=False, timeout=300)


def pods_by_task(kube: Kube) -> dict[str, dict]:
    return {p["metadata"]["labels"]["job-name"].split("-")[1]: p for p in kube.get("pods")["items"]}


def waiting_reason(pod: dict) -> str | None:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return ((statuses[0].get("state") or {}).get("waiting") or {}).get("reason") if statuses else None


def failed_mount_events(kube: Kube) -> list[dict]:
    return [e for e in kube.get("events")["items"] if e.get("reason") == "FailedMount"]


def test_each_fault_reaches_the_verdict_in_the_cluster_s_own_words(kube: Kube) -> None:
    def settled() -> dict[str, dict] | None:
        pods = pods_by_task(kube)
        chief, worker, ps = (pods.get(t) for t in ("chief", "worker", "ps"))
        ready = (
            chief is not None
            and waiting_reason(chief) == "CreateContainerConfigError"
            and worker is not None
            and failed_mount_events(kube)
            and ps is not None
            and any(c.get("reason") == "Unschedulable" for c in ps["status"].get("conditions") or [])
        )
        return pods if ready else None

    pods = kube.wait_for("each pod to show its fault", settled, timeout=300, every=2)
    events = kube.get("events")["items"]
    jobs = kube.get("jobs")["items"]
    claims = {c["metadata"]["name"]: c["status"]["phase"] for c in kube.get("pvc")["items"]}
    print("\n" + "\n".join(f"{task}: {pod_why(pod, claims)}" for task, pod in sorted(pods.items())))

    # infra.status: each pod's reason as the API gives it.
    assert any(
        w.startswith(f"CreateContainerConfigError (image {IMAGE})")
        and f'secret "{MISSING_SECRET}" not found' in w
        for w in pod_why(pods["chief"], claims)
    ), pod_why(pods["chief"], claims)
    ps_why = pod_why(pods["ps"], claims)
    assert "claim unbound is Pending, not Bound" in ps_why, ps_why
    assert any(w.startswith("Unschedulable: ") and "unbound" in w for w in ps_why), ps_why

    # The monitor's verdict once the start and schedule timeouts have passed: with every other
    # task's pod set aside, each fault is the reason the run ends, in the cluster's words.
    later = time.time() + 3600

    def verdict(task: str) -> str:
        decision = run_monitor.decide(
            jobs, [pods[task]], None, later, schedule_timeout_s=60, start_timeout_s=60, events=events
        )
        assert decision.end, decision
        return next(iter(decision.end.values()))

    chief = verdict("chief")
    assert "did not start" in chief and "CreateContainerConfigError" in chief, chief
    assert f'secret "{MISSING_SECRET}" not found' in chief, chief
    worker = verdict("worker")
    # The kubelet's message for the mount changes as it retries ('configmap "..." not found',
    # then 'failed to sync configmap cache: ...'): the verdict carries one of them, as listed.
    said = {
        e["message"]
        for e in events
        if e.get("reason") == "FailedMount"
        and e["involvedObject"]["name"] == pods["worker"]["metadata"]["name"]
    }
    assert "did not start" in worker and any(
        f"ContainerCreating (image {IMAGE}): FailedMount: {message}" in worker for message in said
    ), (worker, said)
    assert 'MountVolume.SetUp failed for volume "code"' in worker, worker
    ps = verdict("ps")
    assert "could not be scheduled" in ps and "unbound immediate PersistentVolumeClaims" in ps, ps
