"""The policy pack's rules (policy/rules.py) on plain dicts shaped like the preview's inputs, and
the pack's wiring (policy/checks.py, PulumiPolicy.yaml). The real CLI runs the pack in
tests/preview/test_policy_pack.py (marker engine)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from infra.settings.constants import MAX_PS, MAX_WORKERS
from policy import checks, rules

REPO = Path(__file__).resolve().parents[2]
URN = "urn:pulumi:dev::tf-mnist::{type}::{name}"
TAGS = {"pulumi:project": "tf-mnist", "pulumi:stack": "dev"}


def tensorboard(kind: str, ranges: list[str] | None = None, address: str | None = None) -> dict:
    """A TensorBoard Service's inputs as infra/components/tensorboard.py makes them."""
    meta = {
        "name": "mnist-tensorboard",
        "namespace": "default",
        "labels": {"app.kubernetes.io/component": "tensorboard"},
    }
    if address:
        meta["annotations"] = {rules.ADDRESS_TYPE_ANNOTATION: address}
    spec: dict = {"type": kind, "ports": [{"port": 80}]}
    if ranges is not None:
        spec["loadBalancerSourceRanges"] = ranges
    return {"metadata": meta, "spec": spec}


# --- tensorboard-source-ranges --------------------------------------------------------------


@pytest.mark.parametrize(
    "props",
    [
        tensorboard("ClusterIP"),
        tensorboard("LoadBalancer", ["203.0.113.0/24"]),
        tensorboard("LoadBalancer", None, address="intranet"),
        {"metadata": {"name": "mnist-worker-0"}, "spec": {"type": "NodePort"}},  # not TensorBoard
    ],
    ids=["clusterip", "ranged-lb", "intranet-lb", "other-service"],
)
def test_tensorboard_that_is_private_or_ranged_passes(props: dict) -> None:
    assert rules.tensorboard_source_ranges("tb", props) == []


def test_a_nodeport_tensorboard_is_refused_naming_the_service_and_the_fix() -> None:
    (message,) = rules.tensorboard_source_ranges("tb", tensorboard("NodePort"))
    assert message.startswith("Service default/mnist-tensorboard: type NodePort")
    assert "fix: pulumi config set tensorboard.serviceType ClusterIP" in message


@pytest.mark.parametrize("ranges", [None, []])
def test_an_internet_load_balancer_without_ranges_is_refused(ranges: list[str] | None) -> None:
    (message,) = rules.tensorboard_source_ranges(
        "tb", tensorboard("LoadBalancer", ranges, address="internet")
    )
    assert "no loadBalancerSourceRanges" in message
    assert "fix: pulumi config set --path 'tensorboard.allowedSourceRanges[0]' <your address>/32" in message


@pytest.mark.parametrize(
    "ranges, why",
    [
        (["203.0.113.0/24", "0.0.0.0/0"], "3,702,258,688 public IPv4 addresses (every one)"),
        (["10.0.0.0/0"], "3,702,258,688 public IPv4 addresses (every one)"),
        (["0.0.0.0/1", "128.0.0.0/1"], "3,702,258,688 public IPv4 addresses (every one)"),
        (["11.0.0.0/8", "12.0.0.0/8"], "33,554,432 public IPv4 addresses"),
        (["::/0"], "public IPv6 addresses (every one)"),
        (["2000::/4", "3000::/4"], "public IPv6 addresses (every one)"),
    ],
    ids=["slash-0", "slash-0-with-host-bits", "two-halves", "two-slash-8s", "ipv6-slash-0", "ipv6-halves"],
)
@pytest.mark.parametrize("address", [None, "intranet"])
def test_ranges_that_admit_the_internet_are_refused_by_arithmetic(
    ranges: list[str], why: str, address: str | None
) -> None:
    # Counted, not matched on "/0": the halves of the address space are the whole of it, and an
    # intranet annotation (which only ACK honours) does not excuse them.
    (message,) = rules.tensorboard_source_ranges("tb", tensorboard("LoadBalancer", ranges, address=address))
    assert message.startswith(
        f"Service default/mnist-tensorboard: loadBalancerSourceRanges {ranges} together admit "
    )
    assert why in message and "rule: TensorBoard's source ranges name networks, not the internet" in message


@pytest.mark.parametrize(
    "ranges",
    [["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], ["11.0.0.0/8"], ["2001:db8::/32"], ["fc00::/7"]],
)
def test_private_ranges_and_one_organisations_block_pass(ranges: list[str]) -> None:
    assert rules.tensorboard_source_ranges("tb", tensorboard("LoadBalancer", ranges)) == []


# --- gpu-pool-scale-to-zero -----------------------------------------------------------------


def gpu_pool(**fields) -> dict:
    return {
        "nodePoolName": "tf-mnist-dev-pools-gpu",
        "instanceTypes": ["ecs.gn5-c4g1.xlarge", "ecs.gn6i-c4g1.xlarge"],
        **fields,
    }


def test_a_gpu_pool_autoscaled_from_zero_passes_and_a_cpu_pool_is_not_checked() -> None:
    assert (
        rules.gpu_pool_scales_to_zero(
            "p", gpu_pool(scalingConfig={"enable": True, "minSize": 0, "maxSize": 2})
        )
        == []
    )
    assert rules.gpu_pool_scales_to_zero("p", {"instanceTypes": ["ecs.g6.xlarge"], "desiredSize": "2"}) == []


def test_a_fixed_size_gpu_pool_is_refused_with_the_fix() -> None:
    (message,) = rules.gpu_pool_scales_to_zero("p", gpu_pool(desiredSize="2"))
    assert message.startswith("NodePool tf-mnist-dev-pools-gpu (ecs.gn5-c4g1.xlarge): no autoscaling")
    assert "desiredSize '2'" in message and "fix: pulumi config set gpuPool.autoscaling true" in message


def test_a_gpu_pool_with_a_minimum_above_zero_is_refused() -> None:
    (message,) = rules.gpu_pool_scales_to_zero(
        "p", gpu_pool(scalingConfig={"enable": True, "minSize": 1, "maxSize": 2})
    )
    assert "scalingConfig.minSize 1" in message


@pytest.mark.parametrize(
    "instance_type,gpu",
    [
        ("ecs.gn6i-c4g1.xlarge", True),
        ("ecs.gn7e-c16g1.4xlarge", True),
        ("ecs.ebmgn7.26xlarge", True),
        ("ecs.vgn6i-m4.xlarge", True),
        ("ecs.g6.xlarge", False),
        ("ecs.c6.large", False),
    ],
)
def test_gpu_instance_types(instance_type: str, gpu: bool) -> None:
    assert rules.is_gpu_instance_type(instance_type) is gpu


def test_every_gpu_family_the_settings_know_is_a_gpu_type() -> None:
    from infra.values.gpu_families import DEFAULT_GPU_INSTANCE_TYPES, GPU_FAMILIES

    assert all(rules.is_gpu_instance_type(f"ecs.{family}-c4g1.xlarge") for family in GPU_FAMILIES)
    assert all(rules.is_gpu_instance_type(t) for t in DEFAULT_GPU_INSTANCE_TYPES)


# --- alicloud-tags ---------------------------------------------------------------------------

#: Every alicloud type the stack creates (tests/preview/dev_stack.py ALICLOUD_COUNTS and
#: TensorBoard's SLB ACL), and whether it takes tags.
STACK_TYPES = {
    "alicloud:vpc/network:Network": True,
    "alicloud:vpc/switch:Switch": True,
    "alicloud:cs/managedKubernetes:ManagedKubernetes": True,
    "alicloud:cs/nodePool:NodePool": True,
    "alicloud:cs/autoscalingConfig:AutoscalingConfig": False,
    "alicloud:cs/kubernetesAddon:KubernetesAddon": False,
    "alicloud:nas/fileSystem:FileSystem": True,
    "alicloud:nas/accessGroup:AccessGroup": False,
    "alicloud:nas/accessRule:AccessRule": False,
    "alicloud:nas/mountTarget:MountTarget": False,
    "alicloud:slb/acl:Acl": True,
    "alicloud:slb/aclEntryAttachment:AclEntryAttachment": False,
}


def test_which_types_take_tags_comes_from_the_sdk() -> None:
    assert {t: rules.alicloud_supports_tags(t) for t in STACK_TYPES} == STACK_TYPES
    assert rules.alicloud_supports_tags("alicloud:nosuch/thing:Thing") is False
    assert rules.alicloud_supports_tags("kubernetes:core/v1:Service") is False


def test_the_stack_tags_every_taggable_type_it_creates() -> None:
    """Each taggable type's component passes cloud_tags() (infra/components/tags.py names them)."""
    sources = {path.name: path.read_text() for path in (REPO / "infra" / "components").glob("*.py")}
    created = {
        f"alicloud.{t.split(':')[1].split('/')[0]}.{t.rsplit(':', 1)[1]}(": taggable
        for t, taggable in STACK_TYPES.items()
    }
    for call, taggable in created.items():
        files = [name for name, text in sources.items() if call in text]
        assert files, f"no component creates {call}"
        if taggable:
            assert all("tags=cloud_tags()" in sources[name] for name in files), (call, files)


@pytest.mark.parametrize("rtype", [t for t, taggable in STACK_TYPES.items() if taggable])
def test_a_tagged_resource_passes_and_an_untagged_one_is_refused(rtype: str) -> None:
    urn = URN.format(type=rtype, name="x")
    assert rules.alicloud_tags(rtype, "x", urn, {"tags": {**TAGS, "team": "ml"}}) == []
    (message,) = rules.alicloud_tags(rtype, "x", urn, {})
    assert "tags pulumi:project=None, pulumi:stack=None" in message
    assert "carries pulumi:project='tf-mnist' and pulumi:stack='dev'" in message


def test_a_tag_of_another_stack_is_refused_and_untaggable_types_are_not_checked() -> None:
    rtype = "alicloud:vpc/network:Network"
    (message,) = rules.alicloud_tags(
        rtype, "vpc", URN.format(type=rtype, name="vpc"), {"tags": {**TAGS, "pulumi:stack": "prod"}}
    )
    assert message.startswith("Network vpc: tags pulumi:stack='prod'")
    rtype = "alicloud:nas/accessGroup:AccessGroup"
    assert rules.alicloud_tags(rtype, "ag", URN.format(type=rtype, name="ag"), {}) == []


# --- replica bounds ----------------------------------------------------------------------------


def test_node_pool_bound_is_the_workers_bound_and_the_chief() -> None:
    assert rules.MAX_POOL_NODES == MAX_WORKERS + 1
    ok = gpu_pool(scalingConfig={"enable": True, "minSize": 0, "maxSize": MAX_WORKERS + 1})
    assert rules.node_pool_size_bound("p", ok) == []
    (message,) = rules.node_pool_size_bound("p", gpu_pool(scalingConfig={"minSize": 0, "maxSize": 40}))
    assert message.startswith("NodePool tf-mnist-dev-pools-gpu: scalingConfig.maxSize 40")
    assert message.endswith(f"fix: pulumi config set gpuPool.size {MAX_WORKERS + 1}")
    (message,) = rules.node_pool_size_bound(
        "p", {"nodePoolName": "cpu", "instanceTypes": ["ecs.g6.xlarge"], "desiredSize": "50"}
    )
    assert "desiredSize 50" in message and "fix: pulumi config set cpuPool.size" in message


def job(task: str, index: int, instance: str = "mnist") -> tuple[str, dict]:
    name = f"{instance}-{task}-{index}"
    return name, {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app.kubernetes.io/instance": instance, "tf-replica-type": task},
        }
    }


def test_job_counts_up_to_the_configuration_bounds_pass() -> None:
    jobs = [
        job("chief", 0),
        *(job("worker", i) for i in range(MAX_WORKERS)),
        *(job("ps", i) for i in range(MAX_PS)),
    ]
    jobs.append(("mnist-stage-data", {"metadata": {"labels": {"app.kubernetes.io/instance": "mnist"}}}))
    jobs += [job("worker", i, instance="other") for i in range(MAX_WORKERS)]  # another run
    assert rules.job_count_bound(jobs) == []


def test_job_counts_past_the_bounds_are_refused_per_task_type() -> None:
    jobs = [*(job("worker", i) for i in range(MAX_WORKERS + 1)), *(job("ps", i) for i in range(MAX_PS + 2))]
    messages = rules.job_count_bound(jobs)
    assert messages == [
        f"run mnist in namespace default: {MAX_PS + 2} ps Jobs; rule: at most {MAX_PS} ps Jobs a run "
        f"(infra/settings/constants.py).\n    fix: pulumi config set ps.number {MAX_PS}",
        f"run mnist in namespace default: {MAX_WORKERS + 1} worker Jobs; rule: at most {MAX_WORKERS} worker Jobs "
        f"a run (infra/settings/constants.py).\n    fix: pulumi config set worker.number {MAX_WORKERS}",
    ]


# --- image-tag-pinned --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image,tag",
    [
        ("registry.example.com/team/trainer:2.21.0-gpu", "2.21.0-gpu"),
        ("trainer", None),
        ("localhost:5000/trainer", None),
        ("localhost:5000/trainer:1.0", "1.0"),
        ("trainer:latest", "latest"),
        ("r.example.com/t@sha256:" + "a" * 64, "@sha256:" + "a" * 64),
    ],
)
def test_image_tag(image: str, tag: str | None) -> None:
    assert rules.image_tag(image) == tag


def pod_template(rtype: str, image: str, component: str = "worker") -> dict:
    pod = {
        "containers": [{"name": "main", "image": image}],
        "initContainers": [{"name": "init", "image": "busybox:1.37"}],
    }
    meta = {
        "name": "mnist-worker-0",
        "namespace": "default",
        "labels": {"app.kubernetes.io/component": component},
    }
    if rtype == rules.POD:
        return {"metadata": meta, "spec": pod}
    if rtype == rules.CRON_JOB:
        return {"metadata": meta, "spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}}
    return {"metadata": meta, "spec": {"template": {"spec": pod}}}


@pytest.mark.parametrize("rtype", [*rules.POD_TEMPLATE_TYPES, rules.POD, rules.CRON_JOB])
def test_latest_or_missing_tags_are_refused_on_every_pod_template(rtype: str) -> None:
    assert rules.pinned_images(rtype, "w", pod_template(rtype, "r.example.com/trainer:2.21.0-gpu")) == []
    (latest,) = rules.pinned_images(rtype, "w", pod_template(rtype, "r.example.com/trainer:latest"))
    assert "container 'main' runs image 'r.example.com/trainer:latest' (tag latest)" in latest
    assert "fix: pulumi config set worker.image <repository>:<version>" in latest
    (untagged,) = rules.pinned_images(rtype, "w", pod_template(rtype, "r.example.com/trainer", "tensorboard"))
    assert "(no tag)" in untagged and "fix: pulumi config set tensorboard.image" in untagged
    assert untagged.startswith(f"{rtype.rsplit(':', 1)[1]} default/mnist-worker-0: ")


@pytest.mark.parametrize("tag", ["stable", "main", "edge", "nightly", "lts", "slim"])
def test_a_channel_tag_without_a_version_is_refused(tag: str) -> None:
    (message,) = rules.pinned_images(rules.JOB, "j", pod_template(rules.JOB, f"r.example.com/trainer:{tag}"))
    assert f"runs image 'r.example.com/trainer:{tag}' (tag {tag})" in message
    assert "rule: images name a version (a digest or a tag with a digit)" in message


@pytest.mark.parametrize(
    "image", ["python:3.11-slim", "r.example.com/trainer:v1", "r.example.com/t:stable@sha256:" + "a" * 64]
)
def test_a_version_or_a_digest_passes(image: str) -> None:
    assert rules.pinned_images(rules.JOB, "j", pod_template(rules.JOB, image)) == []


def test_an_init_container_is_checked_too() -> None:
    props = pod_template(rules.JOB, "r.example.com/trainer:1")
    props["spec"]["template"]["spec"]["initContainers"][0]["image"] = "busybox"
    (message,) = rules.pinned_images(rules.JOB, "j", props)
    assert "container 'init' runs image 'busybox' (no tag)" in message


def with_gpus(rtype: str, limits: object, requests: object = None) -> dict:
    props = pod_template(rtype, "r.example.com/trainer:2.21.0-gpu")
    resources = {"limits": {"nvidia.com/gpu": limits}}
    if requests is not None:
        resources["requests"] = {"nvidia.com/gpu": requests}
    spec = props["spec"]
    if rtype == rules.CRON_JOB:
        spec = spec["jobTemplate"]["spec"]
    pod = spec if rtype == rules.POD else spec["template"]["spec"]
    pod["containers"][0]["resources"] = resources
    return props


@pytest.mark.parametrize("rtype", [*rules.POD_TEMPLATE_TYPES, rules.POD, rules.CRON_JOB])
def test_a_pod_asks_at_most_one_nodes_gpus(rtype: str) -> None:
    assert rules.MAX_GPUS_PER_INSTANCE == 8
    assert rules.gpu_request_bound(rtype, "w", with_gpus(rtype, "8")) == []
    assert rules.gpu_request_bound(rtype, "w", with_gpus(rtype, None)) == []  # unknown in a preview
    (message,) = rules.gpu_request_bound(rtype, "w", with_gpus(rtype, 16, "16"))  # one per container
    assert message.startswith(f"{rtype.rsplit(':', 1)[1]} default/mnist-worker-0: container 'main' limits ")
    assert "nvidia.com/gpu 16; rule: a pod asks at most 8 GPUs" in message
    assert message.endswith("fix: pulumi config set worker.gpuCount 8")
    (message,) = rules.gpu_request_bound(rtype, "w", with_gpus(rtype, "4", 9))
    assert "'main' requests nvidia.com/gpu 9" in message


# --- the pack -----------------------------------------------------------------------------------


def test_the_pack_runs_in_the_project_venv_and_every_policy_is_mandatory() -> None:
    spec = yaml.safe_load((REPO / "policy" / "PulumiPolicy.yaml").read_text())
    assert spec["runtime"] == {"name": "python", "options": {"virtualenv": "../.venv"}}
    main = (REPO / "policy" / "__main__.py").read_text()
    assert "enforcement_level=EnforcementLevel.MANDATORY" in main and "EnforcementLevel.ADVISORY" not in main
    names = [name for name, *_ in checks.POLICIES]
    assert names == [
        "tensorboard-source-ranges",
        "gpu-pool-scale-to-zero",
        "alicloud-tags",
        "replica-bound-node-pool",
        "replica-bound-jobs",
        "replica-bound-gpus",
        "image-tag-pinned",
    ]


def test_the_checks_report_each_message_against_the_resource() -> None:
    reported: list[tuple[str, str | None]] = []
    report = lambda message, urn=None: reported.append((message, urn))  # noqa: E731
    urn = URN.format(type=rules.SERVICE, name="tb")
    checks.tensorboard_source_ranges(
        SimpleNamespace(resource_type=rules.SERVICE, name="tb", urn=urn, props=tensorboard("NodePort")),
        report,
    )
    checks.tensorboard_source_ranges(
        SimpleNamespace(resource_type=rules.NODE_POOL, name="p", urn=urn, props=tensorboard("NodePort")),
        report,
    )  # not a Service
    checks.job_count(
        SimpleNamespace(
            resources=[
                SimpleNamespace(resource_type=rules.JOB, name=n, props=p)
                for n, p in (job("worker", i) for i in range(MAX_WORKERS + 1))
            ]
        ),
        report,
    )
    assert [(m.split(":")[0], u) for m, u in reported] == [
        ("Service default/mnist-tensorboard", urn),
        ("run mnist in namespace default", None),
    ]


def test_the_sdk_the_pack_imports_is_installed() -> None:
    sdk = importlib.import_module("pulumi_policy")
    assert hasattr(sdk, "StackValidationPolicy") and hasattr(sdk, "ResourceValidationPolicy")
