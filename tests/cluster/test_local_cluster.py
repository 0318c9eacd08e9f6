"""Smoke test of the real local cluster: node, pods, DNS, PV binding, Jobs, its safety (private
keys, etcd and the API server closed to clients without credentials, foreign directories and
cgroups left alone), then `down`.

Everything is asserted from what the API server, kubectl, the sockets and /proc report, not
from the tool's own messages. Tests run in file order; the last one takes the cluster down.
"""

from __future__ import annotations

import os
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .host_probes import (
    agent_rules_present,
    file_mode,
    foreign_kubepods,
    http_get,
    nfqueue_readers,
    tls_context,
)
from .kube import (
    RUN_DIR,
    STATE_DIR,
    Kube,
    cluster_unavailable,
    host_netns,
    host_sysctls,
    job_condition,
    pod_phase,
    processes_mentioning,
    run_tool,
)
from .probe_pods import (
    PEER_SCRIPT,
    knock_outcomes,
    serve,
    start_knocking,
    trainer_job,
    trainer_pod,
)
from .session_cluster import SessionCluster

pytestmark = pytest.mark.cluster

NAMESPACE = "smoke"


@pytest.fixture(scope="module", autouse=True)
def no_cluster_at_the_start(session_cluster: SessionCluster) -> None:
    """These tests bring the cluster up and down themselves: an earlier module's goes down first."""
    session_cluster.down()


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Kube:
    local_cluster.run("create", "namespace", NAMESPACE)
    return Kube(
        local_cluster.kubectl_bin,
        local_cluster.kubeconfig,
        NAMESPACE,
        local_cluster.host_before,
        local_cluster.netns_before,
    )


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


@pytest.mark.parametrize("variable", ["LOCAL_CLUSTER_STATE", "LOCAL_CLUSTER_RUN"])
def test_a_foreign_directory_is_refused_and_left_untouched(tmp_path: Path, variable: str) -> None:
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    foreign = tmp_path / "somebody-elses"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    env = {variable: str(foreign)}
    if variable == "LOCAL_CLUSTER_STATE":
        env["LOCAL_CLUSTER_RUN"] = str(tmp_path / "run")
    for command in ("down", "up", "status"):
        proc = run_tool(command, env=env, timeout=60)
        assert proc.returncode == 2, (command, proc.stderr)
        assert f"{variable}={foreign} is refused" in proc.stderr, proc.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["precious.txt"]
    assert (foreign / "precious.txt").read_text() == "keep me"
    assert not (tmp_path / "run").exists()


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
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.13"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.6")
    assert not node["spec"].get("taints"), node["spec"].get("taints")


def test_up_again_is_a_no_op(kube: Kube) -> None:
    before = sorted(processes_mentioning("kube-apiserver --etcd-servers"))
    again = run_tool("up")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(kube.kubeconfig)
    assert sorted(processes_mentioning("kube-apiserver --etcd-servers")) == before != []


def test_trainer_image_runs_in_a_pod(kube: Kube) -> None:
    kube.apply(trainer_pod("trainer-help", ["python", "-m", "trainer", "--help"]))

    def finished() -> str:
        phase = pod_phase(kube, "trainer-help")
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = kube.wait_for("pod trainer-help to finish", finished)
    logs = kube.logs("trainer-help")
    assert phase == "Succeeded", logs
    assert "usage:" in logs and "--batch_size" in logs, logs
    pod = kube.get("pod", "trainer-help")
    assert pod["status"]["podIP"].startswith("10.244.0."), pod["status"]


def test_pods_reach_each_other_by_headless_service_name(kube: Kube) -> None:
    objects = []
    for me, peer in (("dns-a", "dns-b"), ("dns-b", "dns-a")):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": me},
                "spec": {
                    "clusterIP": "None",
                    "selector": {"app": me},
                    "ports": [{"port": 8000, "targetPort": 8000}],
                },
            }
        )
        objects.append(trainer_pod(me, ["python", "-c", PEER_SCRIPT, me, f"{peer}.{NAMESPACE}.svc"]))
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
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "smoke-nas", "labels": {"train": "mnist"}},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {
                "driver": "nasplugin.csi.alibabacloud.com",
                "volumeHandle": "smoke-nas",
                "volumeAttributes": {"server": "example.cn-hangzhou.nas.aliyuncs.com", "path": "/data"},
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "smoke-nas"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "5Gi"}},
            "selector": {"matchLabels": {"train": "mnist"}},
        },
    }
    kube.apply(pv, pvc)
    kube.wait_for(
        "the claim to bind",
        lambda: kube.get("pvc", "smoke-nas")["status"].get("phase") == "Bound",
        timeout=180,
    )
    assert kube.get("pvc", "smoke-nas")["spec"]["volumeName"] == "smoke-nas"
    assert kube.get("pv", "smoke-nas")["status"]["phase"] == "Bound"
    kube.run("delete", "pvc", "smoke-nas", "--wait=true")
    kube.run("delete", "pv", "smoke-nas", "--wait=true")


def test_job_runs_to_succeeded(kube: Kube) -> None:
    kube.apply(trainer_job("smoke-ok", ["python", "-c", "print('job ran')"], 0))
    assert kube.wait_for("job smoke-ok", lambda: job_condition(kube, "smoke-ok")) == "Complete"
    assert kube.get("job", "smoke-ok")["status"]["succeeded"] == 1
    assert "job ran" in kube.logs("job/smoke-ok")


def test_failing_job_is_retried_up_to_backoff_limit(kube: Kube) -> None:
    kube.apply(trainer_job("smoke-fail", ["python", "-c", "raise SystemExit(1)"], 2))
    # The Job controller's back-off between retries is 10 s, then 20 s.
    assert (
        kube.wait_for("job smoke-fail to fail", lambda: job_condition(kube, "smoke-fail"), timeout=240)
        == "Failed"
    )
    status = kube.get("job", "smoke-fail")["status"]
    assert status["failed"] == 3, status
    reasons = [c.get("reason") for c in status["conditions"] if c["type"] == "Failed"]
    assert reasons == ["BackoffLimitExceeded"], status["conditions"]
    pods = kube.get("pods")["items"]
    exit_codes = [
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        for p in pods
        if p["metadata"]["labels"].get("job-name") == "smoke-fail"
    ]
    assert exit_codes == [1, 1, 1], exit_codes


# ---------------------------------------------------------------- safety
def test_no_key_or_kubeconfig_is_readable_by_others(kube: Kube) -> None:
    assert file_mode(STATE_DIR) == 0o700 and file_mode(RUN_DIR) == 0o700
    assert file_mode(kube.kubeconfig) == 0o600
    secrets: list[Path] = []
    for top, dirnames, files in os.walk(STATE_DIR):
        if Path(top) == STATE_DIR:  # not the image store: layers, no credentials
            dirnames[:] = [d for d in dirnames if d != "containerd"]
        for name in files:
            if name.endswith((".key", ".pem")) or "kubeconfig" in name or Path(top) == STATE_DIR / "pki":
                secrets.append(Path(top) / name)
    names = {str(p.relative_to(STATE_DIR)) for p in secrets}
    assert {
        "kubeconfig",
        "pki/ca.key",
        "pki/sa.key",
        "pki/etcd-ca.key",
        "pki/apiserver-etcd-client.key",
        "etc/kubelet.kubeconfig",
        "etc/coredns.kubeconfig",
        "kubelet/pki/kubelet.key",
    } <= names, names
    wide = {str(p): oct(file_mode(p)) for p in secrets if file_mode(p) & 0o077}
    assert wide == {}, "readable by group or others"
    # Every directory between the state directory and a secret is closed to others too.
    open_dirs = {
        str(d): oct(file_mode(d))
        for p in secrets
        for d in p.parents
        if (d == STATE_DIR or STATE_DIR in d.parents) and file_mode(d) & 0o077
    }
    assert open_dirs == {}


def test_etcd_refuses_a_client_without_a_certificate(kube: Kube) -> None:
    pki = STATE_DIR / "pki"
    ca = pki / "etcd-ca.crt"
    client = (pki / "etcd-healthcheck-client.crt", pki / "etcd-healthcheck-client.key")
    status, body = http_get("127.0.0.1", 2379, "/health", tls_context(ca, client))
    assert (status, '"health":"true"' in body) == (200, True), body
    for port in (2379, 2380):  # clients and peers
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            http_get("127.0.0.1", port, "/health", tls_context(ca))
    # A certificate from the cluster CA (the admin's) is not one etcd trusts either.
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        http_get("127.0.0.1", 2379, "/health", tls_context(ca, (pki / "admin.crt", pki / "admin.key")))
    try:  # plain HTTP: etcd closes the connection without an answer
        status, body = http_get("127.0.0.1", 2379, "/health", None)
    except ConnectionError:
        status, body = 0, ""
    assert status != 200 and "health" not in body, (status, body)


def test_anonymous_requests_to_the_api_server_get_401(kube: Kube) -> None:
    pki = STATE_DIR / "pki"
    for path in ("/readyz", "/livez", "/version", "/api/v1/namespaces"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(
                f"https://127.0.0.1:6443{path}", context=tls_context(pki / "ca.crt"), timeout=10
            )
        assert err.value.code == 401, path
    admin = tls_context(pki / "ca.crt", (pki / "admin.crt", pki / "admin.key"))
    with urllib.request.urlopen("https://127.0.0.1:6443/readyz", timeout=10, context=admin) as resp:
        assert (resp.status, resp.read()) == (200, b"ok")


def test_every_component_authenticates_without_anonymous_access(kube: Kube) -> None:
    # The kubelet (node Ready), scheduler (pods placed), controller-manager (Jobs done) and
    # CoreDNS (names resolved) showed they work in the tests above; none logged a rejection.
    for name in ("kubelet", "kube-controller-manager", "kube-scheduler", "coredns", "network-policies"):
        log = (STATE_DIR / "logs" / f"{name}.log").read_text(errors="replace")
        rejected = [line for line in log.splitlines() if "Unauthorized" in line or " 401 " in line]
        assert rejected == [], f"{name}: {rejected[:3]}"
    status = run_tool("status")
    assert status.returncode == 0, status.stdout + status.stderr
    # etcd, kube-apiserver, its relay onto the bridge, kube-controller-manager, kube-scheduler,
    # containerd, CoreDNS, the NetworkPolicy agent, the kubelet
    # (tools/local-cluster/localcluster/components.py ALL)
    assert status.stdout.count("healthy") == 9 and "UNHEALTHY" not in status.stdout, status.stdout


def test_the_network_policy_agent_guards_the_bridge(kube: Kube) -> None:
    # Its forward rule is in and NFQUEUE 100 has one reader; the pods above (DNS names,
    # headless Services, Jobs) connected through it, no NetworkPolicy selecting them.
    assert agent_rules_present(kube)
    assert len(nfqueue_readers(100)) == 1, nfqueue_readers(100)
    assert Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"


def test_the_agent_outlives_packets_to_an_address_no_pod_has(kube: Kube) -> None:
    # The controller looks up the pod of both ends of each new connection, and some addresses
    # are no pod's in its informer: a new pod's before the kubelet reports it, and a pod's
    # deleted at once (grace period 0), which leaves the API while its sandbox still answers
    # for a moment. The agent must judge those connections and keep reading its queue, or
    # every forwarded packet is dropped from then on (upstream v0.8.0 with NRI off panicked).
    # A reader's line: queue number, the reader's netlink port id, then counters.
    readers = [line.split()[:2] for line in nfqueue_readers(100)]
    assert len(readers) == 1, readers
    # The knocker runs until the server is gone and 40 s more: not for a fixed 40 s from its
    # start, which the wait and the deletion below could outlast on a loaded machine.
    start_knocking(kube, "knocker", serve(kube, "short-lived"), 40, "after-gone")
    kube.wait_for(
        "the knocker's first connection",
        lambda: "connected" in kube.run("logs", "knocker", check=False).stdout,
        timeout=120,
    )
    kube.run("delete", "pod", "short-lived", "--grace-period=0", "--force", "--wait=true")
    outcomes = knock_outcomes(kube, "knocker", 40)
    assert outcomes[0] == "connected" and len(outcomes) >= 2 and outcomes[-1] != "connected", outcomes
    assert [line.split()[:2] for line in nfqueue_readers(100)] == readers, (
        "the NetworkPolicy agent stopped reading its queue:\n"
        + (STATE_DIR / "logs" / "network-policies.log").read_text()[-3000:]
    )
    # And it still passes pod-to-pod traffic.
    start_knocking(kube, "second-knocker", serve(kube, "second-server"), 180, "until-connected")
    assert knock_outcomes(kube, "second-knocker", 180)[-1] == "connected"
    kube.run("delete", "pod", "knocker", "second-server", "second-knocker", "--grace-period=0", "--force")


def test_down_of_directories_that_do_not_exist_leaves_the_running_cluster_alone(
    kube: Kube, tmp_path: Path
) -> None:
    """The cgroup root, the bridge and its nftables table have fixed names: a `down` for state
    and run directories that do not exist (no cluster of theirs runs) must not take them from
    the cluster that does."""
    kube.apply(trainer_pod("survivor", ["sleep", "3600"]))
    kube.wait_for("pod survivor to run", lambda: pod_phase(kube, "survivor") == "Running")
    absent = {
        "LOCAL_CLUSTER_STATE": str(tmp_path / "absent-state"),
        "LOCAL_CLUSTER_RUN": str(tmp_path / "absent-run"),
    }
    down = run_tool("down", env=absent, timeout=120)
    assert down.returncode == 0, down.stderr
    assert (
        f"down: nothing was running ({tmp_path / 'absent-state'} and {tmp_path / 'absent-run'} do not exist)"
        in down.stderr
    ), down.stderr
    assert "removed" not in down.stderr, down.stderr
    assert not (tmp_path / "absent-state").exists() and not (tmp_path / "absent-run").exists()
    assert Path("/sys/class/net/tf-mnist0").exists(), "the running cluster's bridge was deleted"
    assert run_tool("status").returncode == 0, "the running cluster is no longer healthy"
    assert kube.run("exec", "survivor", "--", "true", check=False).returncode == 0, (
        "its pod's process was killed"
    )
    kube.run("delete", "pod", "survivor", "--wait=false")


def test_down_leaves_no_process_namespace_bridge_or_mount(kube: Kube) -> None:
    with foreign_kubepods() as (foreign, sleeper):
        down = run_tool("down")
        assert down.returncode == 0, down.stderr
        # Another kubelet's pods are not ours: their cgroups and processes are left alone.
        assert all(d.is_dir() for d in foreign), foreign
        assert sleeper.poll() is None, "down killed a process in another kubelet's pod cgroup"
    assert run_tool("status").returncode == 3
    assert (
        processes_mentioning(
            str(STATE_DIR), str(RUN_DIR), "kube-apiserver", "kubelet --config", "containerd-shim"
        )
        == []
    )
    assert host_netns() == kube.netns_before
    assert not Path("/sys/class/net/tf-mnist0").exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(STATE_DIR) + "/" not in mounts and str(RUN_DIR) not in mounts
    assert not list(Path("/sys/fs/cgroup").glob("*/tf-mnist-local-cluster"))
    assert host_sysctls() == kube.host_before, "down did not restore the sysctls up found"
    assert nfqueue_readers(100) == [] and not agent_rules_present(kube), "the NetworkPolicy agent's rule"
