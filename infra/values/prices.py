"""A dated table of Alibaba Cloud's pay-as-you-go list prices, for the cost estimate of a run
(infra/run_cost.py, shown by ``python -m infra.status``).

Each price carries its source (the price page it is documented on) and the date it was read.
None of them was checked against the provider's own quote (BSS OpenAPI
``GetPayAsYouGoPrice``, or the price calculator) when it was entered: ``verified`` says so, and
the estimate prints it. A price depends on the region (the table is keyed by region: a region
it lacks has no prices) and on discounts, coupons and savings plans that no list price knows, so
the estimate is the list price of the run's node-hours, not the bill. Update a price by
replacing its entry with a new ``read`` date; add an instance type the same way.

Standard library only: ``python -m infra.status`` imports it without the Pulumi SDK's cost.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The currency of every price in the table.
CURRENCY = "CNY"
ECS_PRICES_PAGE = "https://www.alibabacloud.com/product/ecs/pricing (ECS pay-as-you-go, Linux)"
ACK_PRICES_PAGE = "https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/product-overview/billing-rules-for-ack-pro-clusters"
NAS_PRICES_PAGE = "https://www.alibabacloud.com/product/nas/pricing (General-purpose NAS)"
#: The date the table's prices were read.
TABLE_READ = "2026-12-07"
#: How an unverified price says so.
UNVERIFIED = "list price as documented, not verified against BSS GetPayAsYouGoPrice"


@dataclass(frozen=True)
class Price:
    """One list price.

    Attributes:
        amount: CURRENCY per ``unit``.
        unit: ``hour`` (an instance, a cluster) or ``GiB-month`` (NAS capacity used).
        source: the page it is documented on.
        read: the date it was read, ISO 8601 (YYYY-MM-DD).
        verified: whether it was checked against the provider's quote (GetPayAsYouGoPrice).
    """

    amount: float
    unit: str
    source: str
    read: str
    verified: bool = False

    def label(self) -> str:
        """The price as the estimate prints it: ``8.55 CNY/hour (source, read <read>,
        UNVERIFIED)``."""
        checked = "verified against BSS GetPayAsYouGoPrice" if self.verified else UNVERIFIED
        return f"{self.amount:g} {CURRENCY}/{self.unit} ({self.source}, read {self.read}, {checked})"


def _ecs(amount: float) -> Price:
    return Price(amount, "hour", ECS_PRICES_PAGE, TABLE_READ)


#: Region -> instance type -> pay-as-you-go price per hour: the types the stack's defaults name
#: (the GPU pool's DEFAULT_GPU_INSTANCE_TYPES, the CPU pool's ecs.g6.xlarge).
INSTANCE_PRICES: dict[str, dict[str, Price]] = {
    "cn-hangzhou": {
        "ecs.g6.xlarge": _ecs(1.07),
        "ecs.gn5-c4g1.xlarge": _ecs(8.55),
        "ecs.gn6i-c4g1.xlarge": _ecs(11.75),
        "ecs.gn6i-c8g1.2xlarge": _ecs(13.44),
        "ecs.gn6v-c8g1.2xlarge": _ecs(26.46),
    },
}
#: Region -> the ACK Pro cluster management fee per hour (ack.pro.small, the spec the stack's
#: clusters have: infra/components/cluster.py). Billed per cluster while it exists, run or no run.
ACK_PRO_FEE: dict[str, Price] = {
    "cn-hangzhou": Price(0.64, "hour", ACK_PRICES_PAGE, TABLE_READ),
}
#: Region -> General-purpose NAS, Capacity type (the stack's default nas.storageType), per GiB
#: used per month. Not in the estimate: the volume's size is not something a run's pods report;
#: the estimate prints the price beside it.
NAS_CAPACITY: dict[str, Price] = {
    "cn-hangzhou": Price(0.35, "GiB-month", NAS_PRICES_PAGE, TABLE_READ),
}


#: What the estimate prints as its prices' source, always.
TABLE_SOURCE = (
    f"list prices of infra/values/prices.py, read {TABLE_READ} from Alibaba Cloud's price pages, "
    "not verified against BSS GetPayAsYouGoPrice"
)


def instance_prices(region: str | None) -> dict[str, Price]:
    """Instance type -> its price per hour in ``region``; {} for a region the table lacks or
    None (not known)."""
    return dict(INSTANCE_PRICES.get(region or "", {}))
