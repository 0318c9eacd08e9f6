"""An existing cluster (``kubeconfig``): the provider's identity, no Alibaba resource
at all, and namespaces the stack must not create."""

from __future__ import annotations

import json

import mock_engine as me
import pytest
import yaml

PROVIDER = "pulumi:providers:kubernetes"
SERVICE = "kubernetes:core/v1:Service"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
DOMAIN = "abc.cn-hangzhou.nas.aliyuncs.com"


def _existing(config: dict, kubeconfig: str, **flat: str) -> dict:
    return {
        **config,
        "tf-mnist:kubeconfig": kubeconfig,
        "tf-mnist:nas.mountTargetDomain": DOMAIN,
        **{f"tf-mnist:{k.replace('__', '.')}": v for k, v in flat.items()},
    }


def _rejected(run: me.Run, *lines: str) -> None:
    count = len(lines) // 2
    header = HEADER_1 if count == 1 else f"{count} invalid configuration values; nothing was deployed:"
    assert str(run.error) == "\n".join([header, *lines])
    assert run.registrations == [] and run.calls_besides_state == []


def _identifier(run: me.Run) -> str:
    """The provider's clusterIdentifier, unwrapped where it is a secret (read from secret
    kubeconfig content, it is one)."""
    value = run.one(PROVIDER, "mnist-k8s").inputs["clusterIdentifier"]
    return value["value"] if me.is_secret_value(value) else value


def _kubernetes_inputs(run: me.Run) -> dict:
    return {
        (r.type, r.name): r.inputs for r in run.registrations if r.type.startswith("kubernetes:") and r.custom
    }


# --- the provider's cluster identifier ------------------------------------------------------


def test_the_provider_is_identified_by_the_api_server_url(dev_config):
    run = me.run_program(_existing(dev_config, me.secret(me.kubeconfig_content())))
    assert run.error is None, run.error
    provider = run.one(PROVIDER, "mnist-k8s")
    assert _identifier(run) == me.CLUSTER_SERVER
    assert me.is_secret_value(provider.inputs["kubeconfig"])


def test_a_kubeconfig_edit_that_keeps_the_cluster_changes_only_the_kubeconfig(dev_config):
    # A new token, a rotated CA and a renamed cluster entry: before, the provider's own rule
    # (compare the active cluster entry) replaced it, and with it every Kubernetes object,
    # on the CA change. With the same clusterIdentifier pulumi-kubernetes only updates it.
    first = me.run_program(_existing(dev_config, me.secret(me.kubeconfig_content())))
    edited = me.run_program(
        _existing(
            dev_config,
            me.secret(me.kubeconfig_content(token="token-2", ca="Q0EtMg==", cluster_name="ack-renamed")),
        )
    )
    assert first.error is None and edited.error is None
    old, new = first.one(PROVIDER, "mnist-k8s").inputs, edited.one(PROVIDER, "mnist-k8s").inputs
    assert _identifier(first) == _identifier(edited) == me.CLUSTER_SERVER
    assert old["kubeconfig"] != new["kubeconfig"]
    # Nothing else differs: no object (and no run id) depends on the kubeconfig's text.
    assert _kubernetes_inputs(first) == _kubernetes_inputs(edited)
    assert first.outputs["runId"] == edited.outputs["runId"]


def test_another_api_server_is_another_cluster(dev_config):
    other = me.run_program(
        _existing(dev_config, me.secret(me.kubeconfig_content(server="https://198.51.100.20:6443")))
    )
    assert _identifier(other) == "https://198.51.100.20:6443"


def test_the_identifier_of_a_secret_kubeconfig_is_secret(dev_config):
    run = me.run_program(_existing(dev_config, me.secret(me.kubeconfig_content())))
    identifier = run.one(PROVIDER, "mnist-k8s").inputs["clusterIdentifier"]
    assert me.is_secret_value(identifier) and identifier["value"] == me.CLUSTER_SERVER


def test_a_kubeconfig_file_is_read_for_its_server(dev_config, tmp_path):
    path = tmp_path / "config"
    path.write_text(me.kubeconfig_content(server="https://10.1.2.3:6443"))
    run = me.run_program(_existing(dev_config, str(path)))
    provider = run.one(PROVIDER, "mnist-k8s").inputs
    assert provider["kubeconfig"]["value"] == str(path)  # the provider still reads the file itself
    assert provider["clusterIdentifier"] == "https://10.1.2.3:6443"


def test_a_json_kubeconfig_with_several_contexts_uses_the_current_one(dev_config):
    kubeconfig = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "b",
            "clusters": [
                {"name": "a", "cluster": {"server": "https://a.example:6443"}},
                {"name": "b", "cluster": {"server": "https://b.example:6443"}},
            ],
            "contexts": [
                {"name": "a", "context": {"cluster": "a"}},
                {"name": "b", "context": {"cluster": "b"}},
            ],
        }
    )
    run = me.run_program(_existing(dev_config, me.secret(kubeconfig)))
    assert _identifier(run) == "https://b.example:6443"


def test_cluster_identifier_overrides_the_server(dev_config):
    # E.g. before moving from the public to the private endpoint of the same cluster: set the
    # old URL here first, and the move replaces nothing.
    run = me.run_program(
        _existing(dev_config, me.secret(me.kubeconfig_content()), clusterIdentifier=me.CLUSTER_SERVER)
    )
    other = me.run_program(
        _existing(
            dev_config,
            me.secret(me.kubeconfig_content(server="https://10.0.0.1:6443")),
            clusterIdentifier=me.CLUSTER_SERVER,
        )
    )
    assert (
        run.one(PROVIDER, "mnist-k8s").inputs["clusterIdentifier"]
        == other.one(PROVIDER, "mnist-k8s").inputs["clusterIdentifier"]
        == me.CLUSTER_SERVER
    )  # set as clusterIdentifier, not read from the secret content: plain


def test_an_unreadable_kubeconfig_file_is_refused(dev_config):
    run = me.run_program(_existing(dev_config, "/nonexistent/kubeconfig"))
    _rejected(
        run,
        "Configuration 'tf-mnist:kubeconfig' value '/nonexistent/kubeconfig' is invalid: cannot be read (No "
        "such file or directory), so the stack cannot tell which cluster it names (set it to an existing "
        "kubeconfig file, or set clusterIdentifier).",
        "    fix: pulumi config set kubeconfig ~/.kube/config",
    )


def test_a_kubeconfig_without_a_server_is_refused_without_showing_it(dev_config):
    kubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: me\n  user: {token: t0ken}\n"
    run = me.run_program(_existing(dev_config, kubeconfig))
    _rejected(
        run,
        *_kubeconfig_not_secret(5),
        "Configuration 'tf-mnist:kubeconfig' value '<kubeconfig content, 5 lines>' is invalid: names no API "
        "server in its current context, so the stack cannot tell which cluster it is (fix the kubeconfig, or "
        "set clusterIdentifier).",
        "    fix: pulumi config set kubeconfig ~/.kube/config",
    )
    assert "t0ken" not in str(run.error)


def _kubeconfig_not_secret(lines: int) -> tuple[str, str]:
    return (
        f"Configuration 'tf-mnist:kubeconfig' value '<kubeconfig content, {lines} lines>' is not a secret: "
        "kubeconfig content holds the cluster's credentials (a token, a client key or password), which the "
        "stack file (Pulumi.<stack>.yaml) would hold in plain text; set the content with --secret, or set the "
        "path of the file instead (a path is read at every operation and stored as the path).",
        "    fix: pulumi config set --secret kubeconfig < ~/.kube/config, or pulumi config set kubeconfig "
        "~/.kube/config",
    )


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_kubeconfig_content_in_plain_text_is_refused_without_showing_it(dev_config, form):
    # The cluster's credential, like registryCredentials.password: never plain in the stack file.
    content = me.kubeconfig_content(token="t0ken-in-plain-text")
    if form == "json":
        content = json.dumps(yaml.safe_load(content))
    run = me.run_program(_existing(dev_config, content))
    _rejected(run, *_kubeconfig_not_secret(len(content.splitlines())))
    assert "t0ken-in-plain-text" not in str(run.error)


def test_a_kubeconfig_path_may_be_plain_and_content_may_be_secret(dev_config, tmp_path):
    path = tmp_path / "config"
    path.write_text(me.kubeconfig_content())
    assert me.run_program(_existing(dev_config, str(path))).error is None
    assert me.run_program(_existing(dev_config, me.secret(me.kubeconfig_content()))).error is None


def test_cluster_identifier_without_kubeconfig_is_refused(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:clusterIdentifier": "ack-prod"})
    _rejected(
        run,
        "Configuration 'tf-mnist:clusterIdentifier' value 'ack-prod' is invalid: applies only with kubeconfig "
        "(without it the ACK cluster id identifies the cluster).",
        "    fix: pulumi config rm clusterIdentifier",
    )


# --- no Alibaba resource without the cloud layer ---------------------------------------------


def test_an_allowlist_without_the_cloud_layer_is_load_balancer_source_ranges_only(dev_config, caplog):
    run = me.run_program(
        _existing(
            dev_config,
            me.secret(me.kubeconfig_content()),
            tensorboard__serviceType="LoadBalancer",
            tensorboard__allowedSourceRanges='["203.0.113.0/24", "198.51.100.7/32"]',
        )
    )
    assert run.error is None, run.error
    assert [r.type for r in run.registrations if r.type.startswith("alicloud:")] == []
    assert run.calls == []
    service = run.one(SERVICE, "mnist-tensorboard").inputs
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24", "198.51.100.7/32"]
    assert me.own_annotations(service["metadata"]) == {
        "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "internet"
    }
    assert "open to the whole internet" not in caplog.text


def test_with_the_cloud_layer_an_allowlist_is_both_an_acl_and_source_ranges(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:tensorboard.serviceType": "LoadBalancer",
            "tf-mnist:tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
        }
    )
    assert run.one("alicloud:slb/acl:Acl", "mnist-tensorboard-acl")
    service = run.one(SERVICE, "mnist-tensorboard").inputs
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert (
        service["metadata"]["annotations"]["service.beta.kubernetes.io/alibaba-cloud-loadbalancer-acl-status"]
        == "on"
    )


def test_source_ranges_only_on_a_load_balancer(dev_config):
    run = me.run_program(
        _existing(
            dev_config,
            me.secret(me.kubeconfig_content()),
            tensorboard__serviceType="NodePort",
            tensorboard__allowedSourceRanges='["203.0.113.0/24"]',
        )
    )
    assert "loadBalancerSourceRanges" not in run.one(SERVICE, "mnist-tensorboard").inputs["spec"]


# --- namespaces every cluster has --------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
def test_create_namespace_refuses_a_system_namespace(dev_config, name):
    run = me.run_program({**dev_config, "tf-mnist:createNamespace": "true", "tf-mnist:namespace": name})
    _rejected(
        run,
        f"Configuration 'tf-mnist:createNamespace' value 'true' is invalid: must be false with namespace "
        f"{name}, which every cluster has: the stack would try to create it and, on destroy, delete it.",
        "    fix: pulumi config set createNamespace false",
    )


def test_create_namespace_of_a_new_namespace(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:createNamespace": "true", "tf-mnist:namespace": "training"})
    assert run.error is None, run.error
    assert run.one("kubernetes:core/v1:Namespace", "training").inputs["metadata"]["name"] == "training"
