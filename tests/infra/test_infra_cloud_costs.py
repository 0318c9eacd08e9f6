"""What the cloud layer bills and how sure it is to come up: a GPU pool of fallback instance types
on a pinned NVIDIA driver that scales from zero, a Capacity NAS in the nodes' zone (a deployed
one keeps its type and zone), tags naming the stack on everything that takes them, and the
rules that refuse a GPU pool ACK would fail only at `pulumi up`."""

from __future__ import annotations

import importlib
import inspect

import mock_engine as me
import pytest

POOL = "alicloud:cs/nodePool:NodePool"
FS = "alicloud:nas/fileSystem:FileSystem"
DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
TAGS = {"pulumi:project": "tf-mnist", "pulumi:stack": "dev"}


def _errors(run: me.Run) -> str:
    assert run.error is not None, "the configuration was accepted"
    assert run.registrations == [] and run.calls_besides_state == []
    return str(run.error)


def _labels(pool: me.Registration) -> dict[str, str]:
    return {label["key"]: label["value"] for label in pool.inputs["labels"]}


def test_the_gpu_pool_falls_back_across_families_that_share_a_disk_and_a_driver(dev_config):
    """GN5 first (the guide's), then T4 and V100 types of one GPU each: all take the ultra disk
    and run the pinned R550 driver, which ACK installs on the Alibaba Cloud Linux 3 image."""
    gpu = me.run_program(dev_config).one(POOL, "tf-mnist-dev-gpu")
    assert gpu.inputs["instanceTypes"] == [
        "ecs.gn5-c4g1.xlarge",
        "ecs.gn6i-c4g1.xlarge",
        "ecs.gn6i-c8g1.2xlarge",
        "ecs.gn6v-c8g1.2xlarge",
    ]
    assert gpu.inputs["systemDiskCategory"] == "cloud_efficiency"
    assert _labels(gpu) == {"tf-mnist/pool": "gpu", DRIVER_LABEL: "550.163.01"}
    assert gpu.inputs["imageType"] == "AliyunLinux3"


def test_the_gpu_pool_settings_are_the_stacks_to_choose(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:gpuPool.instanceTypes": '["ecs.gn7i-c8g1.2xlarge"]',
            "tf-mnist:gpuPool.systemDiskCategory": "cloud_essd",
            "tf-mnist:gpuPool.driverVersion": "570.133.20",
            "tf-mnist:gpuPool.imageType": "ContainerOS",
        }
    )
    assert run.error is None, run.error
    gpu = run.one(POOL, "tf-mnist-dev-gpu")
    assert (gpu.inputs["instanceTypes"], gpu.inputs["systemDiskCategory"]) == (
        ["ecs.gn7i-c8g1.2xlarge"],
        "cloud_essd",
    )
    assert (_labels(gpu)[DRIVER_LABEL], gpu.inputs["imageType"]) == ("570.133.20", "ContainerOS")
    unpinned = me.run_program({**dev_config, "tf-mnist:gpuPool.driverVersion": ""}).one(
        POOL, "tf-mnist-dev-gpu"
    )
    assert _labels(unpinned) == {"tf-mnist/pool": "gpu"}, "empty: ACK's default driver, no label"


@pytest.mark.parametrize(
    "extra,expected",
    [
        (
            {"tf-mnist:gpuPool.systemDiskCategory": "cloud_essd"},
            "Configuration 'tf-mnist:gpuPool.systemDiskCategory' value 'cloud_essd' is invalid: must be a category every "
            "type of gpuPool.instanceTypes takes (ecs.gn5-c4g1.xlarge takes cloud_efficiency, cloud_ssd; "
            "ecs.gn6i-c4g1.xlarge takes cloud_efficiency, cloud_ssd, cloud_essd; ecs.gn6i-c8g1.2xlarge takes "
            "cloud_efficiency, cloud_ssd, cloud_essd; ecs.gn6v-c8g1.2xlarge takes cloud_efficiency, cloud_ssd, cloud_essd).\n"
            "    fix: pulumi config set gpuPool.systemDiskCategory cloud_efficiency",
        ),
        (
            {"tf-mnist:gpuPool.instanceTypes": '["ecs.gn5-c4g1.xlarge","ecs.gn7i-c8g1.2xlarge"]'},
            "Configuration 'tf-mnist:gpuPool.instanceTypes' value '[\"ecs.gn5-c4g1.xlarge\",\"ecs.gn7i-c8g1.2xlarge\"]' is "
            "invalid: must share a system disk category, and these do not (ecs.gn5-c4g1.xlarge takes cloud_efficiency, "
            "cloud_ssd; ecs.gn7i-c8g1.2xlarge takes cloud_essd): list types of families that do, such as the default's GN5, "
            "gn6i and gn6v (all cloud_efficiency).\n",
        ),
        (
            {"tf-mnist:gpuPool.driverVersion": "590.44.01"},
            "Configuration 'tf-mnist:gpuPool.driverVersion' value '590.44.01' is invalid: must be a driver branch that "
            "still supports ecs.gn5-c4g1.xlarge (P100, R580 at most), ecs.gn6v-c8g1.2xlarge (V100, R580 at most).\n"
            "    fix: pulumi config set gpuPool.driverVersion 550.163.01",
        ),
        (
            {"tf-mnist:gpuPool.driverVersion": "latest"},
            "Configuration 'tf-mnist:gpuPool.driverVersion' value 'latest' is invalid: must be an NVIDIA driver version "
            "<branch>.<minor>[.<patch>] such as 550.144.03",
        ),
        (
            {"tf-mnist:gpuPool.imageType": "Windows"},
            "Configuration 'tf-mnist:gpuPool.imageType' value 'Windows' is invalid: must be one of AliyunLinux3, "
            "AliyunLinux3ContainerOptimized, ContainerOS, Ubuntu.\n    fix: pulumi config set gpuPool.imageType AliyunLinux3",
        ),
    ],
    ids=["disk-gn5", "no-common-disk", "driver-after-r580", "driver-form", "image"],
)
def test_a_gpu_pool_ack_would_fail_is_refused_first(dev_config, extra, expected):
    errors = _errors(me.run_program({**dev_config, **extra}))
    assert expected in errors, errors


def test_the_nas_is_a_capacity_file_system_in_the_nodes_zone(dev_config):
    """A new stack's file system: Capacity (billed by the GiB used, the lowest price per GiB) in
    the zone of the node vSwitch, whose zone is ignored once the file system exists."""
    run = me.run_program(dev_config)
    fs = run.one(FS, "tf-mnist-dev-fs")
    assert (fs.inputs["storageType"], fs.inputs["zoneId"]) == ("Capacity", "cn-hangzhou-i")
    assert fs.ignore_changes == ["zoneId"]
    assert run.one("alicloud:vpc/switch:Switch", "tf-mnist-dev-vswitch").inputs["zoneId"] == "cn-hangzhou-i"


def test_a_deployed_file_system_keeps_its_storage_type(dev_config):
    """storage_type is ForceNew: a stack deployed when Performance was the default keeps a
    Performance file system, and the PV that names it, while nas.storageType is unset."""
    fresh = me.run_program(dev_config)
    deployed = me.run_program(dev_config, state=me.deployed_cloud("flannel", storage_type="Performance"))
    assert deployed.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Performance"
    set_so = me.run_program({**dev_config, "tf-mnist:nas.storageType": "Performance"})
    assert deployed.outputs["pvName"] == set_so.outputs["pvName"] != fresh.outputs["pvName"]


def test_a_storage_type_set_wins_over_the_state(dev_config):
    run = me.run_program(
        {**dev_config, "tf-mnist:nas.storageType": "Premium"},
        state=me.deployed_cloud("terway", storage_type="Performance"),
    )
    assert run.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Premium"


def _takes_tags(type_: str) -> bool:
    """Whether the pulumi_alicloud resource of ``type_`` (alicloud:<module>/<name>:<Class>) has a
    ``tags`` argument."""
    module, cls = type_.split(":")[1].split("/")[0], type_.rsplit(":", 1)[1]
    resource = getattr(importlib.import_module(f"pulumi_alicloud.{module}"), cls)
    return "tags" in inspect.signature(resource._internal_init).parameters


def test_every_cloud_resource_that_takes_tags_names_the_stack(dev_config):
    """The VPC, both vSwitches (Terway's pod vSwitch too), the cluster, both node pools, the NAS
    file system and TensorBoard's SLB ACL."""
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:tensorboard.serviceType": "LoadBalancer",
            "tf-mnist:tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
        }
    )
    assert run.error is None, run.error
    taggable = [r for r in run.registrations if r.type.startswith("alicloud:") and _takes_tags(r.type)]
    assert sorted({r.type for r in taggable}) == [
        "alicloud:cs/managedKubernetes:ManagedKubernetes",
        "alicloud:cs/nodePool:NodePool",
        "alicloud:nas/fileSystem:FileSystem",
        "alicloud:slb/acl:Acl",
        "alicloud:vpc/network:Network",
        "alicloud:vpc/switch:Switch",
    ]
    assert len(taggable) == 8
    assert {r.name: r.inputs.get("tags") for r in taggable} == {r.name: TAGS for r in taggable}
