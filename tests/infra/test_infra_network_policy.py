"""The run's NetworkPolicies under the mock engine: what each admits and lets its pods open, that
every pod of the run is selected by one, that the pods wait for them, and networkPolicy.enabled
false creating none. Enforcement is tested on the real local
cluster (tests/cluster/test_network_policy.py)."""

from __future__ import annotations

import json

import mock_engine as me
import pytest

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STACK_MARK = "organization.tf-mnist.dev"
#: The four files of a data.source list.
IDX = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]
#: Every policy's first egress rule: DNS, to the cluster DNS's pods and to a node-local cache.
DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        },
        {"ipBlock": {"cidr": "169.254.0.0/16"}},
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


def _set(config: dict, **overrides: str) -> dict:
    return {**config, **{f"tf-mnist:{k}": v for k, v in overrides.items()}}


def _run(config: dict) -> me.Run:
    run = me.run_program(config)
    assert run.error is None, run.error
    return run


def _task_pod_selector() -> dict:
    return {
        "matchLabels": {"app.kubernetes.io/instance": "mnist", "tf-mnist.io/stack": STACK_MARK},
        "matchExpressions": [{"key": "tf-replica-type", "operator": "Exists"}],
    }


def test_task_ports_admit_only_the_runs_own_tasks(dev_config):
    run = _run(_set(dev_config, **{"ps.port": "2300", "worker.port": "2200"}))
    spec = run.one(POLICY, "mnist-tasks").inputs["spec"]
    assert spec["podSelector"] == _task_pod_selector()
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    ports = [{"protocol": "TCP", "port": 2200}, {"protocol": "TCP", "port": 2300}]
    assert spec["ingress"] == [{"from": [{"podSelector": _task_pod_selector()}], "ports": ports}]
    # Out: DNS (the peers' names), then only the peers' ports.
    assert spec["egress"] == [DNS, {"to": [{"podSelector": _task_pod_selector()}], "ports": ports}]
    # Every task pod carries the labels the policy selects; no other pod of the stack does.
    for job in run.of_type(JOB):
        labels = job.inputs["spec"]["template"]["metadata"]["labels"]
        selected = (
            labels.get("app.kubernetes.io/instance") == "mnist"
            and labels.get("tf-mnist.io/stack") == STACK_MARK
            and "tf-replica-type" in labels
        )
        assert selected == (job.name.split("-")[1] in ("chief", "worker", "ps")), job.name


@pytest.mark.parametrize(
    "service_type, admitted",
    [
        ("ClusterIP", []),
        ("NodePort", [{"ports": [{"protocol": "TCP", "port": 6006}]}]),
    ],
)
def test_tensorboard_admits_only_what_its_service_exposes(dev_config, service_type, admitted):
    run = _run(_set(dev_config, **{"tensorboard.serviceType": service_type}))
    spec = run.one(POLICY, "mnist-tensorboard").inputs["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {
            "app.kubernetes.io/instance": "mnist",
            "app.kubernetes.io/component": "tensorboard",
            "tf-mnist.io/stack": STACK_MARK,
        }
    }
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec.get("ingress", []) == admitted
    assert spec["egress"] == [DNS]
    deployment = run.one(DEPLOYMENT, "mnist-tensorboard")
    labels = deployment.inputs["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in spec["podSelector"]["matchLabels"].items())


def test_the_pods_wait_for_the_policies(dev_config):
    run = _run(dev_config)
    policies = {r.urn for r in run.of_type(POLICY)}
    assert len(policies) == 5  # the tasks', TensorBoard's, staging's, the monitor's, the setup Job's
    for workload in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        # Directly or through the staging Job, which every task Job waits for.
        waits_for, todo = set(), list(workload.dependencies)
        while todo:
            urn = todo.pop()
            if urn not in waits_for:
                waits_for.add(urn)
                todo += run.by_urn(urn).dependencies
        assert policies <= waits_for, workload.name


@pytest.mark.parametrize(
    "source, ports",
    [
        (None, []),
        ("/data/incoming/mnist", []),
        ("https://example.com/mnist.npz", [80, 443]),
        (
            json.dumps(
                [f"http://10.244.0.1:8123/{name}" for name in IDX[:2]]
                + [f"https://example.com:8443/{name}" for name in IDX[2:]]
            ),
            [80, 443, 8123, 8443],
        ),
    ],
)
def test_staging_may_open_only_its_data_sources_ports(dev_config, source, ports):
    config = dev_config if source is None else _set(dev_config, **{"data.source": source})
    spec = _run(config).one(POLICY, "mnist-stage-data").inputs["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {
            "app.kubernetes.io/instance": "mnist",
            "app.kubernetes.io/component": "stage-data",
            "tf-mnist.io/stack": STACK_MARK,
        }
    }
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec.get("ingress", []) == []
    web = [{"ports": [{"protocol": "TCP", "port": p} for p in ports]}] if ports else []
    assert spec["egress"] == [DNS, *web]


@pytest.mark.parametrize(
    "api_server, ports",
    [
        (None, [443, 6443]),
        ("https://10.244.0.1:6443", [443, 6443]),
        ("https://api.example.com:16443", [443, 6443, 16443]),
    ],
)
def test_the_monitor_may_open_only_the_api_servers_ports(dev_config, api_server, ports):
    config = dev_config if api_server is None else _set(dev_config, **{"monitor.apiServer": api_server})
    spec = _run(config).one(POLICY, "mnist-monitor").inputs["spec"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "monitor"
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec.get("ingress", []) == []
    assert spec["egress"] == [DNS, {"ports": [{"protocol": "TCP", "port": p} for p in ports]}]


def test_every_pod_of_the_run_is_selected_by_exactly_one_policy(dev_config):
    run = _run(dev_config)
    selectors = [r.inputs["spec"]["podSelector"] for r in run.of_type(POLICY)]

    def selects(selector: dict, labels: dict) -> bool:
        return selector["matchLabels"].items() <= labels.items() and all(
            e["key"] in labels for e in selector.get("matchExpressions", [])
        )

    for workload in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        labels = workload.inputs["spec"]["template"]["metadata"]["labels"]
        assert sum(selects(s, labels) for s in selectors) == 1, workload.name


def test_disabled_creates_no_policy(dev_config):
    run = _run(_set(dev_config, **{"networkPolicy.enabled": "false"}))
    assert run.of_type(POLICY) == []
    assert run.of_type(JOB), "the run itself is still deployed"


def test_enabled_is_a_boolean(dev_config):
    run = me.run_program(_set(dev_config, **{"networkPolicy.enabled": "sometimes"}))
    assert run.error is not None
    message = str(run.error)
    assert "networkPolicy.enabled" in message and "sometimes" in message, message
