"""The bounds of the node pools and of a pod's GPUs (infra/settings/constants.py MAX_POOL_NODES,
infra/values/gpu_families.py MAX_GPUS_PER_INSTANCE): the configuration refuses what passes them,
structured values too, and the largest run they allow plans pools the policy pack admits."""

from __future__ import annotations

import json

import mock_engine as me
import pytest

from infra.settings.constants import MAX_POOL_NODES, MAX_WORKERS
from infra.values.gpu_families import MAX_GPUS_PER_INSTANCE
from policy import rules

NODE_POOL = "alicloud:cs/nodePool:NodePool"


def test_the_bounds_and_where_they_come_from():
    # A node each for every worker and the chief; 8 GPUs: the largest gn5, gn6v, gn7 types.
    assert MAX_POOL_NODES == MAX_WORKERS + 1 == 33
    assert MAX_GPUS_PER_INSTANCE == 8
    assert rules.MAX_POOL_NODES is MAX_POOL_NODES  # the pack holds pools to the same bound


@pytest.mark.parametrize(
    "section,field,value,rule,fix",
    [
        ("gpuPool", "size", 34, "must be an integer between 1 and 33", "--path gpuPool.size 2"),
        ("cpuPool", "size", 100, "must be an integer between 1 and 33", "--path cpuPool.size 2"),
        ("worker", "gpuCount", 9, "must be an integer between 0 and 8", "--path worker.gpuCount 1"),
        (
            "gpuPool",
            "gpusPerInstance",
            9,
            "must be an integer between 1 and 8",
            "--path gpuPool.gpusPerInstance 1",
        ),
    ],
)
def test_a_structured_value_past_its_bound_is_refused(dev_config, section, field, value, rule, fix):
    """`pulumi config set --path gpuPool.size 34` stores an integer in the section's object."""
    config = dict(dev_config)
    current = json.loads(config.get(f"tf-mnist:{section}", "{}"))
    config[f"tf-mnist:{section}"] = json.dumps({**current, field: value})
    run = me.run_program(config)
    assert run.registrations == []
    assert str(run.error) == (
        "1 invalid configuration value; nothing was deployed:\n"
        f"Configuration 'tf-mnist:{section}.{field}' value '{value}' is invalid: {rule}.\n"
        f"    fix: pulumi config set {fix}"
    )


def test_every_bad_bound_is_reported_at_once(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:gpuPool.size": "40",
            "tf-mnist:cpuPool.size": "40",
            "tf-mnist:worker.gpuCount": "16",
        }
    )
    assert str(run.error).startswith("3 invalid configuration values; nothing was deployed:\n")
    for key in ("gpuPool.size", "cpuPool.size", "worker.gpuCount"):
        assert f"Configuration 'tf-mnist:{key}' value '" in str(run.error), key


def test_the_largest_run_the_bounds_allow_fits_its_pools(dev_config):
    """32 workers and a GPU chief (no ps) of 8 GPUs each on 8-GPU nodes: 33 GPU nodes, which the
    policy pack's node pool rule admits; a fixed pool of 33 CPU nodes passes it too."""
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:worker.number": str(MAX_WORKERS),
            "tf-mnist:ps.number": "0",
            "tf-mnist:worker.gpuCount": str(MAX_GPUS_PER_INSTANCE),
            "tf-mnist:gpuPool.gpusPerInstance": str(MAX_GPUS_PER_INSTANCE),
            "tf-mnist:gpuPool.instanceTypes": "ecs.gn6v-c10g1.20xlarge",
            "tf-mnist:cpuPool.size": str(MAX_POOL_NODES),
        }
    )
    assert run.error is None, run.error
    gpu = run.one(NODE_POOL, "tf-mnist-dev-gpu").inputs
    assert gpu["scalingConfig"]["maxSize"] == MAX_POOL_NODES
    cpu = run.one(NODE_POOL, "tf-mnist-dev-cpu").inputs
    assert int(cpu["desiredSize"]) == MAX_POOL_NODES
    for name, props in (("gpu", gpu), ("cpu", cpu)):
        assert rules.node_pool_size_bound(name, props) == [], name
