"""Unit tests for trainer.contract.cluster_spec: exact hosts, TF_CONFIG and the errors it raises."""

import json

import pytest

from trainer.contract.cluster_spec import (
    ClusterSpecError,
    Replicas,
    kubernetes_cluster_spec,
    local_cluster_spec,
    task_name,
    tf_config,
    tf_config_json,
)

PORTS = {"chief": 8000, "worker": 8000, "ps": 9000}


def test_kubernetes_hosts_follow_service_names():
    spec = kubernetes_cluster_spec("mnist", "default", Replicas(chief=1, worker=2, ps=2), PORTS)
    assert spec == {
        "chief": ["mnist-chief-0.default.svc:8000"],
        "worker": ["mnist-worker-0.default.svc:8000", "mnist-worker-1.default.svc:8000"],
        "ps": ["mnist-ps-0.default.svc:9000", "mnist-ps-1.default.svc:9000"],
    }


def test_no_ps_means_no_ps_key():
    spec = kubernetes_cluster_spec("a", "ns", Replicas(chief=1, worker=3, ps=0), PORTS)
    assert set(spec) == {"chief", "worker"}
    assert len(spec["worker"]) == 3


def test_tf_config_round_trips_through_json():
    spec = local_cluster_spec(
        Replicas(chief=1, worker=1, ps=1), {("chief", 0): 2001, ("worker", 0): 2002, ("ps", 0): 2003}
    )
    parsed = json.loads(tf_config_json(spec, "worker", 0))
    assert parsed == {
        "cluster": {"chief": ["localhost:2001"], "worker": ["localhost:2002"], "ps": ["localhost:2003"]},
        "task": {"type": "worker", "index": 0},
    }


def test_evaluator_is_outside_the_training_cluster():
    replicas = Replicas(chief=1, worker=1, ps=0, evaluator=1)
    spec = kubernetes_cluster_spec("m", "default", replicas, PORTS | {"evaluator": 8000})
    assert "evaluator" not in spec
    assert tf_config(spec, "evaluator", 0)["task"] == {"type": "evaluator", "index": 0}
    assert ("evaluator", 0) in list(replicas.tasks())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"worker": 0}, "replica count for 'worker' is 0: must be >= 1"),
        ({"worker": -1}, "replica count for 'worker' is -1: must be >= 1"),
        ({"ps": -2}, "replica count for 'ps' is -2: must be >= 0"),
        ({"chief": 2}, "replica count for 'chief' is 2: must be between 0 and 1"),
        ({"worker": 4.5}, "replica count for 'worker' must be an integer, got 4.5"),
        ({"worker": True}, "replica count for 'worker' must be an integer, got True"),
        ({"chief": 0, "ps": 1}, "ps tasks need a chief"),
    ],
)
def test_bad_replica_counts(kwargs, message):
    with pytest.raises(ClusterSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Replicas(**kwargs)


@pytest.mark.parametrize("prefix", ["", "Mnist", "1mnist", "mnist-", "mn_ist", "mn.ist"])
def test_bad_name_prefix(prefix):
    with pytest.raises(ClusterSpecError, match="must be a DNS-1035 label"):
        task_name(prefix, "worker", 0)


def test_task_name_length_limit():
    with pytest.raises(ClusterSpecError, match="Kubernetes Service names are at most 63"):
        task_name("a" * 60, "worker", 0)
    assert task_name("a" * 54, "worker", 0) == "a" * 54 + "-worker-0"


@pytest.mark.parametrize("namespace", ["", "Default", "-ns", "ns-", "a" * 64, "n_s"])
def test_bad_namespace(namespace):
    with pytest.raises(ClusterSpecError, match="must be a DNS-1123 label"):
        kubernetes_cluster_spec("mnist", namespace, Replicas(), PORTS)


@pytest.mark.parametrize("port", [0, 65536, -1, "8000", 80.0])
def test_bad_port(port):
    with pytest.raises(ClusterSpecError, match="must be an integer between 1 and 65535"):
        kubernetes_cluster_spec("mnist", "default", Replicas(), {**PORTS, "worker": port})


def test_missing_port_and_duplicate_addresses():
    with pytest.raises(ClusterSpecError, match="no port given for task type 'ps'"):
        kubernetes_cluster_spec("mnist", "default", Replicas(ps=1), {"chief": 1, "worker": 2})
    with pytest.raises(ClusterSpecError, match=r"duplicate addresses: \['localhost:5000'\]"):
        local_cluster_spec(Replicas(chief=1, worker=1), {("chief", 0): 5000, ("worker", 0): 5000})


def test_task_outside_spec_is_rejected():
    spec = kubernetes_cluster_spec("mnist", "default", Replicas(worker=2), PORTS)
    with pytest.raises(ClusterSpecError, match=r"task \(worker, 2\) is not in the cluster spec"):
        tf_config(spec, "worker", 2)
    with pytest.raises(ClusterSpecError, match=r"task \(ps, 0\) is not in the cluster spec"):
        tf_config(spec, "ps", 0)
