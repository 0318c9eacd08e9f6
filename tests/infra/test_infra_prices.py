"""The node pools' prices (infra/instance_prices.py) under the mock engine: at `pulumi up` on a
cluster the stack creates, the provider's ECS lookup per pool instance type, kept in the stack
output ``prices`` with its source and date, which infra.status prices a run with
(infra/status/cost.py); no lookup at preview or on a kubeconfig's cluster; a failed lookup warns,
deploys, and leaves "no price". The mock cloud's prices are the harness's own figures."""

from __future__ import annotations

import re
from types import SimpleNamespace

import mock_engine as me

from infra import instance_prices
from infra.status import cost as status_cost

#: The dev stack's pools: the CPU pool's default type, then the GPU pool's defaults, in order.
POOL_TYPES = [
    "ecs.g6.xlarge",
    "ecs.gn5-c4g1.xlarge",
    "ecs.gn6i-c4g1.xlarge",
    "ecs.gn6i-c8g1.2xlarge",
    "ecs.gn6v-c8g1.2xlarge",
]
TOKEN = me.INSTANCE_TYPES_TOKEN


def _asked(run: me.Run) -> list[dict]:
    return [dict(c.args) for c in run.calls if c.token == TOKEN]


def test_up_looks_up_each_pool_type_and_infra_status_prices_with_it(dev_config):
    run = me.run_program(dev_config, instance_prices={"ecs.gn6v-c8g1.2xlarge": None})
    assert run.error is None, run.error
    assert _asked(run) == [
        {"instanceType": kind, "sortedBy": "Price", "instanceChargeType": "PostPaid"} for kind in POOL_TYPES
    ]
    prices = run.outputs[instance_prices.OUTPUT]
    assert prices["source"] == f"{instance_prices.SOURCE}, region cn-hangzhou"
    assert re.fullmatch(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}", prices["date"]), prices
    # The harness answers 1.5000 for each type, and no price for the one it lacks.
    assert prices["perHour"] == {kind: 1.5 for kind in POOL_TYPES[:-1]}
    assert prices["missing"] == {
        "ecs.gn6v-c8g1.2xlarge": f"alicloud.ecs.get_instance_types returned no price for "
        f"ecs.gn6v-c8g1.2xlarge on {prices['date']}"
    }
    # What infra.status reads from the output: the prices, their source and date, and why not.
    per_hour, source, why = status_cost.prices_of(prices, outputs_read=True)
    assert per_hour["ecs.g6.xlarge"] == 1.5
    assert source == f"{instance_prices.SOURCE}, region cn-hangzhou, looked up {prices['date']}"
    assert why["ecs.gn6v-c8g1.2xlarge"].startswith("alicloud.ecs.get_instance_types returned no price")


def test_a_failed_lookup_warns_deploys_and_leaves_no_price(dev_config, caplog):
    run = me.run_program(dev_config, instance_prices=RuntimeError("Forbidden.RAM: bss:GetPayAsYouGoPrice"))
    assert run.error is None, run.error
    assert run.of_type("alicloud:cs/nodePool:NodePool"), "the pools are still deployed"
    # The first failure ends the lookup: the others would fail alike.
    assert len(_asked(run)) == 1
    assert (
        "prices: could not look up the pay-as-you-go price of ecs.g6.xlarge (" in caplog.text
        and "Forbidden.RAM" in caplog.text
        and "shows node-hours without a price" in caplog.text
    ), caplog.text
    prices = run.outputs[instance_prices.OUTPUT]
    assert list(prices) == ["none"] and prices["none"].startswith("the price lookup failed at pulumi up on ")
    assert "Forbidden.RAM" in prices["none"]
    per_hour, source, _ = status_cost.prices_of(prices, outputs_read=True)
    assert per_hour == {} and source == f"no price: {prices['none']}"


def test_no_lookup_at_preview_or_on_a_kubeconfigs_cluster(dev_config):
    preview = me.run_program(dev_config, preview=True)
    assert preview.error is None and _asked(preview) == []
    # A preview's outputs hold unknowns, which the harness does not keep: the output by itself.
    cloud = SimpleNamespace(creates_cloud=True)
    assert instance_prices.lookup(cloud, dry_run=True) == {"none": instance_prices.NOT_AT_PREVIEW}  # type: ignore[arg-type]
    existing = me.run_program(
        {
            **dev_config,
            "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
            "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
        }
    )
    assert existing.error is None and _asked(existing) == []
    assert existing.outputs[instance_prices.OUTPUT] == {"none": instance_prices.NO_SOURCE}
