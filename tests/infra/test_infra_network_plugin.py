"""The ACK network plugin (cluster.networkPlugin): Terway on a pod vSwitch (created by the stack,
or cluster.podVswitchId), the default of a new cluster, or Flannel on cluster.podCidr, enforcing
no NetworkPolicy (a warning says so); unset, a cluster the stack already created keeps the
plugin its state records; and the rules between the keys of each."""

from __future__ import annotations

import json

import mock_engine as me
import pytest

CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
SWITCH = "alicloud:vpc/switch:Switch"
TERWAY = {"tf-mnist:cluster.networkPlugin": "terway"}
FLANNEL = {"tf-mnist:cluster.networkPlugin": "flannel"}
POD_VSWITCH = "vsw-pods0123456789"
FLANNEL_WARNING = (
    "The cluster tf-mnist-dev uses Flannel (cluster.networkPlugin flannel), which does not enforce "
    "Kubernetes NetworkPolicy"
)


def _errors(run: me.Run) -> str:
    assert run.error is not None, "the configuration was accepted"
    assert run.registrations == [] and run.calls_besides_state == []
    return str(run.error)


def _addons(cluster: me.Registration) -> list[str]:
    return [a["name"] for a in cluster.inputs["addons"]]


def test_a_new_stack_gets_terway_which_enforces_network_policy(dev_config, caplog):
    """cluster.networkPlugin unset on a stack whose state holds no cluster: Terway on the pod
    vSwitch the stack creates, so that the run's NetworkPolicies are enforced."""
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    assert [c.token for c in run.calls if c.token == me.STATE_TOKEN] == [me.STATE_TOKEN], (
        "the state was read once"
    )
    cluster = run.one(CLUSTER, "tf-mnist-dev-ack")
    assert _addons(cluster) == ["terway-eniip", "csi-plugin", "csi-provisioner"]
    # NetworkPolicy asked for, not left to Terway's default.
    assert json.loads(cluster.inputs["addons"][0]["config"]) == {"NetworkPolicy": "true"}
    assert (
        cluster.inputs["podVswitchIds"] == ["tf-mnist-dev-vswitch-pods-id"]
        and "podCidr" not in cluster.inputs
    )
    # Both vSwitches wait for the VPC's id, and the SDK registers each once its inputs resolve:
    # the engine sees them in either order, so the names are compared sorted.
    assert sorted(s.name for s in run.of_type(SWITCH)) == [
        "tf-mnist-dev-vswitch",
        "tf-mnist-dev-vswitch-pods",
    ]
    assert "Flannel" not in caplog.text


def test_a_deployed_flannel_cluster_keeps_flannel(dev_config, caplog):
    """A stack deployed when Flannel was the default, cluster.networkPlugin unset: its state's
    cluster has a pod CIDR and the flannel addon, so the inputs stay those (another plugin would
    replace the cluster) and no pod vSwitch is created; the warning says what Flannel means."""
    run = me.run_program(dev_config, state=me.deployed_cloud("flannel"))
    assert run.error is None, run.error
    cluster = run.one(CLUSTER, "tf-mnist-dev-ack")
    assert cluster.inputs["podCidr"] == "172.20.0.0/16" and "podVswitchIds" not in cluster.inputs
    assert _addons(cluster) == ["flannel", "csi-plugin", "csi-provisioner"]
    assert [s.name for s in run.of_type(SWITCH)] == ["tf-mnist-dev-vswitch"]
    assert FLANNEL_WARNING in caplog.text
    assert (
        "For enforcement, create the cluster with Terway: pulumi config set cluster.networkPlugin terway on a "
        "new stack (ACK cannot change the plugin of an existing cluster: on a deployed stack the change "
        "replaces the cluster)."
    ) in caplog.text
    assert "replaces the cluster (new nodes" not in caplog.text


def test_a_deployed_terway_cluster_keeps_terway(dev_config):
    run = me.run_program(dev_config, state=me.deployed_cloud("terway"))
    assert run.error is None, run.error
    assert _addons(run.one(CLUSTER, "tf-mnist-dev-ack"))[0] == "terway-eniip"


def test_a_plugin_set_against_the_deployed_one_warns_that_the_cluster_is_replaced(dev_config, caplog):
    run = me.run_program({**dev_config, **TERWAY}, state=me.deployed_cloud("flannel"))
    assert run.error is None, run.error
    assert _addons(run.one(CLUSTER, "tf-mnist-dev-ack"))[0] == "terway-eniip"
    assert (
        "cluster.networkPlugin terway: the stack's cluster tf-mnist-dev has flannel, which ACK cannot change, so "
        "`pulumi up` replaces the cluster (new nodes; every Kubernetes object is created again). To keep it: "
        "pulumi config rm cluster.networkPlugin"
    ) in caplog.text


def test_flannel_set_on_a_new_stack_uses_the_pod_cidr(dev_config, caplog):
    run = me.run_program({**dev_config, **FLANNEL})
    assert run.error is None, run.error
    cluster = run.one(CLUSTER, "tf-mnist-dev-ack")
    assert cluster.inputs["podCidr"] == "172.20.0.0/16" and "podVswitchIds" not in cluster.inputs
    assert FLANNEL_WARNING in caplog.text


def test_an_unreadable_state_needs_the_plugin_set(dev_config):
    run = me.run_program(dev_config, unreadable_state="no backend client is available")
    assert (
        "Configuration 'tf-mnist:cluster.networkPlugin' is missing: this stack's state could not be read "
        "(invoke of pulumi:pulumi:readStackResourceOutputs failed: no backend client is available "
        "(stackName)), and the default depends on whether the stack already "
        "has its ACK cluster (a change replaces it): set the value it has, or terway for a new one.\n"
        "    fix: pulumi config set cluster.networkPlugin terway"
    ) in _errors(run)
    explicit = me.run_program(
        {**dev_config, **TERWAY, "tf-mnist:nas.storageType": "Capacity"},
        unreadable_state="no backend client is available",
    )
    assert explicit.error is None, explicit.error


def test_terway_gets_a_pod_vswitch_in_the_node_vpc_and_zone_and_no_pod_cidr(dev_config, caplog):
    run = me.run_program({**dev_config, **TERWAY})
    assert run.error is None, run.error
    vpc = run.one("alicloud:vpc/network:Network", "tf-mnist-dev-vpc")
    pods = run.one(SWITCH, "tf-mnist-dev-vswitch-pods")
    assert pods.inputs["vswitchName"] == "tf-mnist-dev-pods"
    assert pods.inputs["cidrBlock"] == "192.168.64.0/18"
    assert pods.inputs["zoneId"] == "cn-hangzhou-i"
    assert pods.inputs["vpcId"] == "tf-mnist-dev-vpc-id" and vpc.urn in pods.dependencies
    cluster = run.one(CLUSTER, "tf-mnist-dev-ack")
    assert cluster.inputs["podVswitchIds"] == ["tf-mnist-dev-vswitch-pods-id"]
    assert pods.urn in cluster.property_dependencies["podVswitchIds"]
    assert "podCidr" not in cluster.inputs
    assert cluster.inputs["vswitchIds"] == ["tf-mnist-dev-vswitch-id"]
    assert _addons(cluster) == ["terway-eniip", "csi-plugin", "csi-provisioner"]
    assert "Flannel" not in caplog.text


def test_terway_on_an_existing_pod_vswitch_creates_none(dev_config):
    run = me.run_program({**dev_config, **TERWAY, "tf-mnist:cluster.podVswitchId": POD_VSWITCH})
    assert run.error is None, run.error
    assert [s.name for s in run.of_type(SWITCH)] == ["tf-mnist-dev-vswitch"]
    assert run.one(CLUSTER, "tf-mnist-dev-ack").inputs["podVswitchIds"] == [POD_VSWITCH]


def test_terway_in_an_existing_vpc_creates_the_pod_vswitch_there(dev_config):
    run = me.run_program(
        {
            **dev_config,
            **TERWAY,
            "tf-mnist:vpc.id": "vpc-0123456789",
            "tf-mnist:cluster.podVswitchCidr": "10.8.0.0/16",
        }
    )
    assert run.error is None, run.error
    pods = run.one(SWITCH, "tf-mnist-dev-vswitch-pods")
    assert (pods.inputs["vpcId"], pods.inputs["cidrBlock"]) == ("vpc-0123456789", "10.8.0.0/16")


def test_terway_with_an_existing_node_vswitch_uses_the_given_pod_vswitch(dev_config):
    run = me.run_program(
        {
            **dev_config,
            **TERWAY,
            "tf-mnist:vswitch.id": "vsw-nodes0123",
            "tf-mnist:cluster.podVswitchId": POD_VSWITCH,
        }
    )
    assert run.error is None, run.error
    assert run.of_type(SWITCH) == [] and run.of_type("alicloud:vpc/network:Network") == []
    cluster = run.one(CLUSTER, "tf-mnist-dev-ack")
    assert (cluster.inputs["vswitchIds"], cluster.inputs["podVswitchIds"]) == (
        ["vsw-nodes0123"],
        [POD_VSWITCH],
    )


def test_terway_ignores_the_flannel_pod_cidr_in_the_cidr_rules(dev_config):
    """The default cluster.podCidr is no address of a Terway cluster: a Service CIDR inside it is fine."""
    run = me.run_program({**dev_config, **TERWAY, "tf-mnist:cluster.serviceCidr": "172.20.16.0/20"})
    assert run.error is None, run.error


@pytest.mark.parametrize(
    "extra,expected",
    [
        (
            {**FLANNEL, "tf-mnist:cluster.podVswitchId": POD_VSWITCH},
            f"Configuration 'tf-mnist:cluster.podVswitchId' value '{POD_VSWITCH}' is invalid: applies only with "
            "cluster.networkPlugin terway (a Flannel cluster gives pods addresses of cluster.podCidr, not of a vSwitch).\n"
            "    fix: pulumi config rm cluster.podVswitchId",
        ),
        (
            {**FLANNEL, "tf-mnist:cluster.podVswitchCidr": "192.168.128.0/18"},
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '192.168.128.0/18' is invalid: applies only with "
            "cluster.networkPlugin terway (a Flannel cluster gives pods addresses of cluster.podCidr, not of a vSwitch).\n"
            "    fix: pulumi config rm cluster.podVswitchCidr",
        ),
        (
            {**TERWAY, "tf-mnist:cluster.podCidr": "172.30.0.0/16"},
            "Configuration 'tf-mnist:cluster.podCidr' value '172.30.0.0/16' is invalid: applies only with "
            "cluster.networkPlugin flannel (a Terway cluster gives pods addresses of its pod vSwitch: "
            "cluster.podVswitchId or cluster.podVswitchCidr).\n    fix: pulumi config rm cluster.podCidr",
        ),
        (
            {
                **TERWAY,
                "tf-mnist:cluster.podVswitchId": POD_VSWITCH,
                "tf-mnist:cluster.podVswitchCidr": "192.168.128.0/18",
            },
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '192.168.128.0/18' is invalid: applies only without "
            "cluster.podVswitchId (that vSwitch gives the pods their addresses, so the stack creates none).\n"
            "    fix: pulumi config rm cluster.podVswitchCidr",
        ),
        (
            {**TERWAY, "tf-mnist:vswitch.id": "vsw-nodes0123"},
            "Configuration 'tf-mnist:cluster.podVswitchId' is missing: required with cluster.networkPlugin terway and "
            "vswitch.id (the stack does not know the VPC of that vSwitch, so it cannot create the pod vSwitch there: "
            "give an existing vSwitch of that VPC and zone).\n    fix: pulumi config set cluster.podVswitchId vsw-xxxxxxxx",
        ),
        (
            {
                **TERWAY,
                "tf-mnist:vswitch.id": "vsw-nodes0123",
                "tf-mnist:cluster.podVswitchCidr": "192.168.128.0/18",
            },
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '192.168.128.0/18' is invalid: applies only when the "
            "stack creates the node vSwitch (vswitch.id names an existing one, whose VPC the stack does not know).\n"
            "    fix: pulumi config rm cluster.podVswitchCidr",
        ),
        (
            {**TERWAY, "tf-mnist:cluster.podVswitchCidr": "10.0.0.0/18"},
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '10.0.0.0/18' is invalid: must lie inside vpc.cidr "
            "(192.168.0.0/16): the pod vSwitch is one of the node VPC.\n"
            "    fix: pulumi config set cluster.podVswitchCidr 192.168.64.0/18",
        ),
        (
            {**TERWAY, "tf-mnist:cluster.podVswitchCidr": "192.168.0.0/18"},
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '192.168.0.0/18' is invalid: must not overlap "
            "vswitch.cidr (192.168.0.0/20).\n    fix: pulumi config set cluster.podVswitchCidr 192.168.64.0/18",
        ),
        (
            {
                **TERWAY,
                "tf-mnist:vpc.id": "vpc-0123456789",
                "tf-mnist:cluster.podVswitchCidr": "172.21.0.0/18",
            },
            "Configuration 'tf-mnist:cluster.podVswitchCidr' value '172.21.0.0/18' is invalid: must not overlap "
            "cluster.serviceCidr (172.21.0.0/20).\n    fix: pulumi config set cluster.podVswitchCidr 192.168.64.0/18",
        ),
        (
            {**TERWAY, "tf-mnist:cluster.podVswitchId": "vsw_1"},
            "Configuration 'tf-mnist:cluster.podVswitchId' value 'vsw_1' is invalid: must be a vSwitch id "
            "vsw-<lowercase letters and digits> such as vsw-bp1a2b3c4d5e6f7g8h9i0 (`aliyun vpc DescribeVSwitches` lists "
            "them).\n    fix: pulumi config set cluster.podVswitchId vsw-xxxxxxxx",
        ),
        (
            {"tf-mnist:cluster.networkPlugin": "calico"},
            "Configuration 'tf-mnist:cluster.networkPlugin' value 'calico' is invalid: must be one of flannel, terway "
            "(or unset)",
        ),
    ],
    ids=[
        "podVswitchId-flannel",
        "podVswitchCidr-flannel",
        "podCidr-terway",
        "podVswitchCidr-with-podVswitchId",
        "vswitch.id-needs-podVswitchId",
        "podVswitchCidr-with-vswitch.id",
        "outside-vpc",
        "overlaps-vswitch",
        "overlaps-service",
        "bad-id",
        "bad-plugin",
    ],
)
def test_network_plugin_rules(dev_config, extra, expected):
    errors = _errors(me.run_program({**dev_config, **extra}))
    assert expected in errors, errors


def test_a_pod_vswitch_cidr_outside_a_bigger_vpc_gets_a_free_block_of_it_as_the_fix(dev_config):
    run = me.run_program(
        {**dev_config, **TERWAY, "tf-mnist:vpc.cidr": "10.0.0.0/8", "tf-mnist:vswitch.cidr": "10.0.0.0/20"}
    )
    assert (
        "Configuration 'tf-mnist:cluster.podVswitchCidr' value '192.168.64.0/18' is invalid: must lie inside "
        "vpc.cidr (10.0.0.0/8): the pod vSwitch is one of the node VPC.\n"
        # The default came from Pulumi.yaml, which the CLI writes through the --path form.
        "    fix: pulumi config set --path cluster.podVswitchCidr 10.0.64.0/18"
    ) in _errors(run)


@pytest.mark.parametrize(
    "key,value",
    [
        ("cluster.networkPlugin", "terway"),
        ("cluster.podVswitchId", POD_VSWITCH),
        ("cluster.podVswitchCidr", "192.168.128.0/18"),
    ],
)
def test_network_plugin_keys_are_refused_on_an_existing_cluster(dev_config, key, value):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:cluster.id": "c0123",
            "tf-mnist:vswitch.id": "vsw-1",
            f"tf-mnist:{key}": value,
        }
    )
    assert (
        f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: applies only when the stack creates the "
        "ACK cluster (cluster.id names an existing one).\n"
        f"    fix: pulumi config rm {key}"
    ) in _errors(run)


def test_an_existing_cluster_gets_no_flannel_warning(dev_config, caplog):
    run = me.run_program({**dev_config, "tf-mnist:cluster.id": "c0123", "tf-mnist:vswitch.id": "vsw-1"})
    assert run.error is None, run.error
    assert run.of_type(CLUSTER) == [] and "Flannel" not in caplog.text


def test_network_plugin_keys_are_refused_with_kubeconfig(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
            "tf-mnist:nas.mountTargetDomain": "0f1e2d3c4b-xyz89.cn-hangzhou.nas.aliyuncs.com",
            **TERWAY,
        }
    )
    assert (
        "Configuration 'tf-mnist:cluster.networkPlugin' value 'terway' is invalid: applies only without "
        "kubeconfig (with kubeconfig the stack deploys into that cluster and creates no VPC, cluster, node pool "
        "or NAS).\n    fix: pulumi config rm cluster.networkPlugin"
    ) in _errors(run)
