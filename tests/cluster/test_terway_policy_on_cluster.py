"""The Terway check against a real API server (infra/terway_policy.py): with Terway's
``kube-system/eni-config`` saying ``disable_network_policy: "true"``, as a cluster whose
NetworkPolicy support was left off has it, `pulumi preview` of a stack on that cluster fails
before planning anything, naming the ConfigMap and the fixes; with ``"false"`` it plans.
tools/local-cluster runs no Terway: the test writes the ConfigMap Terway would read, and removes
it on the way out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .kube import Kube
from .stack import LOCAL_CLUSTER_CONFIG, stack_on_cluster

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-terway"


@pytest.fixture(scope="module")
def system(local_cluster: Kube) -> Iterator[Kube]:
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, "kube-system")
    try:
        yield kube
    finally:
        kube.run("delete", "configmap", "eni-config", "--ignore-not-found")


def eni_config(disabled: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "eni-config", "namespace": "kube-system"},
        "data": {"disable_network_policy": disabled, "eni_conf": '{"version": "1"}'},
    }


def test_a_terway_without_policy_enforcement_stops_the_preview(
    local_cluster, system, tmp_path_factory
) -> None:
    config = {**LOCAL_CLUSTER_CONFIG, "namespace": NAMESPACE}
    with stack_on_cluster(local_cluster, tmp_path_factory, "dev", config) as (project, _):
        system.apply(eni_config("true"))
        refused = project.pulumi("preview", check=False)
        out = refused.stdout + refused.stderr
        assert refused.returncode != 0, out
        assert "ConfigMap kube-system/eni-config has disable_network_policy: 'true'" in out, out
        assert "pulumi config set networkPolicy.enabled false" in out, out
        system.apply(eni_config("false"))
        planned = project.pulumi("preview", check=False)
        assert planned.returncode == 0, planned.stdout + planned.stderr
