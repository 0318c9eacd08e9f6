"""Terway's NetworkPolicy setting on an existing cluster (infra/terway_policy.py): eni-config's
``disable_network_policy: "true"`` stops the program before anything is registered; a cluster
without that ConfigMap (not Terway) passes; one that cannot be read warns. Under the mock
engine, and with the real kubernetes client against a recorded API server."""

from __future__ import annotations

import mock_engine as me
import pytest
from recorded_api import RecordedApi, api_server  # noqa: F401 - the fixture

from infra import terway_policy
from infra.cluster_objects import KubeconfigCluster, Refused, Unreachable

EXISTING = {
    "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
    "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
}
ENI_CONFIG = ("kube-system", "eni-config")


def test_a_terway_that_does_not_enforce_policies_stops_the_program_with_the_fixes(dev_config):
    cluster = me.FakeCluster(config_maps={ENI_CONFIG: {"disable_network_policy": "true"}})
    run = me.run_program({**dev_config, **EXISTING}, cluster=cluster)
    assert isinstance(run.error, terway_policy.PolicyNotEnforced), run.error
    assert run.registrations == []
    message = str(run.error)
    assert message.startswith(
        "ConfigMap kube-system/eni-config has disable_network_policy: 'true': the cluster's Terway does not "
        "enforce NetworkPolicy"
    ), message
    assert "turn on NetworkPolicy support in the cluster's Terway component" in message
    assert "pulumi config set networkPolicy.enabled false" in message


@pytest.mark.parametrize(
    "config_maps", [{ENI_CONFIG: {"disable_network_policy": "false"}}, {ENI_CONFIG: {}}, {}], ids=str
)
def test_terway_enforcing_or_another_plugin_passes(dev_config, config_maps):
    run = me.run_program({**dev_config, **EXISTING}, cluster=me.FakeCluster(config_maps=config_maps))
    assert run.error is None, run.error


def test_policies_off_or_a_cluster_the_stack_creates_is_not_read(dev_config):
    off = {**dev_config, **EXISTING, "tf-mnist:networkPolicy.enabled": "false"}
    disabled = me.FakeCluster(config_maps={ENI_CONFIG: {"disable_network_policy": "true"}})
    assert me.run_program(off, cluster=disabled).error is None
    # The cloud layer's cluster does not exist before the up; its addon config asks for policy.
    assert me.run_program(dev_config, cluster=disabled).error is None


@pytest.mark.parametrize(
    "error", [Unreachable("the API server did not answer (TimeoutError)"), Refused(403, "Forbidden")], ids=str
)
def test_a_config_map_that_cannot_be_read_warns_with_the_check_to_run(dev_config, caplog, error):
    cluster = me.FakeCluster(config_maps={ENI_CONFIG: error})
    run = me.run_program({**dev_config, **EXISTING}, cluster=cluster)
    assert run.error is None, run.error
    (warning,) = [r.getMessage() for r in caplog.records if "eni-config" in r.getMessage()]
    assert f"could not read ConfigMap kube-system/eni-config ({error})" in warning
    assert "-o jsonpath='{.data.disable_network_policy}'` must not print true" in warning


def test_the_client_reads_the_config_map_and_tells_a_missing_one(api_server):
    path = "/api/v1/namespaces/kube-system/configmaps/eni-config"
    RecordedApi.answers = {path: (200, {"kind": "ConfigMap", "data": {"disable_network_policy": "true"}})}
    cluster = KubeconfigCluster(me.kubeconfig_content(server=api_server))
    assert cluster.config_map_data(*ENI_CONFIG) == {"disable_network_policy": "true"}
    assert [p for p, _, _ in RecordedApi.seen] == [path]
    RecordedApi.answers = {}
    assert KubeconfigCluster(me.kubeconfig_content(server=api_server)).config_map_data(*ENI_CONFIG) is None
    RecordedApi.answers = {path: (403, {"kind": "Status", "code": 403})}
    with pytest.raises(Refused, match="HTTP 403"):
        KubeconfigCluster(me.kubeconfig_content(server=api_server)).config_map_data(*ENI_CONFIG)
