"""infra.status's cost estimate (infra/status/cost.py) over recorded objects: the task pods'
spans (live, or the run monitor's record on the chief's Job once the pods are gone) priced with
the nodes' instance-type labels and the stack output ``prices`` that `pulumi up` looked up
(infra/instance_prices.py), always with its source and date, or "no price" and why. Expected
numbers are computed by hand in the comments."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from test_status import Recorded, job

from infra import run_cost, status
from infra.status import cost as status_cost

#: 2026-01-02T10:20:00Z, after the run.
NOW = datetime(2026, 1, 2, 10, 20, 0, tzinfo=UTC)
CPU_NODE, GPU_NODE = "cn-hangzhou.10.0.1.5", "cn-hangzhou.10.0.1.6"
ARGS = ["--kubeconfig", "k.yaml", "--namespace", "default", "--prefix", "mnist"]
#: A stack output ``prices`` of this test's own, made up for the arithmetic: no provider's figures.
PRICES = {
    "source": "alicloud.ecs.get_instance_types (test), region cn-hangzhou",
    "date": "2026-01-02",
    "perHour": {"ecs.g6.xlarge": 1.0, "ecs.gn5-c4g1.xlarge": 8.0},
    "missing": {"ecs.gn6i-c4g1.xlarge": "none returned (test)"},
}
SOURCE = "alicloud.ecs.get_instance_types (test), region cn-hangzhou, looked up 2026-01-02"


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


def test_the_view_and_its_json_show_the_estimate_with_its_source_and_date(capsys):
    objects, nodes = finished()
    cluster = Recorded(objects, {}, nodes=nodes)
    run = status.collect(cluster, "mnist", "default", NOW, prices=PRICES, outputs_read=True)
    # CPU node: chief 10:00:00-10:12:30 and ps 10:00:10-10:13:00, one span of 780 s
    #   = 0.21667 h x 1.0 = 0.2167 -> 0.22.
    # GPU node: worker 10:00:20-10:12:20 = 720 s = 0.2 h x 8.0 = 1.60.
    # Total 0.22 + 1.60 = 1.82; no cluster fee (no source for one).
    cost = run.cost
    assert cost is not None
    assert (cost["total"], cost["region"], cost["spansFrom"]) == (1.82, "cn-hangzhou", "pods")
    assert [(n["instanceType"], n["busySeconds"], n["cost"]) for n in cost["nodes"]] == [
        ("ecs.g6.xlarge", 780, 0.22),
        ("ecs.gn5-c4g1.xlarge", 720, 1.6),
    ]
    assert cost["clusterFee"] is None and cost["prices"] == SOURCE
    assert {n["source"] for n in cost["nodes"]} == {SOURCE}
    lines = [line for line in status.render(run).splitlines() if line.startswith(("Cost:", "    "))]
    assert lines[:5] == [
        "Cost:        1.82 in the account's currency (2026-01-02T10:00:00Z to 2026-01-02T10:13:00Z; "
        "list prices, not the bill)",
        f"             prices: {SOURCE}",
        f"             {CPU_NODE} (ecs.g6.xlarge): 0.217 h x 1 = 0.22 in the account's currency",
        f"             {GPU_NODE} (ecs.gn5-c4g1.xlarge): 0.200 h x 8 = 1.60 in the account's currency",
        "             not included: the cluster's fee, NAS, disks, traffic (no price source)",
    ]
    # The stack's outputs read (no --kubeconfig): their prices price the run.
    argv = ["--namespace", "default", "--prefix", "mnist", "-o", "json"]
    code = status.main(argv, cluster=cluster, outputs=lambda: {"prices": PRICES}, clock=lambda: NOW)
    assert code == status.EXIT_FINISHED
    shown = json.loads(capsys.readouterr().out)
    assert shown["cost"]["total"] == 1.82 and shown["cost"]["prices"] == SOURCE


def test_once_the_pods_are_gone_the_monitors_record_still_prices_the_run():
    objects, nodes = finished()
    pods = [o for o in objects if o["kind"] == "Pod"]
    record = run_cost.record(pods, None, NOW.timestamp())
    jobs = [o for o in objects if o["kind"] == "Job"]
    jobs[0]["metadata"]["annotations"] = {run_cost.ANNOTATION: json.dumps(record)}
    run = status.collect(
        Recorded(jobs, {}, nodes=nodes), "mnist", "default", NOW, prices=PRICES, outputs_read=True
    )
    assert run.cost is not None
    assert (run.cost["total"], run.cost["spansFrom"]) == (1.82, "record")


def test_a_node_without_an_instance_type_label_shows_node_hours_and_says_why_no_price():
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
        prices={"none": "a cluster the kubeconfig names (test)"},
        outputs_read=True,
    )
    cost = run.cost
    assert cost is not None
    # One node busy 10:00:00-10:13:00: 780 s = 0.217 h, no price, no total.
    assert (cost["total"], cost["priced"], cost["clusterFee"], cost["region"]) == (None, 0.0, None, None)
    assert [(n["busySeconds"], n["missing"]) for n in cost["nodes"]] == [
        (780, "node local has no instance-type label")
    ]
    assert cost["prices"] == "no price: a cluster the kubeconfig names (test)"
    lines = [line for line in status.render(run).splitlines() if line.startswith(("Cost:", "    "))]
    assert lines[:3] == [
        "Cost:        0.217 node-hours, no total (2026-01-02T10:00:00Z to 2026-01-02T10:13:00Z)",
        "             prices: no price: a cluster the kubeconfig names (test)",
        "             local (type unknown): 0.217 h, node local has no instance-type label",
    ]


def test_nodes_that_cannot_be_read_and_a_type_without_a_price_say_so():
    objects, nodes = finished()
    run = status.collect(
        Recorded(objects, {}, nodes=[]), "mnist", "default", NOW, prices=PRICES, outputs_read=True
    )
    assert run.cost is not None and run.cost["total"] is None
    assert run.cost["missing"][0].startswith(f"node {CPU_NODE} not readable")
    nodes[1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "ecs.gn6i-c4g1.xlarge"
    nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "ecs.c7.large"
    run = status.collect(
        Recorded(objects, {}, nodes=nodes), "mnist", "default", NOW, prices=PRICES, outputs_read=True
    )
    assert run.cost is not None
    assert run.cost["missing"] == [
        "no price for ecs.c7.large: not a node pool's type when looked up 2026-01-02",
        "no price for ecs.gn6i-c4g1.xlarge: none returned (test)",
    ]


def test_without_the_lookups_output_node_hours_and_why_there_is_no_price(capsys):
    objects, nodes = finished()
    cluster = Recorded(objects, {}, nodes=nodes)
    for prices, read, why in [
        (None, False, status_cost.NOT_READ),
        (None, True, status_cost.NO_OUTPUT),
        ({"none": "the price lookup failed (test)"}, True, "the price lookup failed (test)"),
    ]:
        cost = status.collect(cluster, "mnist", "default", NOW, prices=prices, outputs_read=read).cost
        assert cost is not None
        assert (cost["total"], cost["prices"]) == (None, f"no price: {why}"), cost
        assert [n["missing"] for n in cost["nodes"]] == [
            f"no price for ecs.g6.xlarge: {why}",
            f"no price for ecs.gn5-c4g1.xlarge: {why}",
        ]
        assert [n["busySeconds"] for n in cost["nodes"]] == [780, 720]
    # --kubeconfig, --namespace and --prefix given: the outputs are not read, nor their prices.
    assert status.main([*ARGS, "-o", "json"], cluster=cluster, clock=lambda: NOW) == status.EXIT_FINISHED
    assert json.loads(capsys.readouterr().out)["cost"]["prices"] == f"no price: {status_cost.NOT_READ}"


def test_no_started_task_pod_no_estimate():
    objects, nodes = finished()
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert status.collect(Recorded(jobs, {}, nodes=nodes), "mnist", "default", NOW).cost is None
