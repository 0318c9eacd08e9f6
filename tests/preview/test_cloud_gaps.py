"""The cloud layer's gaps through the real CLI: an existing NAS in cloud mode, a Terway cluster
on the pod vSwitch the stack creates, and keys that mean nothing in the chosen mode refused
before anything is planned, and the NAS zones question of nas.zoneCheck always."""

from __future__ import annotations

import pytest

from .dev_stack import PV, configure
from .engine import PulumiProject, Toolchain, alicloud_offline_config
from .test_live_cloud_stack import UNKNOWN

pytestmark = pytest.mark.engine

DOMAIN = "0f1e2d3c4b-xyz89.cn-hangzhou.nas.aliyuncs.com"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"


def test_an_existing_mount_target_in_cloud_mode_creates_no_nas(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """nas.mountTargetDomain with vpc.id: a vSwitch in that VPC, no NAS resource, the PV on that domain."""
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("nas.mountTargetDomain", DOMAIN)
    dev_project.set_config("vpc.id", "vpc-0123456789abcdef")
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    assert [r["type"] for r in preview.resources("alicloud:nas/")] == []
    assert [r["type"] for r in preview.resources("alicloud:vpc/network:")] == []
    # The node vSwitch and a new cluster's Terway pod vSwitch, both in that VPC.
    switches = preview.resources("alicloud:vpc/switch:Switch")
    assert sorted(s["inputs"]["vswitchName"] for s in switches) == ["tf-mnist-dev", "tf-mnist-dev-pods"]
    assert {s["inputs"]["vpcId"] for s in switches} == {"vpc-0123456789abcdef"}
    (pv,) = [r for r in preview.resources(PV) if r["type"] == PV]
    assert pv["inputs"]["spec"]["csi"]["volumeAttributes"]["server"] == DOMAIN


def test_a_terway_cluster_gets_the_pod_vswitch_the_stack_creates(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """cluster.networkPlugin terway: a second vSwitch (``tf-mnist-dev-pods``, cluster.podVswitchCidr's
    default, in the node vSwitch's zone and VPC), and the cluster with pod_vswitch_ids from it, the
    terway-eniip addon and no pod_cidr, as the real provider checked them; no Flannel warning; and
    no instance price lookup at preview."""
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("cluster.networkPlugin", "terway")
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    assert [r["type"] for r in preview.resources("alicloud:vpc/network:")] == ["alicloud:vpc/network:Network"]
    vpc_urn = preview.resources("alicloud:vpc/network:")[0]["urn"]
    switches = {r["inputs"]["vswitchName"]: r for r in preview.resources("alicloud:vpc/switch:Switch")}
    assert sorted(switches) == ["tf-mnist-dev", "tf-mnist-dev-pods"]
    pods = switches["tf-mnist-dev-pods"]
    assert (pods["inputs"]["cidrBlock"], pods["inputs"]["zoneId"]) == ("192.168.64.0/18", "cn-hangzhou-i")
    assert pods["propertyDependencies"]["vpcId"] == [vpc_urn]
    (cluster,) = [r for r in preview.resources(CLUSTER) if r["type"] == CLUSTER]
    inputs = cluster["inputs"]
    # The pod vSwitch's id is unknown before it exists: its URN is what the input depends on.
    assert inputs["podVswitchIds"] == [UNKNOWN]
    assert cluster["propertyDependencies"]["podVswitchIds"] == [pods["urn"]]
    assert cluster["propertyDependencies"]["vswitchIds"] == [switches["tf-mnist-dev"]["urn"]]
    assert "podCidr" not in inputs and inputs["serviceCidr"] == "172.21.0.0/20"
    assert [a["name"] for a in inputs["addons"]] == ["terway-eniip", "csi-plugin", "csi-provisioner"]
    # Terway's NetworkPolicy support asked for in the addon's config, as the provider passes it.
    assert inputs["addons"][0]["config"] == '{"NetworkPolicy": "true"}'
    assert "does not enforce Kubernetes NetworkPolicy" not in preview.messages()
    # No instance price lookup at preview (infra/instance_prices.py; offline it would retry ECS's
    # endpoint for minutes, then warn): no diagnostic of one.
    diagnostics = "\n".join(d.get("message", "") for d in preview.plan.get("diagnostics", []))
    assert "prices: " not in diagnostics and "getInstanceTypes" not in diagnostics, diagnostics


@pytest.mark.parametrize(
    "mode,settings,message",
    [
        (
            "cluster",
            {"gpuPool.size": "3"},
            "Configuration 'tf-mnist:gpuPool.size' value '3' is invalid: applies only without kubeconfig",
        ),
        (
            "cloud",
            {"nas.mountTargetDomain": DOMAIN},
            f"Configuration 'tf-mnist:nas.mountTargetDomain' value '{DOMAIN}' is invalid: needs vpc.id or vswitch.id",
        ),
    ],
    ids=["gpuPool-with-kubeconfig", "domain-without-vpc"],
)
def test_keys_that_mean_nothing_here_fail_with_the_programs_message(
    dev_project: PulumiProject, toolchain: Toolchain, mode: str, settings: dict, message: str
) -> None:
    configure(dev_project, toolchain, mode)
    for key, value in settings.items():
        dev_project.set_config(key, value)
    preview = dev_project.preview()
    output = preview.refused_output()
    assert message in output, output


def test_an_unanswered_nas_zones_question_warns_and_the_preview_plans_on(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """nas.zoneCheck always asks at preview too, through the real provider's NAS zones lookup
    (infra/nas_zones.py): offline it fails, which only warns, and the whole plan follows. NAS's
    endpoint is named: unnamed, the provider asks Alibaba's location service for it first, which
    offline took 134 s before failing (17 s with the name, one run on a loaded 2-core machine)."""
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("nas.zoneCheck", "always")
    dev_project.env["ALIBABA_CLOUD_ENDPOINT_NAS"] = (
        f"nas.{alicloud_offline_config()['alicloud:region']}.aliyuncs.com"
    )
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    # The JSON's messages keep the CLI's "warning: " in front.
    warnings = [d["message"] for d in preview.plan.get("diagnostics", []) if d.get("severity") == "warning"]
    (asked,) = [w.removeprefix("warning: ") for w in warnings if w.startswith("warning: nas.zoneCheck: ")]
    assert asked.startswith(
        "nas.zoneCheck: could not ask NAS which storage types zone cn-hangzhou-i offers (invoke of "
        "alicloud:nas/getZones:getZones failed"
    ), asked
    assert "DescribeZones" in asked and "\x1b" not in asked, asked
    assert asked.rstrip().endswith(
        "creating the file system fails if the zone lacks Capacity. Not to ask: pulumi config set nas.zoneCheck off"
    ), asked
    assert [r["inputs"]["storageType"] for r in preview.resources("alicloud:nas/fileSystem:")] == ["Capacity"]


def test_gang_labels_and_observability_addons_are_planned(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """scheduling.gang, observability.gpuMetrics and observability.logs on a cluster the stack
    creates: the real providers plan the three ACK add-ons (KubernetesAddon on the new cluster),
    the ClusterAliyunPipelineConfig for the task pods' stdout, and the pod-group labels on the
    task Jobs' pods (the dev stack's chief, 2 workers and 2 ps: min-available "5"), not on the
    staging Job's."""
    configure(dev_project, toolchain, "cloud")
    for key in ("scheduling.gang", "observability.gpuMetrics", "observability.logs"):
        dev_project.set_config(key, "true")
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    addons = preview.resources("alicloud:cs/kubernetesAddon:KubernetesAddon")
    assert sorted(a["inputs"]["name"] for a in addons) == [
        "ack-gpu-exporter",
        "arms-prometheus",
        "loongcollector",
    ]
    (pipeline,) = preview.resources(
        "kubernetes:telemetry.alibabacloud.com/v1alpha1:ClusterAliyunPipelineConfig"
    )
    assert pipeline["inputs"]["metadata"]["name"] == "mnist-trainer-logs"
    jobs = {r["inputs"]["metadata"]["name"]: r for r in preview.resources("kubernetes:batch/v1:Job")}
    labels = {name: job["inputs"]["spec"]["template"]["metadata"]["labels"] for name, job in jobs.items()}
    for task in ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0", "mnist-ps-1"):
        assert labels[task]["pod-group.scheduling.sigs.k8s.io/name"] == "mnist"
        assert labels[task]["pod-group.scheduling.sigs.k8s.io/min-available"] == "5"
    assert "pod-group.scheduling.sigs.k8s.io/name" not in labels["mnist-stage-data"]
