"""What a run used and what that costs: each node's busy time from the run's task pods' start
and end, times the node's instance type's price per hour.

The rule (docs/design.md, "What a run cost"):

* a task pod's span runs from ``status.startTime`` (the kubelet took the pod: its image pull
  holds the node too), else its first container's ``startedAt``, to the latest ``finishedAt`` of
  its containers once all have terminated (a pod that ended without them: its conditions' last
  change), else ``now``; a pod never placed on a node, or not started, has none;
* a node's busy time is the union of its pods' spans: a node is billed whole while it is up, so
  two pods on one node (the ps beside the chief) are one node's hours, not two; with one task pod
  a GPU node, the node's busy time is that pod's span;
* a node's cost is its busy hours times its instance type's price (the node's label
  ``node.kubernetes.io/instance-type``, or ``beta.kubernetes.io/instance-type``; ACK sets both);
  a type without a price, or a node whose type is unknown, gives no number but says so, and then
  the run has no total, only the sum of what has a price;
* the cluster's fee (ACK Pro's per cluster-hour) counts over the run's span, first start to last
  end, when the caller passes it.

The run monitor (infra/run_monitor.py) keeps the record of the spans (``Recorder``) in the
annotation ``ANNOTATION`` of the run's chief Job, so that the pods that Kubernetes deletes (a Job
ended, a new run) still count; ``python -m infra.status`` prices it with the nodes' types.

Standard library only: the monitor's ConfigMap delivers this file beside run_monitor.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.monitor_api import Calls

#: The chief Job's annotation that holds the record of the run's pods' spans, JSON.
ANNOTATION = "tf-mnist.io/run-usage"
TASK_TYPE_LABEL = "tf-replica-type"
#: The node labels of its instance type, in the order read (Kubernetes' well-known label, then
#: its deprecated beta name).
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


@dataclass(frozen=True)
class PodSpan:
    """One pod's time on a node: ``start`` and ``end`` in seconds since the epoch; ``end`` None
    while it runs."""

    pod: str
    node: str
    start: float
    end: float | None


@dataclass(frozen=True)
class NodePrice:
    """A node's price: ``per_hour`` in the prices' currency, None with ``missing`` saying why
    (``no price for ecs.x: ...``); ``source`` the price's source and date."""

    instance_type: str | None
    per_hour: float | None
    source: str = ""
    missing: str = ""


def parse_time(stamp: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp (``2026-01-02T11:50:00Z``), or None."""
    if not stamp:
        return None
    whole = stamp.split(".", 1)[0].rstrip("Z")
    return datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as ``2026-01-02T12:00:00Z``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_span(pod: Mapping) -> PodSpan | None:
    """The pod's span (module docstring), None for a pod with no node or not started."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    states = [c.get("state") or {} for c in status.get("containerStatuses") or []]
    started = [parse_time((s.get("running") or s.get("terminated") or {}).get("startedAt")) for s in states]
    start = parse_time(status.get("startTime")) or min((t for t in started if t), default=None)
    if not node or start is None:
        return None
    ends = [parse_time((s.get("terminated") or {}).get("finishedAt")) for s in states]
    done = [e for e in ends if e is not None]
    end = max(done) if done and len(done) == len(ends) else None
    if end is None and status.get("phase") in ("Succeeded", "Failed"):  # ended, no container's end
        changes = [parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []]
        end = max([start, *(t for t in changes if t is not None)])
    return PodSpan(pod["metadata"]["name"], node, start, end)


def busy_seconds(spans: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``spans`` ((start, end) in seconds)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def estimate(
    spans: Sequence[PodSpan],
    prices: Mapping[str, NodePrice],
    now: float,
    *,
    currency: str,
    cluster_fee: NodePrice | None = None,
) -> dict[str, Any]:
    """The run's cost: JSON-ready.

    Args:
        spans: the run's pods' spans; a running one (``end`` None) counts to ``now``.
        prices: node name -> its price (a node missing here: its type is unknown).
        now: seconds since the epoch.
        currency: the prices' currency, as printed after an amount.
        cluster_fee: the cluster's fee per hour, counted over the run's span; None: none.

    Returns:
        ``{"currency", "total": float or None (some node has no price), "priced": the sum of
        what has a price, "start", "end" (RFC 3339), "running": bool, "nodes": [{"node",
        "instanceType", "busySeconds", "pricePerHour", "cost", "source", "missing", "pods"}],
        "clusterFee": {"pricePerHour", "hours", "cost", "source"} or None, "missing": [why]}``,
        costs rounded to 0.01; ``{"nodes": [], "total": None, ...}`` before any pod started.
    """
    by_node: dict[str, list[PodSpan]] = {}
    for span in spans:
        by_node.setdefault(span.node, []).append(span)
    nodes, missing, priced = [], [], 0.0
    for node, mine in sorted(by_node.items()):
        seconds = busy_seconds([(s.start, s.end if s.end is not None else now) for s in mine])
        price = prices.get(node) or NodePrice(None, None, missing=f"no instance type known for node {node}")
        cost = None if price.per_hour is None else round(seconds / 3600 * price.per_hour, 2)
        if cost is None:
            missing.append(price.missing)
        else:
            priced += cost
        nodes.append(
            {
                "node": node,
                "instanceType": price.instance_type,
                "busySeconds": round(seconds),
                "pricePerHour": price.per_hour,
                "cost": cost,
                "source": price.source,
                "missing": price.missing or None,
                "pods": sorted(s.pod for s in mine),
            }
        )
    start = min((s.start for s in spans), default=None)
    end = max((s.end if s.end is not None else now for s in spans), default=None)
    fee = None
    if cluster_fee is not None and cluster_fee.per_hour is not None and start is not None and end is not None:
        hours = (end - start) / 3600
        fee_cost = round(hours * cluster_fee.per_hour, 2)
        fee = {
            "pricePerHour": cluster_fee.per_hour,
            "hours": round(hours, 4),
            "cost": fee_cost,
            "source": cluster_fee.source,
        }
        priced += fee_cost
    return {
        "currency": currency,
        "total": round(priced, 2) if nodes and not missing else None,
        "priced": round(priced, 2),
        "start": rfc3339(start) if start is not None else None,
        "end": rfc3339(end) if end is not None else None,
        "running": any(s.end is None for s in spans),
        "nodes": nodes,
        "clusterFee": fee,
        "missing": missing,
    }


def node_price(
    node: Mapping | None, name: str, per_hour: Mapping[str, float], source: str, why: Mapping[str, str]
) -> NodePrice:
    """The price of the node ``name`` (its object as listed, None: not readable).

    Args:
        per_hour: instance type -> its price per hour.
        source: what produced ``per_hour`` and when, printed beside each price.
        why: instance type -> why it has no price; a type in neither: ``why[""]``, else
            "not looked up".
    """
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    kind = next((labels[k] for k in INSTANCE_TYPE_LABELS if labels.get(k)), None)
    if node is None:
        return NodePrice(None, None, missing=f"node {name} not readable (gone, or nodes not listable)")
    if kind is None:
        return NodePrice(None, None, missing=f"node {name} has no instance-type label")
    amount = per_hour.get(kind)
    if amount is None:
        return NodePrice(
            kind, None, missing=f"no price for {kind}: {why.get(kind) or why.get('') or 'not looked up'}"
        )
    return NodePrice(kind, amount, source)


def region_of(nodes: Sequence[Mapping]) -> str | None:
    """The region of the first node that has a region label, or None."""
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        found = next((labels[k] for k in REGION_LABELS if labels.get(k)), None)
        if found:
            return found
    return None


def record(pods: Sequence[Mapping], before: Mapping | None, now: float) -> dict[str, Any]:
    """The record of the spans: ``{"pods": [{"pod", "node", "start", "end"}], ...}`` (times in
    RFC 3339, ``end`` None while running), of ``pods`` (the run's task pods as listed) and of
    ``before``'s pods no longer listed (deleted: a pod recorded running ends ``now``, within one
    poll of its deletion)."""
    spans = {s.pod: s for s in (pod_span(p) for p in pods) if s is not None}
    for old in (before or {}).get("pods") or []:
        if old.get("pod") not in spans and old.get("node") and parse_time(old.get("start")):
            end = parse_time(old.get("end")) or now
            spans[old["pod"]] = PodSpan(old["pod"], old["node"], parse_time(old["start"]) or now, end)
    return {
        "pods": [
            {
                "pod": s.pod,
                "node": s.node,
                "start": rfc3339(s.start),
                "end": rfc3339(s.end) if s.end is not None else None,
            }
            for s in sorted(spans.values(), key=lambda s: (s.start, s.pod))
        ]
    }


def spans_of(written: Mapping | None) -> list[PodSpan]:
    """The spans of a record (``record``), or []."""
    found = []
    for entry in (written or {}).get("pods") or []:
        start = parse_time(entry.get("start"))
        if entry.get("node") and start is not None:
            found.append(PodSpan(entry["pod"], entry["node"], start, parse_time(entry.get("end"))))
    return found


def read(job: Mapping) -> dict[str, Any] | None:
    """The record in ``job``'s ANNOTATION, None without one or when it holds no JSON object."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def task_pods(jobs: Sequence[Mapping], pods: Sequence[Mapping]) -> list[Mapping]:
    """The pods owned by a task Job (label tf-replica-type) of ``jobs`` (by the Job's uid: a
    replaced Job's pods that still terminate are not this run's)."""
    uids = {
        (j.get("metadata") or {}).get("uid")
        for j in jobs
        if TASK_TYPE_LABEL in ((j.get("metadata") or {}).get("labels") or {})
    }
    return [
        p
        for p in pods
        if any(o.get("uid") in uids for o in (p.get("metadata") or {}).get("ownerReferences") or [])
    ]


class Recorder:
    """Keeps the record of the run's pods' spans on its chief Job, one ``poll`` at a time: it
    writes when the record changed (a pod started, ended or went); a refused write is logged once
    and tried again next poll (the record is a report: it never stops the watch)."""

    def __init__(self, api: Calls, namespace: str, log: Callable[[str], None]) -> None:
        self.api, self.namespace, self.log, self.last_note = api, namespace, log, ""

    def poll(
        self, chief: Mapping | None, jobs: Sequence[Mapping], pods: Sequence[Mapping], now: float
    ) -> None:
        """Write the record of ``jobs``' task pods on ``chief`` (None: no chief Job yet)."""
        if chief is None:
            return
        before = read(chief)
        new = record(task_pods(jobs, pods), before, now)
        if new == before or not new["pods"]:
            return
        try:
            text = json.dumps(new, separators=(",", ":"))
            self.api.annotate_job(self.namespace, chief["metadata"]["name"], {ANNOTATION: text})
        except Exception as err:  # noqa: BLE001 - a report must not stop the watch
            note = f"cannot record the run's pods' spans ({err}): tried again next poll"
            if note != self.last_note:
                self.log(note)
                self.last_note = note
