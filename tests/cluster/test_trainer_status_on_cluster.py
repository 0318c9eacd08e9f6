"""The chief's progress under Kubeflow Trainer v2's names, on the real local cluster: the run
monitor writes it in the annotation tf-mnist.io/trainer-status of the chief's Job while the run
goes, and at the end 100 % with the chief's own last test accuracy, exactly as it logged it.

One stack (test_stack_on_cluster's fixtures: the real engine, kubeconfig mode, hostPath volume),
a prefix of its own, 2 epochs of the image's sample. The annotation is read with kubectl's
jsonpath and the chief's lines with ``kubectl logs`` and a regular expression of this file, not
with the project's parser.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
from datetime import UTC, datetime

import pytest

from infra.status.cost import NOT_READ

from .kube import Kube, job_condition
from .stack import paused_chief, run_status, wait_for_tasks
from .test_stack_on_cluster import TASKS, kube, stack  # noqa: F401 - the shared fixtures

pytestmark = pytest.mark.cluster

PREFIX = "prog"
CHIEF = f"{PREFIX}-chief-0"
JSONPATH = r"jsonpath={.metadata.annotations.tf-mnist\.io/trainer-status}"
USAGE_JSONPATH = r"jsonpath={.metadata.annotations.tf-mnist\.io/run-usage}"
#: The chief's cost and test accuracy as it prints them (trainer/contract/progress.py's lines).
COST = re.compile(r"(?:Cost: |done: cost |Final Cost: )(\S+?)[,\s]")
EPOCH_ACCURACY = re.compile(r"^Epoch \d+ of \d+ done: .*, test accuracy (\S+),", re.MULTILINE)
FINAL_ACCURACY = re.compile(r"^Test-Accuracy: (\S+)$", re.MULTILINE)


def _written(kube: Kube) -> dict | None:
    """The annotation of the chief's Job as kubectl reads it, None while there is none."""
    proc = kube.run("get", "job", CHIEF, "-o", JSONPATH, check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


def _metrics(status: dict) -> dict[str, str]:
    return {m["name"]: m["value"] for m in status["metrics"]}


def _caught_up(kube: Kube) -> dict | None:
    """The annotation once its loss is the newest cost in the chief's log, else None."""
    written = _written(kube)
    costs = COST.findall(kube.run("logs", f"job/{CHIEF}", check=False).stdout)
    return written if written and costs and _metrics(written).get("loss") == costs[-1] else None


def test_the_chiefs_job_carries_its_progress_while_it_runs_and_its_final_accuracy_at_the_end(
    stack, kube: Kube
) -> None:
    project, _ = stack
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        settings = {"namePrefix": PREFIX, "hyperparams.epochs": "2"}
        for key, value in settings.items():
            project.set_config(key, value, path=key != "namePrefix")
        up = pool.submit(project.pulumi, "up", "--yes", "--skip-preview", timeout=900)
        # The chief is stopped (SIGSTOP) once it has logged a Step line, so the run is still
        # going, however fast the machine, while the monitor reads its log and writes.
        kube.wait_for(
            "the chief's first Step line",
            lambda: "Step: " in kube.run("logs", f"job/{CHIEF}", check=False).stdout,
            timeout=600,
            every=1,
        )
        with paused_chief(kube, PREFIX):
            # The log stands still: the monitor catches up with it, its loss the newest cost the
            # chief printed, as it printed it.
            going = kube.wait_for(
                "the annotation of the stopped chief's newest cost",
                lambda: _caught_up(kube),
                timeout=180,
                every=2,
            )
            assert job_condition(kube, CHIEF) is None, "the chief's Job ended while it was stopped"
        up.result()
    print(f"\nwhile the run went: {going}")
    assert isinstance(going["progressPercentage"], int) and 0 <= going["progressPercentage"] < 100, going
    assert going["lastUpdatedTime"].endswith("Z"), going

    outcomes = wait_for_tasks(kube, PREFIX)
    assert outcomes == {f"{PREFIX}-{t}": "Complete" for t in TASKS}, outcomes
    # The monitor writes the final object before it exits: once its Job has completed, it is there.
    kube.wait_for(
        "the monitor Job to complete", lambda: job_condition(kube, f"{PREFIX}-monitor"), timeout=180
    )
    assert job_condition(kube, f"{PREFIX}-monitor") == "Complete"
    final = _written(kube)
    chief_log = kube.logs(f"job/{CHIEF}")
    last_epoch = EPOCH_ACCURACY.findall(chief_log)[-1]
    print(f"at the end: {final}; the chief's last test accuracy {last_epoch}")
    assert final is not None and final["progressPercentage"] == 100, final
    assert final["estimatedRemainingSeconds"] == 0, final
    assert _metrics(final)["test_accuracy"] == last_epoch == FINAL_ACCURACY.findall(chief_log)[-1], (
        final,
        chief_log[-2000:],
    )
    # infra.status shows the annotation as it is.
    shown = json.loads(run_status(kube, PREFIX, "-o", "json").stdout)
    assert (shown["trainer_status"], shown["trainer_status_source"]) == (final, "annotation"), shown
    _check_the_cost(kube, shown)


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _check_the_cost(kube: Kube, shown: dict) -> None:
    """The monitor's record of the task pods' spans and infra.status' estimate equal a hand
    computation from the pods' timestamps as kubectl reads them: each pod from status.startTime
    to its container's finishedAt, each node busy for the union of its pods' spans. The local
    cluster's node has no instance-type label: node-hours, no price, no total, and the estimate
    says why."""
    pods = [
        p
        for p in kube.get("pods", "")["items"]
        if p["metadata"].get("labels", {}).get("tf-replica-type")
        and p["metadata"]["labels"].get("job-name", "").startswith(f"{PREFIX}-")
    ]
    spans = {
        p["metadata"]["name"]: (
            p["spec"]["nodeName"],
            p["status"]["startTime"],
            max(c["state"]["terminated"]["finishedAt"] for c in p["status"]["containerStatuses"]),
        )
        for p in pods
    }
    assert len(spans) == len(TASKS), spans
    record = json.loads(kube.run("get", "job", CHIEF, "-o", USAGE_JSONPATH).stdout)
    print(f"the monitor's record: {record}; the pods: {spans}")
    # The monitor exits once the chief's Job completed: a ps or worker may still have run then.
    for entry in record["pods"]:
        node, start, end = spans[entry["pod"]]
        assert (entry["node"], entry["start"]) == (node, start), (entry, spans)
        assert entry["end"] in (end, None), (entry, spans)
        if entry["pod"].startswith(CHIEF):
            assert entry["end"] == end, (entry, spans)
    assert {e["pod"] for e in record["pods"]} == set(spans), record
    nodes = {node for node, _, _ in spans.values()}
    # The local node carries ACK's labels (tools/local-cluster's NODE_LABELS), an instance type
    # among them, read here with kubectl as infra.status reads it (either label, the GA one first).
    kinds = {}
    for node in nodes:
        labels = kube.get("node", node)["metadata"].get("labels", {})
        kinds[node] = (
            labels.get("node.kubernetes.io/instance-type") or labels["beta.kubernetes.io/instance-type"]
        )
    busy = {}
    for node in nodes:
        mine = sorted((_seconds(s), _seconds(e)) for n, s, e in spans.values() if n == node)
        total, reach = 0.0, mine[0][0]
        for start, end in mine:
            total += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        busy[node] = round(total)
    cost = shown["cost"]
    assert cost["total"] is None and cost["priced"] == 0, cost
    assert cost["missing"] == [f"no price for {kinds[n]}: {NOT_READ}" for n in sorted(nodes)], cost
    assert {n["node"]: n["busySeconds"] for n in cost["nodes"]} == busy, (cost, spans)
    assert cost["start"] == min(s for _, s, _ in spans.values()), cost
    assert cost["end"] == max(e for _, _, e in spans.values()), cost
    # infra.status is given --kubeconfig, --namespace and --prefix: it reads no stack output, and
    # the local cluster has no price source anyway (infra/instance_prices.py).
    assert cost["prices"] == f"no price: {NOT_READ}", cost
