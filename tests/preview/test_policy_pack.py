"""The policy pack (policy/, docs/policy.md) run by the real CLI: `pulumi preview --policy-pack policy`.

The committed dev stack passes every rule, in both ways of running it (test_preview.py's
``cloud`` and ``cluster``). Each rule then fails a preview whose stack breaks it, and the
output names that rule and the resource:

* through the stack's own configuration where the configuration allows the bad value
  (tensorboard.serviceType NodePort, gpuPool.autoscaling false, a ``:latest`` worker.image);
* through a small inline program in a temporary project, run by the same CLI with the same
  pack, where the stack cannot break the rule: its configuration refuses source ranges that
  admit the internet, more than MAX_WORKERS workers, a node pool of more than MAX_POOL_NODES
  nodes and a pod of more than MAX_GPUS_PER_INSTANCE GPUs before anything is planned (asserted here too), and no configuration takes the tags off
  a cloud resource.

The text output is read, not ``--json``'s document: that document leaves the violations out.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infra.settings.constants import MAX_POOL_NODES, MAX_WORKERS
from infra.values.gpu_families import MAX_GPUS_PER_INSTANCE

from .conftest import REPO
from .dev_stack import configure
from .engine import UNREACHABLE_KUBECONFIG, PolicyPreview, PulumiProject, Toolchain, alicloud_offline_config

pytestmark = pytest.mark.engine

PACK = REPO / "policy"
PACK_LINE = "tf-mnist-platform@v1.0.0"


def assert_refused_by(preview: PolicyPreview, policy: str) -> list[dict[str, str]]:
    """The preview failed on mandatory violations of ``policy`` alone; its violations."""
    assert preview.returncode != 0, preview.output
    violations = preview.violations()
    assert violations, preview.output
    assert {(v["level"], v["policy"]) for v in violations} == {("mandatory", policy)}, preview.output
    return violations


@pytest.mark.parametrize("mode", ["cloud", "cluster"])
def test_the_committed_dev_stack_passes_every_rule(
    dev_project: PulumiProject, toolchain: Toolchain, mode: str
) -> None:
    configure(dev_project, toolchain, mode)
    preview = dev_project.policy_preview(PACK)
    assert preview.returncode == 0, preview.output
    assert PACK_LINE in preview.output, preview.output  # the pack ran
    assert preview.violations() == []  # advisory ones too (a policy that met an unknown value)


def test_a_nodeport_tensorboard_breaks_tensorboard_source_ranges(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("tensorboard.serviceType", "NodePort")
    (violation,) = assert_refused_by(dev_project.policy_preview(PACK), "tensorboard-source-ranges")
    assert violation["resource"] == "kubernetes:core/v1:Service: mnist-tensorboard"
    assert "/mnist-tensorboard: type NodePort" in violation["message"]
    assert "fix: pulumi config set tensorboard.serviceType ClusterIP" in violation["message"]


def test_a_fixed_size_gpu_pool_breaks_gpu_pool_scale_to_zero(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("gpuPool.autoscaling", "false")
    (violation,) = assert_refused_by(dev_project.policy_preview(PACK), "gpu-pool-scale-to-zero")
    assert violation["resource"] == "alicloud:cs:NodePool: tf-mnist-dev-gpu"  # the type's short form
    assert "-gpu (ecs.gn5-c4g1.xlarge): no autoscaling" in violation["message"]
    assert "desiredSize '2'" in violation["message"]
    assert "fix: pulumi config set gpuPool.autoscaling true" in violation["message"]


def test_a_latest_worker_image_breaks_image_tag_pinned(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("worker.image", "registry.example.com/team/trainer:latest")
    violations = assert_refused_by(dev_project.policy_preview(PACK), "image-tag-pinned")
    assert sorted(v["resource"] for v in violations) == [
        f"kubernetes:batch/v1:Job: mnist-worker-{i}" for i in range(2)
    ]
    assert all(
        "(tag latest)" in v["message"] and "fix: pulumi config set worker.image" in v["message"]
        for v in violations
    )


# --- what the stack's configuration refuses: small programs of their own ----------------------


def inline_project(
    tmp_path: Path, toolchain: Toolchain, pulumi_home: Path, program: str, config: dict[str, str]
) -> PulumiProject:
    """A one-file Pulumi project running ``program`` in the project's .venv, its stack created
    and ``config`` set (keys ending in Key or kubeconfig as secrets)."""
    source = tmp_path / "source"
    source.mkdir(parents=True)
    (source / "Pulumi.yaml").write_text(
        "name: policy-probe\nruntime:\n  name: python\n  options:\n    virtualenv: .venv\n"
    )
    (source / "__main__.py").write_text(textwrap.dedent(program))
    project = PulumiProject(
        source,
        tmp_path,
        toolchain,
        include=("Pulumi.yaml", "__main__.py"),
        pulumi_home=pulumi_home,
        venv=REPO / ".venv",
    )
    project.init_stack("dev")
    for key, value in config.items():
        project.set_config(key, value, secret=key.endswith(("Key", "kubeconfig")))
    return project


KUBERNETES = {"kubernetes:kubeconfig": UNREACHABLE_KUBECONFIG}


def test_a_source_range_of_everyone_breaks_tensorboard_source_ranges(
    dev_project: PulumiProject, toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    """The stack refuses tensorboard.allowedSourceRanges that together cover the internet (here
    its two halves, which no "/0" test sees) itself; a program that makes such a Service meets
    the pack, which counts the addresses the same way."""
    dev_project.set_config("tensorboard.serviceType", "LoadBalancer")
    dev_project.set_config("tensorboard.allowedSourceRanges[0]", "0.0.0.0/1", path=True)
    dev_project.set_config("tensorboard.allowedSourceRanges[1]", "128.0.0.0/1", path=True)
    refused = dev_project.preview().refused_output()
    assert (
        """'tf-mnist:tensorboard.allowedSourceRanges' value '["0.0.0.0/1","128.0.0.0/1"]' is invalid: these ranges """
        "together admit 3,702,258,688 public IPv4 addresses (every one)"
    ) in refused, refused
    probe = inline_project(
        tmp_path / "probe",
        toolchain,
        pulumi_home,
        """
        import pulumi_kubernetes as k8s
        k8s.core.v1.Service("board", metadata={"name": "mnist-tensorboard"}, spec={
            "type": "LoadBalancer", "loadBalancerSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"],
            "ports": [{"port": 80}]})
        """,
        KUBERNETES,
    )
    (violation,) = assert_refused_by(probe.policy_preview(PACK), "tensorboard-source-ranges")
    assert violation["resource"] == "kubernetes:core/v1:Service: board"
    assert (
        "mnist-tensorboard: loadBalancerSourceRanges ['0.0.0.0/1', '128.0.0.0/1'] together admit "
        "3,702,258,688 public IPv4 addresses (every one)"
    ) in violation["message"]


def test_more_worker_jobs_than_the_bound_break_replica_bound_jobs(
    dev_project: PulumiProject, toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    """The stack refuses worker.number 33 itself; a program with 33 worker Jobs of one run meets
    the pack's stack policy."""
    dev_project.set_config("worker.number", str(MAX_WORKERS + 1))
    refused = dev_project.preview().refused_output()
    assert f"'tf-mnist:worker.number' value '{MAX_WORKERS + 1}' is invalid" in refused, refused
    probe = inline_project(
        tmp_path / "probe",
        toolchain,
        pulumi_home,
        f"""
        import pulumi_kubernetes as k8s
        for i in range({MAX_WORKERS + 1}):
            labels = {{"app.kubernetes.io/instance": "mnist", "tf-replica-type": "worker"}}
            k8s.batch.v1.Job(f"worker-{{i}}", metadata={{"name": f"mnist-worker-{{i}}", "labels": labels}}, spec={{
                "template": {{"spec": {{"restartPolicy": "Never", "containers": [
                    {{"name": "tensorflow", "image": "registry.example.com/trainer:2.21.0-cpu"}}]}}}}}})
        """,
        KUBERNETES,
    )
    (violation,) = assert_refused_by(probe.policy_preview(PACK), "replica-bound-jobs")
    assert f"run mnist in namespace default: {MAX_WORKERS + 1} worker Jobs" in violation["message"]
    assert f"fix: pulumi config set worker.number {MAX_WORKERS}" in violation["message"]


def test_a_gpu_pool_past_the_bound_breaks_replica_bound_node_pool(
    dev_project: PulumiProject, toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    """The stack refuses gpuPool.size 40 itself; a program with a 40-node GPU pool meets the pack."""
    from .conftest import require_binary

    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("gpuPool.size", "40")
    refused = dev_project.preview().refused_output()
    assert (
        f"'tf-mnist:gpuPool.size' value '40' is invalid: must be an integer between 1 and {MAX_POOL_NODES}"
    ) in refused, refused
    require_binary(toolchain, "pulumi-resource-alicloud")
    probe = inline_project(
        tmp_path / "probe",
        toolchain,
        pulumi_home,
        """
        import pulumi_alicloud as alicloud
        alicloud.cs.NodePool("gpu", node_pool_name="probe-gpu", cluster_id="c0123456789abcdef",
                             vswitch_ids=["vsw-probe"], instance_types=["ecs.gn6i-c4g1.xlarge"],
                             scaling_config={"enable": True, "min_size": 0, "max_size": 40, "type": "gpu"},
                             tags={"pulumi:project": "policy-probe", "pulumi:stack": "dev"})
        """,
        alicloud_offline_config(),
    )
    (violation,) = assert_refused_by(probe.policy_preview(PACK), "replica-bound-node-pool")
    assert (
        "probe-gpu: scalingConfig.maxSize 40; rule: a node pool holds at most 33 nodes"
        in violation["message"]
    )
    assert f"fix: pulumi config set gpuPool.size {MAX_POOL_NODES}" in violation["message"]


def test_a_pod_past_one_nodes_gpus_breaks_replica_bound_gpus(
    dev_project: PulumiProject, toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    """The stack refuses worker.gpuCount 9 itself; a program with a Job asking 9 GPUs meets the pack."""
    dev_project.set_config("worker.gpuCount", str(MAX_GPUS_PER_INSTANCE + 1))
    refused = dev_project.preview().refused_output()
    assert (
        f"'tf-mnist:worker.gpuCount' value '{MAX_GPUS_PER_INSTANCE + 1}' is invalid: must be an integer "
        f"between 0 and {MAX_GPUS_PER_INSTANCE}"
    ) in refused, refused
    probe = inline_project(
        tmp_path / "probe",
        toolchain,
        pulumi_home,
        f"""
        import pulumi_kubernetes as k8s
        k8s.batch.v1.Job("worker", metadata={{"name": "mnist-worker-0"}}, spec={{
            "template": {{"spec": {{"restartPolicy": "Never", "containers": [
                {{"name": "tensorflow", "image": "registry.example.com/trainer:2.21.0-gpu",
                  "resources": {{"limits": {{"nvidia.com/gpu": "{MAX_GPUS_PER_INSTANCE + 1}"}}}}}}]}}}}}})
        """,
        KUBERNETES,
    )
    (violation,) = assert_refused_by(probe.policy_preview(PACK), "replica-bound-gpus")
    assert violation["resource"] == "kubernetes:batch/v1:Job: worker"
    assert (
        f"limits nvidia.com/gpu {MAX_GPUS_PER_INSTANCE + 1}; rule: a pod asks at most" in violation["message"]
    )
    assert f"fix: pulumi config set worker.gpuCount {MAX_GPUS_PER_INSTANCE}" in violation["message"]


def test_an_untagged_cloud_resource_breaks_alicloud_tags(
    toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    """No configuration takes the stack's tags off: a program with a tagged and an untagged VPC."""
    from .conftest import require_binary

    require_binary(toolchain, "pulumi-resource-alicloud")
    probe = inline_project(
        tmp_path / "probe",
        toolchain,
        pulumi_home,
        """
        import pulumi_alicloud as alicloud
        alicloud.vpc.Network("tagged", cidr_block="10.0.0.0/16",
                             tags={"pulumi:project": "policy-probe", "pulumi:stack": "dev"})
        alicloud.vpc.Network("untagged", cidr_block="10.1.0.0/16")
        """,
        alicloud_offline_config(),
    )
    (violation,) = assert_refused_by(probe.policy_preview(PACK), "alicloud-tags")
    assert violation["resource"] == "alicloud:vpc:Network: untagged"  # the CLI shows the type's short form
    assert (
        "Network untagged: tags pulumi:project=None, pulumi:stack=None; rule: every alicloud resource that "
        "takes tags carries pulumi:project='policy-probe' and pulumi:stack='dev'"
    ) in violation["message"]
