"""The run's cost as ``infra.status`` shows it: the run monitor's record of the task pods' spans
(infra/run_cost.py), overridden by the task pods still listed, priced with each node's instance
type from the node's labels and the prices that `pulumi up` looked up through the provider (the
stack output ``prices``, infra/instance_prices.py). The repository holds no price: without the
output (kubeconfig mode, a preview only, a failed lookup, the outputs not read) the estimate has
node-hours and says why it has no price."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra import run_cost

#: Where the prices come from, when the stack's outputs were not read.
NOT_READ = "the stack's outputs were not read (--kubeconfig, --namespace and --prefix given)"
#: When the outputs hold no ``prices``: a stack last updated before the lookup existed.
NO_OUTPUT = "the stack's outputs hold no prices (pulumi up looks them up)"
#: The prices' currency: the lookup's answer names none.
CURRENCY = "in the account's currency"


def prices_of(
    output: Mapping[str, Any] | None, outputs_read: bool
) -> tuple[dict[str, float], str, dict[str, str]]:
    """(instance type -> price per hour, the prices' source and date, instance type -> why it has
    no price, ``""``: why any other type has none) of the stack output ``prices``
    (infra/instance_prices.py's ``lookup``); ``outputs_read``: whether the stack's outputs were
    read at all (``output`` None then: NOT_READ, else NO_OUTPUT)."""
    if output is None:
        reason = NOT_READ if not outputs_read else NO_OUTPUT
        return {}, f"no price: {reason}", {"": reason}
    if output.get("none"):
        return {}, f"no price: {output['none']}", {"": str(output["none"])}
    per_hour = {str(k): float(v) for k, v in (output.get("perHour") or {}).items()}
    source = f"{output.get('source')}, looked up {output.get('date')}"
    why = {str(k): str(v) for k, v in (output.get("missing") or {}).items()}
    return per_hour, source, {**why, "": f"not a node pool's type when looked up {output.get('date')}"}


def run_cost_of(
    chief: Mapping | None,
    jobs: Sequence[Mapping],
    pods: Sequence[Mapping],
    nodes: Sequence[Mapping],
    now: float,
    prices: Mapping[str, Any] | None = None,
    outputs_read: bool = False,
) -> dict[str, Any] | None:
    """The estimate (``run_cost.estimate``'s object, plus ``region``, ``spansFrom`` ("record",
    "pods", or "record and pods"), ``prices``: the prices' source and date, or "no price: why")
    of the run whose chief Job is ``chief``; None before any task pod started.

    Args:
        chief: the run's chief Job as listed (its ``run_cost.ANNOTATION`` holds the record).
        jobs: the run's Jobs; pods: the run's pods, as listed.
        nodes: the cluster's nodes as listed ([] when the user may not list them).
        now: seconds since the epoch (a running pod counts to it).
        prices: the stack output ``prices``; None: none (``prices_of``).
        outputs_read: whether the stack's outputs were read.
    """
    written = run_cost.spans_of(run_cost.read(chief)) if chief is not None else []
    live = {s.pod: s for s in (run_cost.pod_span(p) for p in run_cost.task_pods(jobs, pods)) if s}
    spans = {**{s.pod: s for s in written}, **live}
    if not spans:
        return None
    source = " and ".join(n for n, has in (("record", bool(written)), ("pods", bool(live))) if has)
    by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    used = [by_name[s.node] for s in spans.values() if s.node in by_name]
    per_hour, prices_source, why = prices_of(prices, outputs_read)
    node_prices = {
        s.node: run_cost.node_price(by_name.get(s.node), s.node, per_hour, prices_source, why)
        for s in spans.values()
    }
    found = run_cost.estimate(list(spans.values()), node_prices, now, currency=CURRENCY)
    return {**found, "region": run_cost.region_of(used), "spansFrom": source, "prices": prices_source}


def cost_lines(cost: Mapping[str, Any] | None) -> list[str]:
    """The estimate as the text view prints it: a total (or the node-hours, what has a price and
    what lacks one), the prices' source and date (or "no price: why"), then one line per node
    with its busy time and price, and what the estimate leaves out."""
    if cost is None:
        return []
    money = cost["currency"]
    state = "so far, running" if cost["running"] else f"{cost['start']} to {cost['end']}"
    hours = sum(n["busySeconds"] for n in cost["nodes"]) / 3600
    if cost["total"] is not None:
        head = f"{cost['total']:.2f} {money} ({state}; list prices, not the bill)"
    elif all(n["cost"] is None for n in cost["nodes"]):
        head = f"{hours:.3f} node-hours, no total ({state})"
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
                f"{node['cost']:.2f} {money}"
            )
    lines.append("             not included: the cluster's fee, NAS, disks, traffic (no price source)")
    return lines
