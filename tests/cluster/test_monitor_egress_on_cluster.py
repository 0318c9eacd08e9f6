"""The run monitor's way to the API server on the real local cluster (infra/monitor_egress.py):
an API server on a port that is neither 443 nor 6443, and the in-cluster path.

The local cluster has no kube-proxy: pods reach the API server only through tools/local-cluster's
relay on the bridge (https://10.244.0.1:6443), and that relay listens on one port. So the test
starts a second relay of its own (socat, as the tool's: TLS passes through it, and the API
server's certificate names the bridge address), on RELAY_PORT of the bridge address, stopped by
its pid at the end. One stack (the smallest run) in a namespace of its own:

* with ``monitor.apiServer https://10.244.0.1:16443`` the monitor's NetworkPolicy opens 16443
  alone, and the monitor reaches the server there (its log) and watches the run to its end;
* without it (the in-cluster path), the program reads the port of the kubernetes Service's
  endpoints from the cluster and opens that one. This cluster's API server publishes no
  endpoints (its reconciler is off), so the test publishes what one on RELAY_PORT would (an
  EndpointSlice of the kubernetes Service, removed at the end). The pod's in-cluster address,
  the Service's 10.96.0.1:443, is not routed here (no kube-proxy), which is what a port the
  policy drops looks like to the monitor: its Job fails, its pod's status and ``infra.status``
  naming that address and port, instead of the run going on unwatched.

The cluster's NetworkPolicy agent never sees traffic between a pod and the node (the relays, the
DNS), so it cannot show the policy dropping a port here: that the policy names the right port
is asserted on the live object.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.preview.engine import PulumiProject

from .kube import Kube, job_condition, job_pods
from .stack import TINY_RUN, run_status, stack_on_cluster

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-monitor-egress"
PREFIX = "mnist"
MONITOR = f"{PREFIX}-monitor"
#: The bridge address (tools/local-cluster/localcluster/layout.py BRIDGE_IP), where the tool's
#: relay listens on 6443 and this test's on RELAY_PORT; the API server's own loopback port.
BRIDGE_IP, RELAY_PORT, API_SERVER = "10.244.0.1", 16443, "127.0.0.1:6443"
#: A pod's in-cluster address of the API server: the kubernetes Service (layout.KUBERNETES_SERVICE_IP).
IN_CLUSTER = "https://10.96.0.1:443"
#: The EndpointSlice this test publishes for the kubernetes Service.
SLICE = "tf-mnist-test-kubernetes"


def _listening() -> bool:
    try:
        with socket.create_connection((BRIDGE_IP, RELAY_PORT), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def relay(local_cluster: Kube) -> Iterator[int]:
    """socat on BRIDGE_IP:RELAY_PORT (the cluster's bridge must exist) to the API server; its
    process group is ended on exit."""
    proc = subprocess.Popen(
        ["socat", f"TCP-LISTEN:{RELAY_PORT},bind={BRIDGE_IP},reuseaddr,fork", f"TCP:{API_SERVER}"],
        start_new_session=True,  # its forked children share its group: one signal ends them all
    )
    try:
        local_cluster.wait_for(f"socat on {BRIDGE_IP}:{RELAY_PORT}", _listening, timeout=10)
        yield RELAY_PORT
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory, relay: int
) -> Iterator[PulumiProject]:
    config = TINY_RUN | {
        "namespace": NAMESPACE,
        "createNamespace": "true",
        "monitor.apiServer": f"https://{BRIDGE_IP}:{relay}",
    }
    with stack_on_cluster(local_cluster, tmp_path_factory, "dev", config) as (project, _):
        yield project


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Kube:
    return Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)


def _monitor_ports(kube: Kube) -> list[dict]:
    """The monitor policy's egress after its DNS rule, as the cluster holds it."""
    egress = kube.get("networkpolicy", MONITOR)["spec"]["egress"]
    assert egress[0]["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], egress
    return egress[1:]


def test_the_monitor_reaches_an_api_server_on_a_port_of_its_own(stack: PulumiProject, kube: Kube) -> None:
    stack.pulumi("up", "--yes", "--skip-preview", timeout=900)
    assert _monitor_ports(kube) == [{"ports": [{"port": RELAY_PORT, "protocol": "TCP"}]}]
    ended = kube.wait_for(
        "the monitor Job to end", lambda: job_condition(kube, MONITOR), timeout=900, every=3
    )
    log = kube.logs(f"job/{MONITOR}")
    assert ended == "Complete", log
    assert f"reached the API server at https://{BRIDGE_IP}:{RELAY_PORT}\n" in log, log
    assert log.rstrip().endswith(f"the chief's Job {PREFIX}-chief-0 completed"), log


@pytest.fixture
def published_endpoints(local_cluster: Kube) -> Iterator[list[int]]:
    """The kubernetes Service's endpoint ports: the cluster's own if it publishes any, else
    RELAY_PORT, published here for the test's length."""
    default = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, "default")
    listed = default.run("get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes", "-o", "json")
    slices = [s for s in json.loads(listed.stdout)["items"] if s.get("endpoints")]
    if slices:
        yield sorted({p["port"] for s in slices for p in s.get("ports") or []})
        return
    default.apply(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": SLICE,
                "namespace": "default",
                "labels": {
                    "kubernetes.io/service-name": "kubernetes",
                    "endpointslice.kubernetes.io/managed-by": "tf-mnist-tests",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [BRIDGE_IP]}],
            "ports": [{"name": "https", "port": RELAY_PORT, "protocol": "TCP"}],
        }
    )
    try:
        yield [RELAY_PORT]
    finally:
        default.run("delete", "endpointslice", SLICE, "--ignore-not-found")


def test_in_cluster_the_policy_opens_the_endpoints_port_and_an_unreached_monitor_fails_loudly(
    stack: PulumiProject, kube: Kube, published_endpoints: list[int]
) -> None:
    stack.pulumi("config", "rm", "--path", "monitor.apiServer")
    stack.pulumi("up", "--yes", "--skip-preview", timeout=900)  # a new monitor Job (its environment changed)
    assert _monitor_ports(kube) == [{"ports": [{"port": p, "protocol": "TCP"} for p in published_endpoints]}]
    # Six polls that no answer reaches, in each of its three pods (backoffLimit 2).
    ended = kube.wait_for(
        "the monitor Job to end", lambda: job_condition(kube, MONITOR), timeout=600, every=3
    )
    pods = sorted(job_pods(kube, MONITOR), key=lambda p: p["metadata"]["creationTimestamp"])
    terminated = pods[-1]["status"]["containerStatuses"][0]["state"]["terminated"]
    gave_up = f"run monitor: cannot reach the API server at {IN_CLUSTER} (TCP port 443): 6 tries in"
    assert ended == "Failed" and terminated["exitCode"] == 3, terminated
    # The monitor writes its last word as the termination message (run_monitor.give_up).
    last = terminated["message"].strip()
    opened = " and ".join(map(str, published_endpoints))
    assert last.startswith(gave_up) and f"NetworkPolicy {MONITOR} opens TCP {opened} to it" in last, last
    shown = run_status(kube, PREFIX).stdout
    assert f"exited 3 (Error): {gave_up}" in shown and "Monitor:     Failed" in shown, shown
