"""The run's NetworkPolicies on the real local cluster, enforced by its NetworkPolicy agent
(tools/go-build/kubernetes-programs/cmd/network-policies: the controller of
sigs.k8s.io/kube-network-policies).

One stack (chief + 1 worker, no ps) in a namespace the test creates. The target is a
``listener`` pod labelled as a task of the run (the tasks' policy selects it like the chief and
the worker) that accepts TCP on the workers' gRPC port until the test deletes it: a target that
lives exactly as long as the test needs, where a training task ends when its run does. Four
probe pods run the trainer image and try a TCP connection to it:
- ``outsider``, in another namespace;
- ``other-run``, in the run's namespace, labelled as a task of a run with another prefix;
- ``other-stack``, labelled as a task of this prefix but of another stack;
- ``same-run``, labelled exactly as the run's own tasks are (the control: it must connect).
Before the stack exists the outsider connects, and so does ``same-run`` to a ``sink`` pod
outside the run (so the test can fail). Then `pulumi up` with the policies on: only
``same-run`` connects, it no longer reaches the sink (egress), and the run, whose chief and
worker exchange every step over gRPC, trains to the end. Turning the policies off then removes
them without replacing the run's Jobs.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.preview.engine import PulumiProject

from .kube import REPO, Kube, job_condition, pod_phase
from .stack import PROJECT_FILES, TINY_RUN, VOLUME_OWNER, engine_home, owner_config, pod_volume

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-netpol"
OUTSIDE = "tf-mnist-netpol-outside"
PREFIX = "mnist"
STACK = "netpol"
MARK = f"organization.tf-mnist.{STACK}"
IMAGE = "registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu"
#: A chief and one worker exchanging every step over gRPC (one epoch of the 10,000-digit
#: sample, about 60 steps), so the run trains only if the policies let its tasks reach each other.
RUN = TINY_RUN | {
    "hyperparams.localSteps": "1",
    "namespace": NAMESPACE,
    "createNamespace": "false",
    "worker.port": "2222",
}
#: The stand-in task: labelled as the run's tasks are (a tf-replica-type of its own).
LISTENER = (
    "listener",
    {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": MARK, "tf-replica-type": "listener"},
)
#: The probes: name -> (namespace, labels).
PROBES = {
    "outsider": (
        OUTSIDE,
        {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": MARK, "tf-replica-type": "probe"},
    ),
    "other-run": (
        NAMESPACE,
        {"app.kubernetes.io/instance": "other", "tf-mnist.io/stack": MARK, "tf-replica-type": "probe"},
    ),
    "other-stack": (
        NAMESPACE,
        {
            "app.kubernetes.io/instance": PREFIX,
            "tf-mnist.io/stack": "organization.tf-mnist.x",
            "tf-replica-type": "probe",
        },
    ),
    "same-run": (
        NAMESPACE,
        {"app.kubernetes.io/instance": PREFIX, "tf-mnist.io/stack": MARK, "tf-replica-type": "probe"},
    ),
}
#: A listener outside the run (another namespace, no task labels) that the run's tasks must not
#: reach once the policies are on: the tasks' egress goes to DNS and the run's own pods only.
SINK, SINK_PORT = "sink", 8080
#: What a probe runs: one TCP connection with a 4 s timeout; prints its outcome, exits 0.
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=4).close(); print('connected')\n"
    "except OSError as e:\n"
    "    print('failed', type(e).__name__, e)\n"
)


#: What the listener runs: accept and close TCP connections on the port argv[1], forever.
LISTEN = (
    "import socket, sys\n"
    "server = socket.create_server(('', int(sys.argv[1])))\n"
    "while True:\n"
    "    server.accept()[0].close()\n"
)


def _probe_pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    command: tuple[str, ...] = ("python", "-c", "import time; time.sleep(3600)"),
) -> dict:
    """A pod running ``command`` (default: sleep) in the trainer image, passing Pod Security
    "restricted"."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "runAsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "probe",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": list(command),
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def cluster(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PulumiProject, Kube]]:
    """The two namespaces and the probe pods, Running; a stack ``netpol`` not yet up."""
    kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)
    toolchain, home = engine_home(tmp_path_factory)
    project = PulumiProject(
        REPO,
        tmp_path_factory.mktemp("netpol"),
        toolchain,
        include=PROJECT_FILES,
        pulumi_home=home,
        venv=REPO / ".venv",
    )
    volume = pod_volume("tf-mnist-netpol-volume-", VOLUME_OWNER)
    try:
        kube.apply(
            *(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                for ns in (NAMESPACE, OUTSIDE)
            )
        )
        name, labels = LISTENER
        kube.apply(_probe_pod(name, NAMESPACE, labels, ("python", "-c", LISTEN, RUN["worker.port"])))
        for name, (ns, labels) in PROBES.items():
            probe = Kube(kube.kubectl_bin, kube.kubeconfig, ns)
            probe.apply(_probe_pod(name, ns, labels))
        Kube(kube.kubectl_bin, kube.kubeconfig, OUTSIDE).apply(
            _probe_pod(
                SINK, OUTSIDE, {"app.kubernetes.io/name": SINK}, ("python", "-c", LISTEN, str(SINK_PORT))
            )
        )
        for name, ns in [
            (LISTENER[0], NAMESPACE),
            (SINK, OUTSIDE),
            *((n, ns) for n, (ns, _) in PROBES.items()),
        ]:
            pods = Kube(kube.kubectl_bin, kube.kubeconfig, ns)
            kube.wait_for(f"pod {name} Running", lambda: pod_phase(pods, name) == "Running", timeout=300)
        project.init_stack(STACK)
        for key, value in {
            **owner_config(),
            **RUN,
            "kubeconfig": str(kube.kubeconfig),
            "hostPath.path": str(volume),
        }.items():
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
        "exec", probe, "--", "python", "-c", CONNECT, address, str(port), timeout=60
    )
    return proc.stdout.strip()


def _listener_ip(kube: Kube) -> str:
    return kube.get("pod", LISTENER[0])["status"]["podIP"]


def _job_uids(kube: Kube) -> dict[str, str]:
    """The uid of each Job of the run but the monitor's: the monitor's environment names the
    ports its NetworkPolicy opens (MONITOR_EGRESS_PORTS), so turning the policies off gives it
    a new Job, which finds the run over and exits; the run itself goes on untouched."""
    return {
        j["metadata"]["name"]: j["metadata"]["uid"]
        for j in kube.get("jobs")["items"]
        if j["metadata"]["labels"].get("app.kubernetes.io/component") != "monitor"
    }


def _policies(kube: Kube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.get("networkpolicies")["items"])


def test_only_the_runs_own_pods_reach_its_grpc_ports(cluster) -> None:
    project, kube = cluster
    port = int(RUN["worker.port"])
    target = _listener_ip(kube)
    # Without policies the outsider connects: the probes can tell an open port from a closed one.
    kube.wait_for(
        "the outsider to connect before any policy exists",
        lambda: _connect(kube, "outsider", target, port) == "connected",
        timeout=180,
        every=2,
    )
    sink = Kube(kube.kubectl_bin, kube.kubeconfig, OUTSIDE).get("pod", SINK)["status"]["podIP"]
    kube.wait_for(
        "a task-labelled pod to reach the sink before any policy exists",
        lambda: _connect(kube, "same-run", sink, SINK_PORT) == "connected",
        timeout=180,
        every=2,
    )

    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _policies(kube) == [
        f"{PREFIX}-monitor",
        f"{PREFIX}-stage-data",
        f"{PREFIX}-tasks",
        f"{PREFIX}-tensorboard",
    ]
    # The agent applies a new policy to running pods within moments: wait for each denial
    # (a denied probe times out after 4 s), then ask each probe once more with all in place.
    for probe in ("outsider", "other-run", "other-stack"):
        kube.wait_for(
            f"{probe} to be denied",
            lambda p=probe: _connect(kube, p, target, port) != "connected",
            timeout=180,
            every=1,
        )
    # The allowed probe too is waited for: each new connection waits for the agent's verdict
    # (NFQUEUE, in user space), which a loaded node can delay past one probe's 4 s. A denial
    # would time out every time, and the wait would fail.
    got = {
        "same-run": kube.wait_for(
            "same-run to connect",
            lambda: "connected" if _connect(kube, "same-run", target, port) == "connected" else None,
            timeout=180,
            every=1,
        )
    }
    got |= {probe: _connect(kube, probe, target, port) for probe in PROBES if probe != "same-run"}
    print(f"probes of {target}:{port} with the policies on: {got}")
    assert got["same-run"] == "connected", got
    for probe in ("outsider", "other-run", "other-stack"):
        assert got[probe].startswith("failed") and "timeout" in got[probe].lower(), got
    # Egress: the same task-labelled pod that reaches the run's own task port cannot reach a pod
    # outside the run.
    egress = kube.wait_for(
        "the task's egress to the sink to be denied",
        lambda: out if (out := _connect(kube, "same-run", sink, SINK_PORT)) != "connected" else None,
        timeout=180,
        every=1,
    )
    print(f"a task to {sink}:{SINK_PORT} outside the run: {egress}")
    assert egress.startswith("failed") and "timeout" in egress.lower(), egress

    jobs = (f"{PREFIX}-chief-0", f"{PREFIX}-worker-0")
    ends = {
        name: kube.wait_for(f"{name} to end", lambda n=name: job_condition(kube, n), timeout=900, every=3)
        for name in jobs
    }
    assert ends == {name: "Complete" for name in jobs}, ends

    uids = _job_uids(kube)
    project.set_config("networkPolicy.enabled", "false")
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _policies(kube) == []
    assert _job_uids(kube) == uids, "turning the policies off must not replace the run's Jobs"
    # The agent drops a deleted policy's rules within moments, not by the time `up` returns.
    kube.wait_for(
        "the outsider to connect once the policies are gone",
        lambda: _connect(kube, "outsider", target, port) == "connected",
        timeout=180,
        every=2,
    )
