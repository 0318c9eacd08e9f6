"""Where the local cluster keeps its files, and the addresses and names it uses.

Every path and port lives here so that `up`, `down` and `status` agree on them.
Environment overrides (for tests and for a second checkout on the same machine):
  LOCAL_CLUSTER_STATE  state directory (default /var/lib/tf-mnist-local-cluster)
  LOCAL_CLUSTER_RUN    runtime directory for sockets (default /run/tf-mnist-local-cluster)
  LOCAL_CLUSTER_CACHE  build cache (default ~/.cache/tf-mnist-local-cluster; see build.sh)
  LOCAL_CLUSTER_CGROUP_PARENT  an existing cgroup (in every hierarchy) to nest the cluster's
                       cgroup root in, so that a CPU quota on it covers the pods too
                       (tools/slow-machine sets it); default the hierarchies' roots
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TOOL_DIR = Path(__file__).resolve().parent.parent

#: The Kubernetes release the binaries are built at (tools/local-cluster/build.sh): 1.33, the line
#: of the kubernetes provider's client libraries (one Go module builds both) and of ACK's
#: clusters; its kubelet starts on cgroup v1 (1.35 refuses v1 by default) and its CRI client
#: works with Debian bookworm's containerd 1.6.
KUBERNETES_VERSION = "v1.33.13"

NODE_NAME = "tf-mnist-node-0"
#: Labels of an ACK worker node in the stack's CPU node pool (infra/components/node_pools.py
#: labels the pool tf-mnist/pool=cpu; ACK adds the instance type, region, zone and pool id).
NODE_LABELS = {
    "tf-mnist/pool": "cpu",
    "node.kubernetes.io/instance-type": "ecs.g6.xlarge",
    "beta.kubernetes.io/instance-type": "ecs.g6.xlarge",
    "topology.kubernetes.io/region": "cn-hangzhou",
    "topology.kubernetes.io/zone": "cn-hangzhou-i",
    "alibabacloud.com/nodepool-id": "local-cpu",
}
#: ACK's Flannel default of 64 pods per node (a /26 per node out of the pod CIDR).
MAX_PODS = 64

#: The tool's own bridge. Pods get addresses from POD_SUBNET; the host side of the bridge
#: (BRIDGE_IP) is the node's InternalIP, the kubelet's serving address and the cluster DNS.
#: Pods get no default route and the host does not forward for them: their traffic never
#: leaves this machine.
BRIDGE = "tf-mnist0"
POD_SUBNET = "10.244.0.0/24"
BRIDGE_IP = "10.244.0.1"
BRIDGE_PREFIX = 24
#: The NFQUEUE number through which the NetworkPolicy agent decides new pod connections.
NFQUEUE_ID = 100
#: The API server as pods reach it (the relay on the bridge; its certificate names BRIDGE_IP):
#: with no kube-proxy the kubernetes Service's address is not routed.
POD_APISERVER_URL = f"https://{BRIDGE_IP}:6443"
SERVICE_SUBNET = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
#: The kubelet's cgroup root: every pod cgroup is <hierarchy>[<parent>]/tf-mnist-local-cluster/kubepods/...
#: in each cgroup hierarchy under /sys/fs/cgroup, and `down` removes only that subtree.
CGROUP_ROOT = os.environ.get("LOCAL_CLUSTER_CGROUP_PARENT", "").rstrip("/") + "/tf-mnist-local-cluster"
CGROUP_FS = Path("/sys/fs/cgroup")
CNI_NETWORK = "tf-mnist"


@dataclass(frozen=True)
class Endpoint:
    """One listening socket of one component: (host, port) and what the port is for."""

    component: str
    host: str
    port: int
    purpose: str


ENDPOINTS = (
    Endpoint("etcd", "127.0.0.1", 2379, "client"),
    Endpoint("etcd", "127.0.0.1", 2380, "peer"),
    Endpoint("kube-apiserver", "127.0.0.1", 6443, "secure"),
    Endpoint("apiserver-relay", BRIDGE_IP, 6443, "pods"),
    Endpoint("kube-controller-manager", "127.0.0.1", 10257, "secure"),
    Endpoint("kube-scheduler", "127.0.0.1", 10259, "secure"),
    Endpoint("kubelet", BRIDGE_IP, 10250, "server"),
    Endpoint("kubelet", "127.0.0.1", 10248, "healthz"),
    Endpoint("coredns", BRIDGE_IP, 53, "dns"),
    Endpoint("coredns", "127.0.0.1", 18080, "health"),
    Endpoint("coredns", "127.0.0.1", 18181, "ready"),
    Endpoint("network-policies", "127.0.0.1", 10258, "health"),
)


def port(component: str, purpose: str) -> int:
    """The port of ``component``'s ``purpose`` socket (KeyError if there is none)."""
    for e in ENDPOINTS:
        if e.component == component and e.purpose == purpose:
            return e.port
    raise KeyError(f"{component}/{purpose}")


@dataclass(frozen=True)
class Paths:
    """The directories of one cluster. ``state`` is removed by `down` except ``logs`` and
    ``containerd_root`` (the image store: re-importing 2 GB of images on every `up` costs
    half a minute)."""

    state: Path
    run: Path
    cache: Path

    @property
    def lock(self) -> Path:
        return self.state / ".lock"

    @property
    def shared_names(self) -> Path:
        """What this state's `up` took of the machine-wide names (its cgroup root, BRIDGE and
        the agent's nftables table), written before it makes them: `down` touches those names
        only while this file exists, and removes it with the rest of the state."""
        return self.state / "shared-names.json"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def etc(self) -> Path:
        return self.state / "etc"

    @property
    def etcd_data(self) -> Path:
        return self.state / "etcd"

    @property
    def kubelet_root(self) -> Path:
        return self.state / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.state / "pod-logs"

    @property
    def containerd_root(self) -> Path:
        return self.state / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.state / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.state / "cni" / "ipam"

    @property
    def host_state(self) -> Path:
        """What `up` found on the host before changing it (sysctls, network namespaces)."""
        return self.state / "host-before-up.json"

    @property
    def kubeconfig(self) -> Path:
        """The cluster-admin kubeconfig that `up` prints last."""
        return self.state / "kubeconfig"


def paths() -> Paths:
    """The cluster's directories, honouring the LOCAL_CLUSTER_* overrides."""
    return Paths(
        state=Path(os.environ.get("LOCAL_CLUSTER_STATE", "/var/lib/tf-mnist-local-cluster")),
        run=Path(os.environ.get("LOCAL_CLUSTER_RUN", "/run/tf-mnist-local-cluster")),
        cache=Path(
            os.environ.get("LOCAL_CLUSTER_CACHE", str(Path.home() / ".cache" / "tf-mnist-local-cluster"))
        ),
    )
