"""The run's NetworkPolicies under the mock engine: what each admits and lets its pods open, that
every pod of the run is selected by one, that the pods wait for them, and networkPolicy.enabled
false creating none. Enforcement is tested on the real local
cluster (tests/cluster/test_network_policy.py)."""

from __future__ import annotations

import json

import mock_engine as me
import pytest

from infra.cluster_objects import Refused, Unreachable

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
#: An existing cluster (kubeconfig mode), where the program reads the API server's endpoints.
EXISTING = {
    "kubeconfig": me.secret(me.kubeconfig_content()),
    "nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
}


def _set(config: dict, **overrides: str) -> dict:
    return {**config, **{f"tf-mnist:{k}": v for k, v in overrides.items()}}


def _run(config: dict, cluster: me.FakeCluster | None = None) -> me.Run:
    run = me.run_program(config, cluster=cluster)
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


def _monitor_egress(run: me.Run) -> list[dict]:
    """The monitor policy's egress rules after DNS, its spec's other fields asserted."""
    spec = run.one(POLICY, "mnist-monitor").inputs["spec"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "monitor"
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec.get("ingress", []) == []
    assert spec["egress"][0] == DNS
    return spec["egress"][1:]


def _tcp(*ports: int) -> list[dict]:
    return [{"ports": [{"protocol": "TCP", "port": p} for p in ports]}]


@pytest.mark.parametrize(
    "keys, endpoint_ports, ports",
    [
        # A cluster the stack creates (ACK): its API server's 6443; nothing to read before up.
        ({}, None, (6443,)),
        # monitor.apiServer: its URL's port, or https's; the cluster is not asked.
        ({"monitor.apiServer": "https://10.244.0.1:6443"}, None, (6443,)),
        ({"monitor.apiServer": "https://api.example.com"}, None, (443,)),
        ({**EXISTING, "monitor.apiServer": "https://api.example.com:16443"}, (6443,), (16443,)),
        # An existing cluster: its kubernetes Service's endpoints, read from it.
        (EXISTING, (16443,), (16443,)),
        (EXISTING, (443, 6443), (443, 6443)),
        # monitor.apiServerPort: that port, whatever else is set.
        ({"monitor.apiServerPort": "8443"}, None, (8443,)),
        ({**EXISTING, "monitor.apiServerPort": "8443"}, (6443,), (8443,)),
        ({"monitor.apiServer": "https://api.example.com", "monitor.apiServerPort": "6443"}, None, (6443,)),
    ],
    ids=[
        "created-cluster",
        "api-server-url-port",
        "api-server-url-https",
        "api-server-url-over-endpoints",
        "endpoints",
        "endpoints-two-ports",
        "port-key",
        "port-key-over-endpoints",
        "port-key-over-url",
    ],
)
def test_the_monitor_may_open_only_the_port_the_api_server_is_reached_on(
    dev_config, caplog, keys, endpoint_ports, ports
):
    cluster = me.FakeCluster(api_ports=endpoint_ports or ())
    run = _run(_set(dev_config, **keys), cluster)
    assert _monitor_egress(run) == _tcp(*ports)
    read = "kubeconfig" in keys and "monitor.apiServer" not in keys and "monitor.apiServerPort" not in keys
    assert cluster.port_reads == (1 if read else 0)
    assert "monitor.apiServerPort" not in caplog.text


@pytest.mark.parametrize(
    "found, why",
    [
        ((), "the kubernetes Service has no endpoints"),
        (Unreachable("the API server did not answer (ConnectionRefusedError)"), "could not be read (the API"),
        (Refused(403, "Forbidden"), "could not be read (HTTP 403 Forbidden)"),
    ],
    ids=["no-endpoints", "unreachable", "refused"],
)
def test_unread_endpoints_open_the_usual_ports_and_warn_with_the_key(dev_config, caplog, found, why):
    run = _run(_set(dev_config, **EXISTING), me.FakeCluster(api_ports=found))
    assert _monitor_egress(run) == _tcp(443, 6443)
    (warning,) = [r.getMessage() for r in caplog.records if "run monitor's NetworkPolicy" in r.getMessage()]
    assert why in warning, warning
    assert "pulumi config set monitor.apiServerPort <port>" in warning, warning


def test_the_ports_are_not_read_without_policies(dev_config):
    cluster = me.FakeCluster(api_ports=Unreachable("never asked"))
    run = _run(_set(dev_config, **EXISTING, **{"networkPolicy.enabled": "false"}), cluster)
    assert run.of_type(POLICY) == [] and cluster.port_reads == 0


def test_a_bad_api_server_port_is_refused_with_the_fix(dev_config):
    run = me.run_program(_set(dev_config, **{"monitor.apiServerPort": "70000"}))
    assert str(run.error) == "\n".join(
        [
            "1 invalid configuration value; nothing was deployed:",
            "Configuration 'tf-mnist:monitor.apiServerPort' value '70000' is invalid: must be an integer "
            "between 1 and 65535.",
            "    fix: pulumi config set monitor.apiServerPort 6443",
        ]
    )


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
