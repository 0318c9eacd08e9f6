"""The run's NetworkPolicies on the real local cluster, enforced by its NetworkPolicy agent
(tools/local-cluster/go/network-policies: the controller of sigs.k8s.io/kube-network-policies).

One stack (chief + 1 worker, no ps) in a namespace the test creates. Four probe pods run the
trainer image and try a TCP connection to the worker's gRPC port:
- ``outsider``, in another namespace;
- ``other-run``, in the run's namespace, labelled as a task of a run with another prefix;
- ``other-stack``, labelled as a task of this prefix but of another stack;
- ``same-run``, labelled exactly as the run's own tasks are (the control: it must connect).
First the stack is up with ``networkPolicy.enabled false``: the outsider connects (so the test
can fail). Then `pulumi up` with the policies on, while the same run trains: only ``same-run``
connects, and the run still trains to the end.
"""

from __future__ import annotations

import shutil
from typing import Iterator

import pytest

from tests.preview.engine import PulumiProject

from .kube import REPO, Kube, job_condition, pod_phase
from .stack import PROJECT_FILES, engine_home, pod_volume

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-netpol"
OUTSIDE = "tf-mnist-netpol-outside"
PREFIX = "mnist"
STACK = "netpol"
MARK = f"organization.tf-mnist.{STACK}"
IMAGE = "registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu"
#: A chief and one worker training long enough (135 epochs of the 10,000-digit sample at batch
#: 128, exchanging every step) for the probes and a second `pulumi up` to happen while the
#: worker listens: with 15 epochs, or with the default rounds of 50 local steps, a run beside
#: the other tests' load ended during the denied probes' timeouts, and so did one of 45
#: epochs once the step functions' tracing got faster (45 epochs train in about 19 s on 2
#: idle cores, about what the second `pulumi up` and the probes take).
RUN = {"monitor.apiServer": "https://10.244.0.1:6443", "worker.gpuCount": "0", "worker.number": "1",
       "worker.cpu": "100m", "worker.memory": "2Gi", "ps.number": "0", "ps.cpu": "100m", "ps.memory": "2Gi",
       "hyperparams.epochs": "135", "hyperparams.batchsize": "128", "hyperparams.localSteps": "1",
       "namespace": NAMESPACE,
       "createNamespace": "false", "persistence.volume.type": "hostPath", "worker.port": "2222"}
#: The probes: name -> (namespace, labels).
PROBES = {
    "outsider": (OUTSIDE, {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": MARK,
                           "tf-replica-type": "probe"}),
    "other-run": (NAMESPACE, {"app.kubernetes.io/instance": "other", "tf-mnist.io/stack": MARK,
                              "tf-replica-type": "probe"}),
    "other-stack": (NAMESPACE, {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": "organization.tf-mnist.x",
                                "tf-replica-type": "probe"}),
    "same-run": (NAMESPACE, {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": MARK,
                             "tf-replica-type": "probe"}),
}
#: What a probe runs: one TCP connection with a 4 s timeout; prints its outcome, exits 0.
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=4).close(); print('connected')\n"
           "except OSError as e:\n"
           "    print('failed', type(e).__name__, e)\n")


def _probe_pod(name: str, namespace: str, labels: dict[str, str]) -> dict:
    """A pod that sleeps, in the trainer image, passing Pod Security "restricted"."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "probe", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["python", "-c", "import time; time.sleep(3600)"],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


@pytest.fixture(scope="module")
def cluster(local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[PulumiProject, Kube]]:
    """The two namespaces and the probe pods, Running; a stack ``netpol`` not yet up."""
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)
    toolchain, home = engine_home(tmp_path_factory)
    project = PulumiProject(REPO, tmp_path_factory.mktemp("netpol"), toolchain, include=PROJECT_FILES,
                            pulumi_home=home, venv=REPO / ".venv")
    volume = pod_volume("tf-mnist-netpol-volume-")
    try:
        kube.apply(*({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (NAMESPACE, OUTSIDE)))
        for name, (ns, labels) in PROBES.items():
            probe = Kube(kube.kubectl_bin, kube.kubeconfig, ns)
            probe.apply(_probe_pod(name, ns, labels))
            kube.wait_for(f"probe {name} Running", lambda: pod_phase(probe, name) == "Running", timeout=120)
        project.init_stack(STACK)
        for key, value in {**RUN, "kubeconfig": str(kube.kubeconfig), "hostPath.path": str(volume)}.items():
            project.set_config(key, value, path=True)
        yield project, kube
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False, timeout=600)
        for ns in (NAMESPACE, OUTSIDE):
            kube.run("delete", "namespace", ns, "--wait=true", check=False, timeout=300)
        shutil.rmtree(volume, ignore_errors=True)


def _connect(kube: Kube, probe: str, address: str, port: int) -> str:
    """What ``probe`` got trying TCP to address:port: 'connected' or 'failed <error>'."""
    namespace = PROBES[probe][0]
    proc = Kube(kube.kubectl_bin, kube.kubeconfig, namespace).run(
        "exec", probe, "--", "python", "-c", CONNECT, address, str(port), timeout=60)
    return proc.stdout.strip()


def _worker_listening(kube: Kube) -> str:
    """The worker pod's IP once it is Running and the trainer has logged its first lines."""
    pods = kube.get("pods", "")["items"]
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        if labels.get("tf-replica-type") == "worker" and pod["status"].get("phase") == "Running":
            return pod["status"].get("podIP", "")
    return ""


def _job_uids(kube: Kube) -> dict[str, str]:
    return {j["metadata"]["name"]: j["metadata"]["uid"] for j in kube.get("jobs")["items"]}


def _policies(kube: Kube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.get("networkpolicies")["items"])


def test_only_the_runs_own_pods_reach_its_grpc_ports(cluster) -> None:
    project, kube = cluster
    port = int(RUN["worker.port"])
    project.set_config("networkPolicy.enabled", "false")
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _policies(kube) == []
    uids = _job_uids(kube)
    worker_ip = kube.wait_for("the worker pod Running", lambda: _worker_listening(kube), timeout=300)
    # The worker's server listens once its process has started: wait until a probe connects.
    kube.wait_for("the outsider to connect with the policies off",
                  lambda: _connect(kube, "outsider", worker_ip, port) == "connected", timeout=180, every=2)

    project.set_config("networkPolicy.enabled", "true")
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _policies(kube) == [f"{PREFIX}-tasks", f"{PREFIX}-tensorboard"]
    assert _worker_listening(kube) == worker_ip, "the run must still be the one the probes saw"
    assert _job_uids(kube) == uids, "turning the policies on must not replace the run's Jobs"
    # The control first, while the worker surely listens; the denied probes then each take
    # their 4 s timeout, so the worker must still be the same afterwards for them to count.
    order = ["same-run"] + [probe for probe in PROBES if probe != "same-run"]
    got = {probe: _connect(kube, probe, worker_ip, port) for probe in order}
    print(f"probes of {worker_ip}:{port} with the policies on: {got}")
    assert _worker_listening(kube) == worker_ip, f"the worker ended during the probes: {got}"
    assert got["same-run"] == "connected", got
    for probe in ("outsider", "other-run", "other-stack"):
        assert got[probe].startswith("failed") and "timeout" in got[probe].lower(), got

    ends = {name: kube.wait_for(f"{name} to end", lambda n=name: job_condition(kube, n), timeout=900, every=3)
            for name in (f"{PREFIX}-chief-0", f"{PREFIX}-worker-0")}
    assert ends == {f"{PREFIX}-chief-0": "Complete", f"{PREFIX}-worker-0": "Complete"}, ends
