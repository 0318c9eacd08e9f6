"""A run's cost (infra/run_cost.py): each node's busy time, the union of its task pods' spans
from their recorded start and end, times its instance type's price; the run monitor's record of
the spans on the chief's Job; and what a node without a price says. Every expected number is
computed by hand in the comments."""

from __future__ import annotations

import copy

import pytest
from test_run_monitor import ENV, RUN_ID, RecordedApi, job

from infra import run_cost as rc
from infra import run_monitor as rm

#: 2026-01-02T10:20:00Z, after the run below.
NOW = 1767349200.0
T0 = 1767348000.0  # 2026-01-02T10:00:00Z
A, B, C = "cn-hangzhou.10.0.1.5", "cn-hangzhou.10.0.1.6", "cn-hangzhou.10.0.1.7"


def task_job(task_type: str, index: int = 0) -> dict:
    found = job(task_type, index)
    found["metadata"]["uid"] = f"uid-{task_type}-{index}"
    return found


def pod(
    task_type: str,
    index: int,
    node: str | None,
    start: str | None,
    end: str | None = None,
    *,
    container_start: str | None = None,
) -> dict:
    """A task pod as the API lists it: placed on ``node`` at ``start`` (status.startTime), its
    one container terminated at ``end`` (None: running since ``container_start`` or ``start``)."""
    started = container_start or start
    state = (
        {"terminated": {"exitCode": 0, "startedAt": started, "finishedAt": end}}
        if end
        else {"running": {"startedAt": started}}
    )
    status = {
        "phase": "Succeeded" if end else "Running",
        "containerStatuses": [{"name": "tensorflow", "state": state}],
    }
    if start and not container_start:
        status["startTime"] = start
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"mnist-{task_type}-{index}-x1",
            "labels": {"job-name": f"mnist-{task_type}-{index}", "tf-replica-type": task_type},
            "ownerReferences": [{"kind": "Job", "uid": f"uid-{task_type}-{index}"}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def finished_run() -> list[dict]:
    """The chief and the ps on node A, one worker each on nodes B and C."""
    return [
        pod("chief", 0, A, "2026-01-02T10:00:00Z", "2026-01-02T10:12:30Z"),
        pod("ps", 0, A, "2026-01-02T10:00:10Z", "2026-01-02T10:13:00Z"),
        pod("worker", 0, B, "2026-01-02T10:00:20Z", "2026-01-02T10:12:20Z"),
        pod("worker", 1, C, "2026-01-02T10:00:20Z", "2026-01-02T10:12:50Z"),
    ]


#: This test's own prices per hour, made up for the arithmetic: no provider's figures.
CPU = rc.NodePrice("ecs.g6.xlarge", 1.07, "test price")
GPU = rc.NodePrice("ecs.gn5-c4g1.xlarge", 8.55, "test price")
FEE = rc.NodePrice(None, 0.64, "test price")


def spans(pods: list[dict]) -> list[rc.PodSpan]:
    return [s for s in (rc.pod_span(p) for p in pods) if s is not None]


def test_a_pods_span_is_from_its_start_on_the_node_to_its_containers_last_end():
    chief = rc.pod_span(finished_run()[0])
    assert chief == rc.PodSpan("mnist-chief-0-x1", A, T0, T0 + 750)  # 10:00:00 to 10:12:30
    # Without status.startTime: the container's start; running: no end yet.
    running = rc.pod_span(pod("worker", 0, B, None, container_start="2026-01-02T10:01:00Z"))
    assert running == rc.PodSpan("mnist-worker-0-x1", B, T0 + 60, None)
    # Failed without a container's end (deleted before it ran): its conditions' last change.
    failed = pod("ps", 0, A, "2026-01-02T10:00:00Z")
    failed["status"] = {
        "phase": "Failed",
        "startTime": "2026-01-02T10:00:00Z",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-02T10:05:00Z"}],
    }
    assert rc.pod_span(failed) == rc.PodSpan("mnist-ps-0-x1", A, T0, T0 + 300)
    # Never placed, or placed and not started: no span.
    assert rc.pod_span(pod("worker", 1, None, "2026-01-02T10:00:00Z")) is None
    assert rc.pod_span({"metadata": {"name": "p"}, "spec": {"nodeName": A}, "status": {}}) is None


def test_a_nodes_busy_time_is_the_union_of_its_pods_spans():
    # 0-750 and 10-780 overlap: 0-780; 900-960 apart: 60 more.
    assert rc.busy_seconds([(0, 750), (10, 780), (900, 960)]) == 840
    assert rc.busy_seconds([]) == 0


def test_the_estimate_equals_the_hand_computation_from_the_pods_timestamps():
    found = rc.estimate(spans(finished_run()), {A: CPU, B: GPU, C: GPU}, NOW, currency="CNY", cluster_fee=FEE)
    # Node A: the chief 10:00:00-10:12:30 and the ps 10:00:10-10:13:00 are one span,
    #   10:00:00-10:13:00 = 780 s = 0.21667 h x 1.07 = 0.2318 -> 0.23 CNY.
    # Node B: worker 0 10:00:20-10:12:20 = 720 s = 0.2 h x 8.55 = 1.71 CNY.
    # Node C: worker 1 10:00:20-10:12:50 = 750 s = 0.20833 h x 8.55 = 1.7813 -> 1.78 CNY.
    # The cluster fee over the run, 10:00:00-10:13:00 = 0.21667 h x 0.64 = 0.1387 -> 0.14 CNY.
    # Total 0.23 + 1.71 + 1.78 + 0.14 = 3.86 CNY.
    assert [(n["node"], n["busySeconds"], n["cost"]) for n in found["nodes"]] == [
        (A, 780, 0.23),
        (B, 720, 1.71),
        (C, 750, 1.78),
    ]
    assert found["nodes"][0]["pods"] == ["mnist-chief-0-x1", "mnist-ps-0-x1"]
    assert found["nodes"][1]["source"] == "test price"
    assert found["clusterFee"] == {"pricePerHour": 0.64, "hours": 0.2167, "cost": 0.14, "source": FEE.source}
    assert (found["total"], found["priced"], found["missing"]) == (3.86, 3.86, [])
    assert (found["start"], found["end"], found["running"]) == (
        "2026-01-02T10:00:00Z",
        "2026-01-02T10:13:00Z",
        False,
    )


def test_a_running_pod_counts_to_now():
    running = [pod("chief", 0, A, "2026-01-02T10:00:00Z")]
    found = rc.estimate(spans(running), {A: CPU}, NOW, currency="CNY")
    # 10:00:00 to now, 10:20:00: 1200 s = 0.33333 h x 1.07 = 0.3567 -> 0.36 CNY; no cluster fee.
    assert (found["nodes"][0]["busySeconds"], found["total"], found["running"]) == (1200, 0.36, True)
    assert found["clusterFee"] is None


def test_an_instance_type_without_a_price_or_a_node_without_a_type_gives_no_total_but_says_why():
    # This test's own price and reasons, not real ones: it checks the arithmetic and the words.
    table, why = {"ecs.g6.xlarge": 1.07}, {"ecs.gn7i-c8g1.2xlarge": "none returned"}
    gpu_node = {
        "metadata": {"name": B, "labels": {"node.kubernetes.io/instance-type": "ecs.gn7i-c8g1.2xlarge"}}
    }
    cpu_node = {"metadata": {"name": A, "labels": {"beta.kubernetes.io/instance-type": "ecs.g6.xlarge"}}}
    local_node = {"metadata": {"name": C, "labels": {"kubernetes.io/hostname": C}}}
    prices = {
        A: rc.node_price(cpu_node, A, table, "lookup, 2026-01-02", why),
        B: rc.node_price(gpu_node, B, table, "lookup, 2026-01-02", why),
        C: rc.node_price(local_node, C, table, "lookup, 2026-01-02", why),
    }
    assert prices[A] == rc.NodePrice("ecs.g6.xlarge", 1.07, "lookup, 2026-01-02")
    assert prices[B].missing == "no price for ecs.gn7i-c8g1.2xlarge: none returned"
    assert prices[C].missing == f"node {C} has no instance-type label"
    assert rc.node_price(None, C, table, "", why).missing.startswith(f"node {C} not readable")
    # A type with no reason of its own: the general one, else "not looked up".
    assert (
        rc.node_price(cpu_node, A, {}, "", {"": "offline"}).missing == "no price for ecs.g6.xlarge: offline"
    )
    assert rc.node_price(cpu_node, A, {}, "", {}).missing == "no price for ecs.g6.xlarge: not looked up"
    found = rc.estimate(spans(finished_run()), prices, NOW, currency="CNY")
    # Only node A has a price: 0.23 CNY (above), and no total.
    assert (found["total"], found["priced"]) == (None, 0.23)
    assert found["missing"] == [
        "no price for ecs.gn7i-c8g1.2xlarge: none returned",
        f"node {C} has no instance-type label",
    ]
    assert [n["cost"] for n in found["nodes"]] == [0.23, None, None]
    # A node missing from the prices entirely: its type is not known.
    assert rc.estimate(spans(finished_run()), {}, NOW, currency="CNY")["missing"][0] == (
        f"no instance type known for node {A}"
    )


def test_the_record_keeps_a_deleted_pods_span_and_ends_a_running_one_when_it_goes():
    pods = [pod("chief", 0, A, "2026-01-02T10:00:00Z"), pod("worker", 0, B, "2026-01-02T10:00:20Z")]
    first = rc.record(pods, None, NOW - 60)
    assert first == {
        "pods": [
            {"pod": "mnist-chief-0-x1", "node": A, "start": "2026-01-02T10:00:00Z", "end": None},
            {"pod": "mnist-worker-0-x1", "node": B, "start": "2026-01-02T10:00:20Z", "end": None},
        ]
    }
    # The worker's pod is deleted (its Job ended): it ends at the poll that misses it.
    second = rc.record(pods[:1], first, NOW)
    assert second["pods"][1] == {
        "pod": "mnist-worker-0-x1",
        "node": B,
        "start": "2026-01-02T10:00:20Z",
        "end": "2026-01-02T10:20:00Z",
    }
    assert rc.record(pods[:1], second, NOW + 60) == second
    assert [s.end for s in rc.spans_of(second)] == [None, NOW]


def test_the_monitor_records_the_task_pods_spans_on_the_chiefs_job_when_they_change():
    jobs = [task_job("chief"), task_job("worker"), task_job("ps")]
    pods = [
        pod("chief", 0, A, "2026-01-02T10:00:00Z"),
        pod("ps", 0, A, "2026-01-02T10:00:10Z"),
        pod("worker", 0, B, "2026-01-02T10:00:20Z"),
        # A pod of a replaced Job (another uid): not this run's.
        {**pod("worker", 1, C, "2026-01-02T09:00:00Z"), "metadata": {"name": "old", "ownerReferences": []}},
    ]
    api = RecordedApi(jobs, pods)
    turns = iter(range(3))

    def sleep(seconds: float) -> None:
        turn = next(turns)
        if turn == 1:  # the chief is done: its pod terminated, its Job complete
            api.pods[0] = pod("chief", 0, A, "2026-01-02T10:00:00Z", "2026-01-02T10:12:30Z")
            api.jobs[0]["status"]["conditions"] = [{"type": "Complete", "status": "True"}]

    clock = iter(NOW + 5 * i for i in range(100))
    assert rm.main({**ENV, "MONITOR_RUN_ID": RUN_ID}, api=api, clock=lambda: next(clock), sleep=sleep) == 0
    records = [v[rc.ANNOTATION] for _, name, v in api.annotated if rc.ANNOTATION in v]
    # Written once at the start, not again while nothing changed, once more at the chief's end.
    assert len(records) == 2
    final = rc.read(api.jobs[0])
    assert final == {
        "pods": [
            {
                "pod": "mnist-chief-0-x1",
                "node": A,
                "start": "2026-01-02T10:00:00Z",
                "end": "2026-01-02T10:12:30Z",
            },
            {"pod": "mnist-ps-0-x1", "node": A, "start": "2026-01-02T10:00:10Z", "end": None},
            {"pod": "mnist-worker-0-x1", "node": B, "start": "2026-01-02T10:00:20Z", "end": None},
        ]
    }


def test_a_refused_write_is_logged_once_and_never_stops_the_watch():
    jobs = [task_job("chief")]
    api = RecordedApi(jobs, [pod("chief", 0, A, "2026-01-02T10:00:00Z")])

    def refused(namespace: str, name: str, annotations: dict) -> None:
        raise rm.ApiError("PATCH jobs/mnist-chief-0: HTTP 403: forbidden")

    api.annotate_job = refused
    notes: list[str] = []
    recorder = rc.Recorder(api, "training", notes.append)
    for _ in range(3):
        recorder.poll(copy.deepcopy(jobs[0]), jobs, api.pods, NOW)
    assert notes == [
        "cannot record the run's pods' spans (PATCH jobs/mnist-chief-0: HTTP 403: forbidden): tried again next poll"
    ]


@pytest.mark.parametrize("text", ["{not json", "[1]", None])
def test_a_record_that_is_no_json_object_reads_as_none(text):
    annotations = {} if text is None else {rc.ANNOTATION: text}
    assert rc.read({"metadata": {"annotations": annotations}}) is None
