"""Smoke test of the real local cluster: node, pods, DNS, PV binding, Jobs, then `down`.

Everything is asserted from what the API server, kubectl and /proc report, not from the
tool's own messages. Tests run in file order; the last one takes the cluster down.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from infra.settings import DEFAULT_REGISTRY, TRAINER_CPU_TAG

from .kube import (RUN_DIR, STATE_DIR, Kube, cluster_unavailable, host_sysctls, job_condition, pod_phase,
                   processes_mentioning, run_tool)

pytestmark = pytest.mark.cluster

TRAINER_IMAGE = f"{DEFAULT_REGISTRY}/{TRAINER_CPU_TAG}"
NAMESPACE = "smoke"


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Kube:
    local_cluster.run("create", "namespace", NAMESPACE)
    return Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE, local_cluster.host_before)


def _pod(name: str, command: list[str], labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": TRAINER_IMAGE, "imagePullPolicy": "Never", "command": command}]},
    }


def test_up_with_a_port_in_use_names_the_part_and_leaves_nothing_running() -> None:
    # Before the module's cluster exists: something else listens on the API server's port.
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 6443))
        squatter.listen()
        up = run_tool("up")
    assert up.returncode == 1, up.stderr
    assert "kube-apiserver needs 127.0.0.1:6443 (secure), in use by" in up.stderr, up.stderr
    assert "local-cluster down" in up.stderr, up.stderr
    assert run_tool("status").returncode == 3
    assert processes_mentioning(str(STATE_DIR), "kube-apiserver --etcd-servers") == []


def test_node_is_ready_with_ack_cpu_node_labels(kube: Kube) -> None:
    nodes = kube.get("nodes")["items"]
    assert len(nodes) == 1
    node = nodes[0]
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True", node["status"]["conditions"]
    labels = node["metadata"]["labels"]
    assert labels["tf-mnist/pool"] == "cpu"
    assert labels["node.kubernetes.io/instance-type"] == "ecs.g6.xlarge"
    assert labels["topology.kubernetes.io/zone"] == "cn-hangzhou-i"
    capacity = node["status"]["capacity"]
    assert int(capacity["cpu"]) >= 1 and capacity["pods"] == "64"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.4"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.6")
    assert not node["spec"].get("taints"), node["spec"].get("taints")


def test_up_again_is_a_no_op(kube: Kube) -> None:
    before = sorted(processes_mentioning("kube-apiserver --etcd-servers"))
    again = run_tool("up")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(kube.kubeconfig)
    assert sorted(processes_mentioning("kube-apiserver --etcd-servers")) == before != []


def test_trainer_image_runs_in_a_pod(kube: Kube) -> None:
    kube.apply(_pod("trainer-help", ["python", "-m", "trainer", "--help"]))
    def finished() -> str:
        phase = pod_phase(kube, "trainer-help")
        return phase if phase in ("Succeeded", "Failed") else ""
    phase = kube.wait_for("pod trainer-help to finish", finished)
    logs = kube.logs("trainer-help")
    assert phase == "Succeeded", logs
    assert "usage:" in logs and "--batch_size" in logs, logs
    pod = kube.get("pod", "trainer-help")
    assert pod["status"]["podIP"].startswith("10.244.0."), pod["status"]


# Each pod serves its name on port 8000 and connects to the other by its headless Service's
# DNS name; it exits 0 once it has reached the peer and been reached by it.
PEER_SCRIPT = r"""
import socket, sys, threading, time
me, peer = sys.argv[1], sys.argv[2]
served = threading.Event()
srv = socket.create_server(("", 8000))
def serve():
    while True:
        conn, _ = srv.accept()
        conn.sendall(me.encode()); conn.close(); served.set()
threading.Thread(target=serve, daemon=True).start()
deadline = time.time() + 150
while time.time() < deadline:
    try:
        ip = socket.gethostbyname(peer)
        with socket.create_connection((peer, 8000), timeout=3) as s:
            print(f"reached {peer} at {ip}: {s.recv(64).decode()}", flush=True)
        break
    except OSError as err:
        time.sleep(0.5)
else:
    sys.exit("never reached " + peer)
sys.exit(0 if served.wait(max(1, deadline - time.time())) else "never reached by the peer")
"""


def test_pods_reach_each_other_by_headless_service_name(kube: Kube) -> None:
    objects = []
    for me, peer in (("dns-a", "dns-b"), ("dns-b", "dns-a")):
        objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": me},
                        "spec": {"clusterIP": "None", "selector": {"app": me},
                                 "ports": [{"port": 8000, "targetPort": 8000}]}})
        objects.append(_pod(me, ["python", "-c", PEER_SCRIPT, me, f"{peer}.{NAMESPACE}.svc"]))
    kube.apply(*objects)
    for name in ("dns-a", "dns-b"):
        kube.wait_for(f"pod {name} to finish", lambda: pod_phase(kube, name) in ("Succeeded", "Failed"))
    ips = {name: kube.get("pod", name)["status"]["podIP"] for name in ("dns-a", "dns-b")}
    assert ips["dns-a"] != ips["dns-b"]
    for me, peer in (("dns-a", "dns-b"), ("dns-b", "dns-a")):
        logs = kube.logs(me)
        assert pod_phase(kube, me) == "Succeeded", logs
        assert f"reached {peer}.{NAMESPACE}.svc at {ips[peer]}: {peer}" in logs, logs


def test_csi_pv_labelled_train_mnist_binds_to_a_selecting_claim(kube: Kube) -> None:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume",
          "metadata": {"name": "smoke-nas", "labels": {"train": "mnist"}},
          "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                   "csi": {"driver": "nasplugin.csi.alibabacloud.com", "volumeHandle": "smoke-nas",
                           "volumeAttributes": {"server": "example.cn-hangzhou.nas.aliyuncs.com", "path": "/data"}}}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "smoke-nas"},
           "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                    "resources": {"requests": {"storage": "5Gi"}},
                    "selector": {"matchLabels": {"train": "mnist"}}}}
    kube.apply(pv, pvc)
    kube.wait_for("the claim to bind", lambda: kube.get("pvc", "smoke-nas")["status"].get("phase") == "Bound",
                  timeout=60)
    assert kube.get("pvc", "smoke-nas")["spec"]["volumeName"] == "smoke-nas"
    assert kube.get("pv", "smoke-nas")["status"]["phase"] == "Bound"
    kube.run("delete", "pvc", "smoke-nas", "--wait=true")
    kube.run("delete", "pv", "smoke-nas", "--wait=true")


def _job(name: str, command: list[str], backoff_limit: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": backoff_limit,
                     "template": {"spec": _pod(name, command)["spec"]}}}


def test_job_runs_to_succeeded(kube: Kube) -> None:
    kube.apply(_job("smoke-ok", ["python", "-c", "print('job ran')"], 0))
    assert kube.wait_for("job smoke-ok", lambda: job_condition(kube, "smoke-ok")) == "Complete"
    assert kube.get("job", "smoke-ok")["status"]["succeeded"] == 1
    assert "job ran" in kube.logs("job/smoke-ok")


def test_failing_job_is_retried_up_to_backoff_limit(kube: Kube) -> None:
    kube.apply(_job("smoke-fail", ["python", "-c", "raise SystemExit(1)"], 2))
    # The Job controller's back-off between retries is 10 s, then 20 s.
    assert kube.wait_for("job smoke-fail to fail", lambda: job_condition(kube, "smoke-fail"), timeout=240) == "Failed"
    status = kube.get("job", "smoke-fail")["status"]
    assert status["failed"] == 3, status
    reasons = [c.get("reason") for c in status["conditions"] if c["type"] == "Failed"]
    assert reasons == ["BackoffLimitExceeded"], status["conditions"]
    pods = kube.get("pods")["items"]
    exit_codes = [p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
                  for p in pods if p["metadata"]["labels"].get("job-name") == "smoke-fail"]
    assert exit_codes == [1, 1, 1], exit_codes


def test_down_leaves_no_process_namespace_bridge_or_mount(kube: Kube) -> None:
    down = run_tool("down")
    assert down.returncode == 0, down.stderr
    assert run_tool("status").returncode == 3
    assert processes_mentioning(str(STATE_DIR), str(RUN_DIR), "kube-apiserver", "kubelet --config",
                                "containerd-shim") == []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "cni-" not in netns, netns
    assert not Path("/sys/class/net/tf-mnist0").exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(STATE_DIR) + "/" not in mounts and str(RUN_DIR) not in mounts
    assert not list(Path("/sys/fs/cgroup").glob("*/kubepods"))
    assert host_sysctls() == kube.host_before, "down did not restore the sysctls up found"
