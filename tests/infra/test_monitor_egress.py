"""The API server's endpoint ports as the program reads them from an existing cluster
(infra/cluster_objects.py, for infra/monitor_egress.py): the EndpointSlices' rule, and the real
kubernetes client against a recorded API server. The ports' rule itself, under the mock engine,
is tests/infra/test_infra_network_policy.py's."""

from __future__ import annotations

import mock_engine as me
import pytest
from recorded_api import RecordedApi, api_server  # noqa: F401 - the fixture

from infra.cluster_objects import API_SERVER_SLICES, KubeconfigCluster, Refused, Unreachable, endpoint_ports


def _slice(ports: list[dict], addresses: tuple[str, ...] = ("192.168.0.250",)) -> dict:
    return {
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a]} for a in addresses],
        "ports": ports,
    }


def test_the_ports_are_the_tcp_ports_of_slices_with_endpoints():
    https = {"name": "https", "port": 6443, "protocol": "TCP"}
    assert endpoint_ports([_slice([https]), _slice([{**https, "port": 443}])]) == [443, 6443]
    # Protocol unset is TCP; UDP and a slice without endpoints do not count; no repeats.
    assert endpoint_ports([_slice([{"port": 6443}]), _slice([https])]) == [6443]
    assert endpoint_ports([_slice([{"port": 53, "protocol": "UDP"}]), _slice([https], addresses=())]) == []
    assert endpoint_ports([]) == []


def test_the_client_reads_the_kubernetes_services_slices_with_the_kubeconfigs_token(api_server):
    RecordedApi.answers = {
        API_SERVER_SLICES: (200, {"kind": "EndpointSliceList", "items": [_slice([{"port": 16443}])]})
    }
    cluster = KubeconfigCluster(me.kubeconfig_content(server=api_server, token="t-42"))
    assert cluster.api_server_ports() == [16443]
    assert [(path, auth) for path, _, auth in RecordedApi.seen] == [
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
            "?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes",
            "Bearer t-42",
        )
    ]
    # A cluster whose API server publishes no endpoints (tools/local-cluster's reconciler is off).
    RecordedApi.answers = {API_SERVER_SLICES: (200, {"kind": "EndpointSliceList", "items": []})}
    assert cluster.api_server_ports() == []


def test_a_refused_list_is_refused(api_server):
    RecordedApi.answers = {API_SERVER_SLICES: (403, {"kind": "Status", "code": 403})}
    cluster = KubeconfigCluster(me.kubeconfig_content(server=api_server))
    with pytest.raises(Refused) as refused:
        cluster.api_server_ports()
    assert refused.value.status == 403


def test_a_cluster_that_did_not_answer_is_not_asked_again():
    # Each ask of a cluster that does not answer waits for the connect timeout: the ownership
    # check's first failure stands for the endpoints' read too.
    cluster = KubeconfigCluster(me.kubeconfig_content(server="http://127.0.0.1:1", token="t-secret"))
    clients = []
    made = cluster._client
    cluster._client = lambda: clients.append(1) or made()  # type: ignore[method-assign]
    with pytest.raises(Unreachable) as first:
        cluster.api_server_ports()
    with pytest.raises(Unreachable) as second:
        cluster.api_server_ports()
    assert str(first.value) == str(second.value) and str(first.value).startswith(
        "the API server did not answer ("
    )
    assert "t-secret" not in str(first.value) and "127.0.0.1" not in str(first.value)
    assert clients == [1]
