"""infra.status's cost estimate (infra/status/cost.py) over recorded objects: the task pods'
spans (live, or the run monitor's record on the chief's Job once the pods are gone) priced with
the nodes' instance-type labels and a price table, always with its source and date. Expected
numbers are computed by hand in the comments."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from test_status import Recorded, job

from infra import run_cost, status
from infra.values import prices

#: 2026-01-02T10:20:00Z, after the run.
NOW = datetime(2026, 1, 2, 10, 20, 0, tzinfo=UTC)
CPU_NODE, GPU_NODE = "cn-hangzhou.10.0.1.5", "cn-hangzhou.10.0.1.6"
ARGS = ["--kubeconfig", "k.yaml", "--namespace", "default", "--prefix", "mnist"]


@pytest.fixture(autouse=True)
def table(monkeypatch):
    """Prices of this test's own, so that a new entry of the real table changes nothing here."""

    def price(amount: float, unit: str = "hour") -> prices.Price:
        return prices.Price(amount, unit, "test page", "2026-12-07")

    monkeypatch.setattr(
        prices,
        "INSTANCE_PRICES",
        {"cn-hangzhou": {"ecs.g6.xlarge": price(1.0), "ecs.gn5-c4g1.xlarge": price(8.0)}},
    )
    monkeypatch.setattr(prices, "ACK_PRO_FEE", {"cn-hangzhou": price(0.6)})
    monkeypatch.setattr(prices, "NAS_CAPACITY", {"cn-hangzhou": price(0.35, "GiB-month")})


def task_job(task_type: str) -> dict:
    found = job(task_type, 0, condition="Complete")
    found["metadata"]["uid"] = f"uid-{task_type}"
    return found


def pod(task_type: str, node: str, start: str, end: str) -> dict:
    """A finished task pod: placed on ``node`` at ``start``, its container terminated at ``end``."""
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"mnist-{task_type}-0-x1",
            "creationTimestamp": start,
            "labels": {"app.kubernetes.io/instance": "mnist", "job-name": f"mnist-{task_type}-0"},
            "ownerReferences": [{"kind": "Job", "uid": f"uid-{task_type}"}],
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Succeeded",
            "startTime": start,
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "startedAt": start, "finishedAt": end}},
                }
            ],
        },
    }


def node(name: str, labels: dict[str, str]) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def ack_node(name: str, instance_type: str) -> dict:
    return node(
        name,
        {
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": "cn-hangzhou",
            "alibabacloud.com/nodepool-id": "np-1",
        },
    )


def finished() -> tuple[list[dict], list[dict]]:
    """(the run's objects, the nodes): the chief and the ps on the CPU node, the worker on the
    GPU node."""
    objects = [
        task_job("chief"),
        task_job("worker"),
        task_job("ps"),
        pod("chief", CPU_NODE, "2026-01-02T10:00:00Z", "2026-01-02T10:12:30Z"),
        pod("ps", CPU_NODE, "2026-01-02T10:00:10Z", "2026-01-02T10:13:00Z"),
        pod("worker", GPU_NODE, "2026-01-02T10:00:20Z", "2026-01-02T10:12:20Z"),
    ]
    return objects, [ack_node(CPU_NODE, "ecs.g6.xlarge"), ack_node(GPU_NODE, "ecs.gn5-c4g1.xlarge")]


def test_the_view_and_its_json_show_the_estimate_with_its_sources_and_date(capsys):
    objects, nodes = finished()
    cluster = Recorded(objects, {}, nodes=nodes)
    run = status.collect(cluster, "mnist", "default", NOW)
    # CPU node: chief 10:00:00-10:12:30 and ps 10:00:10-10:13:00, one span of 780 s
    #   = 0.21667 h x 1.0 = 0.2167 -> 0.22 CNY.
    # GPU node: worker 10:00:20-10:12:20 = 720 s = 0.2 h x 8.0 = 1.60 CNY.
    # ACK Pro fee over the run 10:00:00-10:13:00 = 0.21667 h x 0.6 = 0.13 CNY.
    # Total 0.22 + 1.60 + 0.13 = 1.95 CNY.
    cost = run.cost
    assert cost is not None
    assert (cost["total"], cost["region"], cost["spansFrom"]) == (1.95, "cn-hangzhou", "pods")
    assert [(n["instanceType"], n["busySeconds"], n["cost"]) for n in cost["nodes"]] == [
        ("ecs.g6.xlarge", 780, 0.22),
        ("ecs.gn5-c4g1.xlarge", 720, 1.6),
    ]
    assert cost["clusterFee"]["cost"] == 0.13
    lines = [line for line in status.render(run).splitlines() if line.startswith(("Cost:", "    "))]
    assert lines[:3] == [
        "Cost:        1.95 CNY (2026-01-02T10:00:00Z to 2026-01-02T10:13:00Z; list prices, not the bill)",
        f"             prices: {prices.TABLE_SOURCE}",
        f"             {CPU_NODE} (ecs.g6.xlarge): 0.217 h x 1 = 0.22 CNY; 1 CNY/hour (test page, read 2026-12-07, "
        f"{prices.UNVERIFIED})",
    ]
    assert (
        "             cluster fee: 0.217 h x 0.6 = 0.13 CNY; 0.6 CNY/hour (test page, read 2026-12-07, "
        f"{prices.UNVERIFIED})"
    ) in lines
    assert "read 2026-12-07" in prices.TABLE_SOURCE
    assert status.main([*ARGS, "-o", "json"], cluster=cluster, clock=lambda: NOW) == status.EXIT_FINISHED
    shown = json.loads(capsys.readouterr().out)
    assert shown["cost"]["total"] == 1.95 and shown["cost"]["prices"] == prices.TABLE_SOURCE


def test_once_the_pods_are_gone_the_monitors_record_still_prices_the_run():
    objects, nodes = finished()
    pods = [o for o in objects if o["kind"] == "Pod"]
    record = run_cost.record(pods, None, NOW.timestamp())
    jobs = [o for o in objects if o["kind"] == "Job"]
    jobs[0]["metadata"]["annotations"] = {run_cost.ANNOTATION: json.dumps(record)}
    run = status.collect(Recorded(jobs, {}, nodes=nodes), "mnist", "default", NOW)
    assert run.cost is not None
    assert (run.cost["total"], run.cost["spansFrom"]) == (1.95, "record")


def test_a_node_without_an_instance_type_label_gives_no_total_and_says_so():
    # The local cluster: one node, no instance-type or region label, no ACK pool label.
    objects, _ = finished()
    for found in objects:
        if found["kind"] == "Pod":
            found["spec"]["nodeName"] = "local"
    run = status.collect(
        Recorded(objects, {}, nodes=[node("local", {"kubernetes.io/hostname": "local"})]),
        "mnist",
        "default",
        NOW,
    )
    cost = run.cost
    assert cost is not None
    # One node busy 10:00:00-10:13:00: 780 s, no price, no cluster fee.
    assert (cost["total"], cost["priced"], cost["clusterFee"], cost["region"]) == (None, 0.0, None, None)
    assert [(n["busySeconds"], n["missing"]) for n in cost["nodes"]] == [
        (780, "node local has no instance-type label")
    ]
    head = next(line for line in status.render(run).splitlines() if line.startswith("Cost:"))
    assert head == (
        "Cost:        no total: node local has no instance-type label (0.00 CNY priced; "
        "2026-01-02T10:00:00Z to 2026-01-02T10:13:00Z)"
    )


def test_nodes_that_cannot_be_read_and_a_region_without_prices_say_so():
    objects, nodes = finished()
    run = status.collect(Recorded(objects, {}, nodes=[]), "mnist", "default", NOW)
    assert run.cost is not None and run.cost["total"] is None
    assert run.cost["missing"][0].startswith(f"node {CPU_NODE} not readable")
    for found in nodes:
        found["metadata"]["labels"]["topology.kubernetes.io/region"] = "eu-central-1"
    run = status.collect(Recorded(objects, {}, nodes=nodes), "mnist", "default", NOW)
    assert run.cost is not None
    assert run.cost["missing"] == [
        "no price for ecs.g6.xlarge in eu-central-1",
        "no price for ecs.gn5-c4g1.xlarge in eu-central-1",
    ]
    assert run.cost["clusterFee"] is None and run.cost["nasPrice"] is None


def test_no_started_task_pod_no_estimate():
    objects, nodes = finished()
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert status.collect(Recorded(jobs, {}, nodes=nodes), "mnist", "default", NOW).cost is None
