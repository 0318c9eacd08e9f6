"""The node pools' instance types' pay-as-you-go list prices, looked up through the provider at
`pulumi up`, for the cost estimate of a run: the stack output ``prices`` (OUTPUT), which
``python -m infra.status`` reads (infra/status/cost.py). The repository holds no price.

The lookup is ``alicloud.ecs.get_instance_types(instance_type=..., sorted_by="Price",
instance_charge_type="PostPaid")``, once per instance type of the CPU pool and (with GPU workers)
of the GPU pool. With ``sorted_by="Price"`` the provider asks BSS OpenAPI for the type's price
(terraform-provider-alicloud data_source_alicloud_instance_types.go: GetPayAsYouGoPrice of module
InstanceType, Linux, IoOptimized, in the provider's region, PriceType Hour) and returns its
OriginalPrice as ``price``: the list price per hour before any discount, coupon or savings plan,
in the currency of the account's site, which the answer does not name. A type the region does not
sell (sold out, not offered) is not returned: it gets no price.

When: at `pulumi up` only, on a cluster the stack creates. A preview does not ask: an offline
preview has no endpoint, for which the provider retries its endpoint lookup for minutes
(infra/nas_zones.py has the measurement), and no run starts from a preview. On a cluster a
kubeconfig names the stack manages no node, knows no region and has no price source: the
estimate there shows node-hours and says why it has no price.

A lookup that fails (no network, no right to DescribeInstanceTypes or to BSS, no answer) warns
and the deployment goes on: the output then says why there is no price. Never fails an up.

Where it is kept: a stack output, not a Kubernetes object: the date changes every day the stack
is updated, and an output's change replaces nothing (an annotation on the training Jobs, or a
ConfigMap they mount, would be a diff of the run's objects).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from infra.settings import Settings
from trainer.contract.printable import printable

#: The stack output that holds the prices.
OUTPUT = "prices"
#: What produced the prices, as the estimate prints it (with the region).
SOURCE = (
    "alicloud.ecs.get_instance_types (sorted_by Price, PostPaid: BSS GetPayAsYouGoPrice's "
    "OriginalPrice per hour, Linux, before discounts)"
)
#: Why a preview's output holds no price.
NOT_AT_PREVIEW = "not looked up at preview: pulumi up looks the node pools' instance types up"
#: Why a stack on a kubeconfig's cluster has none.
NO_SOURCE = (
    "a cluster the kubeconfig names: the stack creates no node pool, and no price source knows its nodes"
)


def pool_types(settings: Settings) -> list[str]:
    """The instance types of the pools the stack creates, each once: the CPU pool's, then the
    GPU pool's (when the workers take GPUs, infra/target.py)."""
    kinds = list(settings.cpu_pool.instance_types)
    if settings.worker.gpu_count > 0:
        kinds += settings.gpu_pool.instance_types
    return list(dict.fromkeys(kinds))


def _ask(instance_type: str) -> Sequence[Any]:
    """The provider's answer for ``instance_type`` with its price (objects with ``id`` and
    ``price``, a string such as ``"1.2300"``)."""
    return alicloud.ecs.get_instance_types(
        instance_type=instance_type, sorted_by="Price", instance_charge_type="PostPaid"
    ).instance_types


def _amount(found: Sequence[Any], kind: str) -> float | None:
    """The price the answer gives ``kind``; None for none (not returned, empty, not above 0)."""
    for entry in found:
        if getattr(entry, "id", None) == kind:
            try:
                amount = float(getattr(entry, "price", None) or "")
            except ValueError:
                return None
            return amount if amount > 0 else None
    return None


def lookup(
    settings: Settings,
    *,
    dry_run: bool,
    ask: Callable[[str], Sequence[Any]] = _ask,
    today: Callable[[], str] = lambda: datetime.now(UTC).date().isoformat(),
) -> dict[str, Any]:
    """The ``prices`` output (module docstring).

    Args:
        dry_run: whether this run is a preview (no lookup).
        ask: the provider's answer for one instance type (default: ``_ask``).
        today: the lookup's date, ISO 8601 (YYYY-MM-DD, UTC).

    Returns:
        Looked up: ``{"source": SOURCE and the region, "date": today, "perHour": {type: amount
        per hour}, "missing": {type: why}}``; else ``{"none": why}``. Never raises: a failed
        lookup warns (pulumi.log.warn) and gives ``{"none": why}``.
    """
    if not settings.creates_cloud:
        return {"none": NO_SOURCE}
    if dry_run:
        return {"none": NOT_AT_PREVIEW}
    # The provider's region, as infra/settings/load.py reads it.
    region = pulumi.Config("alicloud").get("region") or os.environ.get("ALICLOUD_REGION")
    date = today()
    per_hour: dict[str, float] = {}
    missing: dict[str, str] = {}
    for kind in pool_types(settings):
        try:
            found = ask(kind)
        except Exception as error:  # the SDK raises a plain Exception holding the provider's reason
            # The first failure ends the lookup: the rest would fail alike (network, rights).
            reason = printable(str(error))
            pulumi.log.warn(
                f"prices: could not look up the pay-as-you-go price of {kind} ({reason}); the stack "
                "goes on, and a run's cost estimate (python -m infra.status) shows node-hours "
                "without a price"
            )
            return {"none": f"the price lookup failed at pulumi up on {date}: {reason[:500]}"}
        amount = _amount(found, kind)
        if amount is None:
            missing[kind] = f"alicloud.ecs.get_instance_types returned no price for {kind} on {date}"
        else:
            per_hour[kind] = amount
    if missing:
        pulumi.log.warn(
            f"prices: no pay-as-you-go price for {', '.join(missing)} in region {region or '(default)'} "
            "(sold out or not offered there); a run's nodes of that type show node-hours without a price"
        )
    return {
        "source": f"{SOURCE}, region {region or '(the provider default)'}",
        "date": date,
        "perHour": per_hour,
        "missing": missing,
    }
