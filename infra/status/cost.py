"""The run's cost as ``infra.status`` shows it: the run monitor's record of the task pods' spans
(infra/run_cost.py), overridden by the task pods still listed, priced with each node's instance
type from the node's labels and infra/values/prices.py's dated table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra import run_cost
from infra.values import prices

#: A node label that ACK puts on every node of a node pool: the run's nodes are ACK's, so the
#: cluster's management fee (ACK Pro, the spec of the clusters the stack creates) counts.
ACK_NODE_LABEL = "alibabacloud.com/nodepool-id"


def run_cost_of(
    chief: Mapping | None,
    jobs: Sequence[Mapping],
    pods: Sequence[Mapping],
    nodes: Sequence[Mapping],
    now: float,
) -> dict[str, Any] | None:
    """The estimate (``run_cost.estimate``'s object, plus ``region``, ``spansFrom`` ("record",
    "pods", or "record and pods"), ``prices``: the table's source and date, ``nasPrice``: the
    NAS capacity price per GiB-month of the region, or None) of the run whose chief Job is ``chief``; None before any task pod started.

    Args:
        chief: the run's chief Job as listed (its ``run_cost.ANNOTATION`` holds the record).
        jobs: the run's Jobs; pods: the run's pods, as listed.
        nodes: the cluster's nodes as listed ([] when the user may not list them).
        now: seconds since the epoch (a running pod counts to it).
    """
    written = run_cost.spans_of(run_cost.read(chief)) if chief is not None else []
    live = {s.pod: s for s in (run_cost.pod_span(p) for p in run_cost.task_pods(jobs, pods)) if s}
    spans = {**{s.pod: s for s in written}, **live}
    if not spans:
        return None
    source = " and ".join(n for n, has in (("record", bool(written)), ("pods", bool(live))) if has)
    by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    used = [by_name[s.node] for s in spans.values() if s.node in by_name]
    region = run_cost.region_of(used)
    table = prices.instance_prices(region)
    node_prices = {
        s.node: run_cost.node_price(by_name.get(s.node), s.node, table, region) for s in spans.values()
    }
    ack = any(ACK_NODE_LABEL in ((n.get("metadata") or {}).get("labels") or {}) for n in used)
    fee = prices.ACK_PRO_FEE.get(region or "") if ack else None
    found = run_cost.estimate(
        list(spans.values()),
        node_prices,
        now,
        currency=prices.CURRENCY,
        cluster_fee=run_cost.NodePrice(None, fee.amount, fee.label()) if fee else None,
    )
    nas = prices.NAS_CAPACITY.get(region or "")
    return {
        **found,
        "region": region,
        "spansFrom": source,
        "prices": prices.TABLE_SOURCE,
        "nasPrice": nas.label() if nas else None,
    }


def cost_lines(cost: Mapping[str, Any] | None) -> list[str]:
    """The estimate as the text view prints it: a total (or what has a price and what lacks
    one), then one line per node with its busy time and price source, the cluster fee, NAS."""
    if cost is None:
        return []
    money = cost["currency"]
    state = "so far, running" if cost["running"] else f"{cost['start']} to {cost['end']}"
    if cost["total"] is not None:
        head = f"{cost['total']:.2f} {money} ({state}; list prices, not the bill)"
    else:
        head = f"no total: {'; '.join(cost['missing'])} ({cost['priced']:.2f} {money} priced; {state})"
    lines = [f"Cost:        {head}", f"             prices: {cost['prices']}"]
    for node in cost["nodes"]:
        busy = f"{node['busySeconds'] / 3600:.3f} h"
        kind = node["instanceType"] or "type unknown"
        if node["cost"] is None:
            lines.append(f"             {node['node']} ({kind}): {busy}, {node['missing']}")
        else:
            lines.append(
                f"             {node['node']} ({kind}): {busy} x {node['pricePerHour']:g} = "
                f"{node['cost']:.2f} {money}; {node['source']}"
            )
    fee = cost["clusterFee"]
    if fee:
        lines.append(
            f"             cluster fee: {fee['hours']:.3f} h x {fee['pricePerHour']:g} = "
            f"{fee['cost']:.2f} {money}; {fee['source']}"
        )
    if cost.get("nasPrice"):
        lines.append(f"             NAS not included: {cost['nasPrice']} of the capacity used")
    return lines
