"""The cloud layer's gaps: an existing NAS in cloud mode, keys that mean nothing in the chosen
mode, the autoscaler a GPU pool from zero needs, Pulumi names that namePrefix does not move, a
short-lived kubeconfig, and cloud values ACK would refuse only at `pulumi up`."""

from __future__ import annotations

import mock_engine as me
import pytest

FS = "alicloud:nas/fileSystem:FileSystem"
MOUNT = "alicloud:nas/mountTarget:MountTarget"
PV = "kubernetes:core/v1:PersistentVolume"
AUTOSCALER = "alicloud:cs/autoscalingConfig:AutoscalingConfig"
DOMAIN = "0f1e2d3c4b-xyz89.cn-hangzhou.nas.aliyuncs.com"
EXISTING = {
    "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
    "tf-mnist:nas.mountTargetDomain": DOMAIN,
}


def _errors(run: me.Run) -> str:
    assert run.error is not None, "the configuration was accepted"
    assert run.registrations == [] and run.calls_besides_state == []
    return str(run.error)


def test_an_existing_mount_target_in_cloud_mode_creates_no_nas_and_backs_the_pv(dev_config):
    run = me.run_program(
        {**dev_config, "tf-mnist:nas.mountTargetDomain": DOMAIN, "tf-mnist:vpc.id": "vpc-0123456789"}
    )
    assert run.error is None, run.error
    assert [r.type for r in run.registrations if r.type.startswith("alicloud:nas/")] == []
    pv = run.one(PV, "mnist-data")
    assert pv.inputs["spec"]["csi"]["volumeAttributes"]["server"] == DOMAIN
    assert run.outputs["mountTargetDomain"] == DOMAIN and run.outputs["nasFileSystemId"] is None
    run.one("alicloud:vpc/switch:Switch", "tf-mnist-dev-vswitch")  # in that VPC


def test_an_existing_mount_target_needs_the_vpc_it_is_in(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:nas.mountTargetDomain": DOMAIN})
    assert (
        f"Configuration 'tf-mnist:nas.mountTargetDomain' value '{DOMAIN}' is invalid: needs vpc.id or "
        "vswitch.id of the VPC that mount target is in (a NAS mount target serves only its own VPC; "
        "without them the stack creates a new one).\n    fix: pulumi config set vpc.id vpc-xxxxxxxx"
    ) in _errors(run)


def test_an_existing_file_system_gets_a_mount_target_and_no_new_file_system(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:nas.fileSystemId": "0a1b2c3d4e"})
    assert run.error is None, run.error
    assert run.of_type(FS) == []
    mount = run.one(MOUNT, "tf-mnist-dev-mount")
    assert mount.inputs["fileSystemId"] == "0a1b2c3d4e"
    assert run.outputs["nasFileSystemId"] == "0a1b2c3d4e"
    assert run.outputs["mountTargetDomain"] == me.MOUNT_TARGET_DOMAIN


@pytest.mark.parametrize(
    "extra,expected",
    [
        (
            {"tf-mnist:nas.mountTargetDomain": DOMAIN, "tf-mnist:vpc.id": "vpc-1"},
            "Configuration 'tf-mnist:nas.fileSystemId' value '0a1b2c3d4e' is invalid: applies only without "
            "nas.mountTargetDomain (that mount target already names the NAS, so the stack creates no NAS resource).\n"
            "    fix: pulumi config rm nas.fileSystemId",
        ),
        (
            {"tf-mnist:nas.storageType": "Capacity"},
            "Configuration 'tf-mnist:nas.storageType' value 'Capacity' is invalid: applies only when the stack creates "
            "the NAS file system (nas.fileSystemId names an existing one).\n    fix: pulumi config rm nas.storageType",
        ),
    ],
    ids=["both", "storageType"],
)
def test_an_existing_nas_refuses_what_would_mean_nothing(dev_config, extra, expected):
    run = me.run_program({**dev_config, "tf-mnist:nas.fileSystemId": "0a1b2c3d4e", **extra})
    assert expected in _errors(run)


@pytest.mark.parametrize(
    "key,value",
    [
        ("gpuPool.size", "3"),
        ("cpuPool.size", "4"),
        ("vpc.cidr", "10.0.0.0/8"),
        ("cluster.version", "1.33.3-aliyun.1"),
        ("nas.fileSystemId", "0a1b2c3d4e"),
    ],
)
def test_cloud_keys_are_refused_with_kubeconfig(dev_config, key, value):
    run = me.run_program({**dev_config, **EXISTING, f"tf-mnist:{key}": value})
    assert (
        f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: applies only without kubeconfig (with "
        "kubeconfig the stack deploys into that cluster and creates no VPC, cluster, node pool or NAS).\n"
        f"    fix: pulumi config rm {key}"
    ) in _errors(run)


def test_gpu_pool_keys_are_refused_without_gpu_pods(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:worker.gpuCount": "0", "tf-mnist:gpuPool.size": "2"})
    assert (
        "Configuration 'tf-mnist:gpuPool.size' value '2' is invalid: applies only with worker.gpuCount > 0 "
        "(without GPU pods the stack creates no GPU pool).\n    fix: pulumi config rm gpuPool.size"
    ) in _errors(run)


def test_the_gpu_pool_scales_from_zero_by_default(dev_config):
    """No GPU node bills while no GPU pod runs: the pool's minimum is 0, and the cluster's
    autoscaler brings nodes up for pending GPU pods and releases them when idle."""
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    gpu = run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert gpu.inputs["scalingConfig"] == {"enable": True, "minSize": 0, "maxSize": 2, "type": "gpu"}
    autoscaler = run.one(AUTOSCALER, "tf-mnist-dev-autoscaler")
    assert autoscaler.inputs["clusterId"] == me.CLUSTER_ID
    assert autoscaler.inputs["scaleUpFromZero"] is True and autoscaler.inputs["scaleDownEnabled"] is True
    assert autoscaler.inputs["scalerType"] == "cluster-autoscaler"
    assert gpu.urn in autoscaler.dependencies, "the autoscaler is configured after the pools"


def test_no_autoscaler_without_gpu_autoscaling(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:gpuPool.autoscaling": "false"})
    assert run.of_type(AUTOSCALER) == []
    gpu = run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert gpu.inputs["desiredSize"] == "2" and "scalingConfig" not in gpu.inputs


def test_name_prefix_moves_no_cloud_resource(dev_config):
    """A new namePrefix renames the Kubernetes objects, never the VPC, cluster or NAS (a
    changed Pulumi name is a replacement); a stack whose cloud layer was named after the
    prefix keeps it through an alias."""
    runs = {
        prefix: me.run_program({**dev_config, "tf-mnist:namePrefix": prefix})
        for prefix in ("mnist", "vision")
    }
    urns = {
        prefix: sorted(
            r.urn
            for r in run.registrations
            if r.type.startswith(("alicloud:", "tf-mnist:index:N", "tf-mnist:index:C"))
        )
        for prefix, run in runs.items()
    }
    assert urns["mnist"] == urns["vision"]
    assert (
        "urn:pulumi:dev::tf-mnist::pulumi:pulumi:Stack$tf-mnist:index:Network::tf-mnist-dev" in urns["mnist"]
    )
    network = runs["vision"].one("tf-mnist:index:Network", "tf-mnist-dev")
    assert len(network.aliases) == 1 and 'name: "vision-dev"' in network.aliases[0]
    assert (
        runs["mnist"].one("alicloud:vpc/network:Network", "tf-mnist-dev-vpc").inputs["vpcName"]
        == "tf-mnist-dev"
    )


def test_the_kubeconfig_is_a_temporary_credential(dev_config):
    run = me.run_program(dev_config)
    (call,) = [c for c in run.calls if c.token == me.CREDENTIAL_TOKEN]
    assert call.args["temporaryDurationMinutes"] == 240


def test_the_credential_must_outlast_the_wait_for_the_chief(dev_config):
    run = me.run_program(
        {**dev_config, "tf-mnist:job.waitForChief": "true", "tf-mnist:job.waitTimeoutMinutes": "300"}
    )
    assert (
        "Configuration 'tf-mnist:cluster.credentialMinutes' value '240' is invalid: must exceed "
        "job.waitTimeoutMinutes (300) with job.waitForChief: the kubeconfig would expire while `pulumi up` "
        # The default came from Pulumi.yaml, which the CLI writes through the --path form.
        "waits for the chief.\n    fix: pulumi config set --path cluster.credentialMinutes 360"
    ) in _errors(run)


@pytest.mark.parametrize(
    "key,value,rule",
    [
        (
            "cluster.version",
            "1.33",
            "must be an ACK version <major>.<minor>.<patch>-aliyun.<n> such as 1.33.3-aliyun.1",
        ),
        ("cluster.version", "v1.33.3-aliyun.1", "must be an ACK version"),
        (
            "gpuPool.instanceTypes",
            '["gn5-c4g1.xlarge"]',
            "must be ECS instance types ecs.<family>.<size> such as "
            "ecs.gn5-c4g1.xlarge (not gn5-c4g1.xlarge)",
        ),
        ("cpuPool.instanceTypes", '["ecs.g6.xlarge", "ecs g6"]', "(not ecs g6)"),
        ("cluster.credentialMinutes", "10", "must be an integer between 15 and 4320"),
        ("cluster.podCidr", "192.168.128.0/17", "must not overlap vpc.cidr (192.168.0.0/16)"),
        ("cluster.serviceCidr", "172.20.16.0/20", "must not overlap cluster.podCidr (172.20.0.0/16)"),
    ],
)
def test_cloud_values_ack_would_refuse_are_refused_first(dev_config, key, value, rule):
    # Flannel: the pod CIDR applies to it only.
    run = me.run_program(
        {**dev_config, "tf-mnist:cluster.networkPlugin": "flannel", f"tf-mnist:{key}": value}
    )
    errors = _errors(run)
    assert f"Configuration 'tf-mnist:{key}' value " in errors and rule in errors, errors


def test_a_public_api_server_warns_and_a_private_one_does_not(dev_config, caplog):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    assert "The API server of tf-mnist-dev is reachable from the internet" in caplog.text
    caplog.clear()
    private = me.run_program({**dev_config, "tf-mnist:cluster.apiServerPublic": "false"})
    assert (
        private.one("alicloud:cs/managedKubernetes:ManagedKubernetes", "tf-mnist-dev-ack").inputs[
            "slbInternetEnabled"
        ]
        is False
    )
    assert "reachable from the internet" not in caplog.text


def test_a_stack_name_too_long_for_ack_names_is_refused(dev_config):
    stack = "s" * 51  # tf-mnist-<51>-gpu is 64 characters
    run = me.run_program(dev_config, stack=stack)
    assert (
        f"Stack name '{stack}' is invalid for the cloud layer: its GPU node pool would be named "
        f"tf-mnist-{stack}-gpu (64 characters; ACK allows 63), so the stack name may have at most 50.\n"
        f"    fix: pulumi stack rename {stack[:50]}"
    ) in _errors(run)
    assert me.run_program(dev_config, stack="s" * 50).error is None


def test_a_zone_of_another_region_is_refused(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:zone": "cn-beijing-a"})
    assert (
        "Configuration 'tf-mnist:zone' value 'cn-beijing-a' is invalid: must be a zone of region cn-hangzhou "
        "(alicloud:region), such as cn-hangzhou-a.\n    fix: pulumi config set zone cn-hangzhou-a"
    ) in _errors(run)


@pytest.mark.parametrize(
    "existing,key,value,rule",
    [
        (
            {"tf-mnist:cluster.id": "c0123", "tf-mnist:vswitch.id": "vsw-1"},
            "cluster.version",
            "1.33.3-aliyun.1",
            "applies only when the stack creates the ACK cluster (cluster.id names an existing one)",
        ),
        (
            {"tf-mnist:vswitch.id": "vsw-1"},
            "vpc.cidr",
            "10.0.0.0/8",
            "applies only when the stack creates the vSwitch (vswitch.id names an existing one, in its own VPC)",
        ),
    ],
    ids=["cluster.id", "vswitch.id"],
)
def test_keys_of_what_an_existing_id_replaces_are_refused(dev_config, existing, key, value, rule):
    run = me.run_program({**dev_config, **existing, f"tf-mnist:{key}": value})
    assert (
        f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.\n    fix: pulumi config rm {key}"
    ) in _errors(run)
