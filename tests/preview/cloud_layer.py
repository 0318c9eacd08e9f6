"""What the preview of the dev stack's cloud layer must show (test_preview's cloud mode): the
alicloud resources' inputs as the real provider checked them."""

from __future__ import annotations

from .engine import PreviewResult


def inputs_of(preview: PreviewResult, rtype: str) -> list[dict]:
    """The inputs of every planned resource of type ``rtype`` (not of types it prefixes)."""
    return [r["inputs"] for r in preview.resources(rtype) if r["type"] == rtype]


#: The tags of every cloud resource that takes them (infra/components/tags.py).
STACK_TAGS = {"pulumi:project": "tf-mnist", "pulumi:stack": "dev"}
#: What a GPU pool falls back to, in order, and its pinned driver (infra/settings/constants.py).
GPU_TYPES = ["ecs.gn5-c4g1.xlarge", "ecs.gn6i-c4g1.xlarge", "ecs.gn6i-c8g1.2xlarge", "ecs.gn6v-c8g1.2xlarge"]
DRIVER = "550.163.01"


def assert_cloud_layer(preview: PreviewResult, workers: int) -> None:
    """The alicloud resources' inputs as the provider checked them (what tests/infra's mock
    tests assert): names from ``tf-mnist-<stack>``, the network, a Terway cluster on a pod
    vSwitch, a GPU pool of fallback types on a pinned driver scaling from zero to one node per
    worker (worker.gpuCount 1, gpuPool.gpusPerInstance 1) with the cluster's autoscaler, a
    Capacity NAS in the nodes' zone, and the stack's tags on all that takes them."""
    (vpc,) = inputs_of(preview, "alicloud:vpc/network:Network")
    assert (vpc["vpcName"], vpc["cidrBlock"]) == ("tf-mnist-dev", "192.168.0.0/16")
    switches = {s["vswitchName"]: s for s in inputs_of(preview, "alicloud:vpc/switch:Switch")}
    assert sorted(switches) == ["tf-mnist-dev", "tf-mnist-dev-pods"]
    assert (switches["tf-mnist-dev"]["cidrBlock"], switches["tf-mnist-dev"]["zoneId"]) == (
        "192.168.0.0/20",
        "cn-hangzhou-i",
    )
    (cluster,) = inputs_of(preview, "alicloud:cs/managedKubernetes:ManagedKubernetes")
    assert (
        "podCidr" not in cluster
        and len(cluster["podVswitchIds"]) == 1
        and cluster["serviceCidr"] == "172.21.0.0/20"
    )
    assert cluster["newNatGateway"] is True and cluster["slbInternetEnabled"] is True
    assert {a["name"] for a in cluster["addons"]} == {"terway-eniip", "csi-plugin", "csi-provisioner"}
    pools = {p["nodePoolName"]: p for p in inputs_of(preview, "alicloud:cs/nodePool:NodePool")}
    assert sorted(pools) == ["tf-mnist-dev-cpu", "tf-mnist-dev-gpu"]
    gpu = pools["tf-mnist-dev-gpu"]
    assert "desiredSize" not in gpu, "no GPU node before a GPU pod needs one"
    assert {k: gpu["scalingConfig"][k] for k in ("enable", "minSize", "maxSize")} == {
        "enable": True,
        "minSize": 0,
        "maxSize": workers,
    }
    (autoscaler,) = inputs_of(preview, "alicloud:cs/autoscalingConfig:AutoscalingConfig")
    assert autoscaler["scaleUpFromZero"] is True and autoscaler["scalerType"] == "cluster-autoscaler"
    assert gpu["instanceTypes"] == GPU_TYPES and gpu["systemDiskCategory"] == "cloud_efficiency"
    assert {label["key"]: label["value"] for label in gpu["labels"]} == {
        "tf-mnist/pool": "gpu",
        "ack.aliyun.com/nvidia-driver-version": DRIVER,
    }
    assert gpu["imageType"] == "AliyunLinux3"
    assert [(t["key"], t["value"], t["effect"]) for t in gpu["taints"]] == [
        ("nvidia.com/gpu", "present", "NoSchedule")
    ]
    assert "taints" not in pools["tf-mnist-dev-cpu"]
    (fs,) = inputs_of(preview, "alicloud:nas/fileSystem:FileSystem")
    assert (fs["protocolType"], fs["storageType"], fs["fileSystemType"]) == ("NFS", "Capacity", "standard")
    assert fs["zoneId"] == "cn-hangzhou-i"
    assert "vpcId" not in fs and "vswitchId" not in fs
    tagged = [vpc, *switches.values(), cluster, *pools.values(), fs]
    assert [r.get("tags") for r in tagged] == [STACK_TAGS] * len(tagged)
    (rule,) = inputs_of(preview, "alicloud:nas/accessRule:AccessRule")
    assert (rule["sourceCidrIp"], rule["rwAccessType"], rule["userAccessType"]) == (
        "192.168.0.0/20",
        "RDWR",
        "no_squash",
    )
    (mount,) = inputs_of(preview, "alicloud:nas/mountTarget:MountTarget")
    assert (mount["accessGroupName"], mount["networkType"]) == ("tf-mnist-dev", "Vpc")
