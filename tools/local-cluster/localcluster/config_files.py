"""The files `up` writes for the cluster's components (under the state directory's etc/ and
the CNI directory): containerd's config.toml, the pod network's CNI config, CoreDNS's Corefile,
the kubelet's configuration, and the RBAC that CoreDNS and the NetworkPolicy agent need. Settings
that this machine needs are explained where they are set (see also tools/local-cluster/README.md).
"""

from __future__ import annotations

import json

from localcluster import layout
from localcluster.components import kubeconfig_path
from localcluster.layout import Paths

#: What CoreDNS's kubernetes plugin reads (its documented RBAC), bound to its client identity.
COREDNS_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "tf-mnist:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "tf-mnist:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "tf-mnist:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "tf-mnist:coredns"}
"""

#: What the NetworkPolicy agent reads (the informers of sigs.k8s.io/kube-network-policies'
#: controller) and the events it records, bound to its client identity.
NETWORK_POLICIES_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "tf-mnist:network-policies"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "tf-mnist:network-policies"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "tf-mnist:network-policies"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "tf-mnist:network-policies"}
"""


def containerd_config(p: Paths, sandbox_image: str) -> str:
    """containerd's config.toml (version 2) for this cluster's own instance."""
    return f"""\
version = 2
root = "{p.containerd_root}"
state = "{p.containerd_state}"
# The VM refuses negative oom_score_adj values (no CAP_SYS_RESOURCE).
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{p.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{p.containerd_root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # The CRI asks for -998 on pod sandboxes; the VM only allows raising the score.
  restrict_oom_score_adj = true
  enable_selinux = false
  # Pod network namespaces under our state dir, not /var/run/netns: `down` unmounts them there.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    # Our own directory: podman's package drops 87-podman-bridge.conflist into /etc/cni/net.d
    # and containerd would take the alphabetically first file there.
    conf_dir = "{p.cni_conf_dir}"
    max_conf_num = 1
"""


def cni_config(p: Paths) -> str:
    """The pod network: the CNI bridge plugin on the tool's own bridge, host-local IPAM.

    isGateway false and ipMasq false: the bridge plugin then neither enables IP forwarding nor
    adds NAT rules, and pods get no default route, so pod traffic stays on the bridge (pods,
    the node address, the cluster DNS). The bridge and its address are made by `up` itself
    (network.py) because CoreDNS and the kubelet bind to that address before any pod exists.
    """
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": layout.CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": layout.BRIDGE,
                    "isGateway": False,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": layout.POD_SUBNET, "gateway": layout.BRIDGE_IP}]],
                        "dataDir": str(p.cni_ipam_dir),
                    },
                }
            ],
        },
        indent=2,
    )


def corefile(p: Paths) -> str:
    """CoreDNS serving cluster.local from the API server (headless Services included)."""
    return f"""\
.:{layout.port("coredns", "dns")} {{
    bind {layout.BRIDGE_IP}
    errors
    health 127.0.0.1:{layout.port("coredns", "health")}
    ready 127.0.0.1:{layout.port("coredns", "ready")}
    kubernetes {layout.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig_path(p, "coredns")}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        # A replaced pod's new address must be seen within seconds by its peers.
        ttl 5
    }}
}}
"""


def kubelet_config(p: Paths) -> str:
    """KubeletConfiguration (v1beta1) for this machine: cgroupfs driver (no systemd), the
    bridge address as node and DNS address, images never garbage-collected (they are imported,
    not pullable), and low eviction thresholds so a full-ish disk does not evict training pods.
    """
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": layout.BRIDGE_IP,
            "port": layout.port("kubelet", "server"),
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": layout.port("kubelet", "healthz"),
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(p.pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            # Pod cgroups under the tool's own root (<hierarchy>/tf-mnist-local-cluster/kubepods/...)
            # so that `down` can remove them without touching another kubelet's kubepods.
            "cgroupRoot": layout.CGROUP_ROOT,
            "containerRuntimeEndpoint": f"unix://{p.containerd_socket}",
            "clusterDNS": [layout.BRIDGE_IP],
            "clusterDomain": layout.CLUSTER_DOMAIN,
            # The host's resolv.conf names an upstream that pods must not use.
            "resolvConf": str(p.etc / "pod-resolv.conf"),
            "podCIDR": layout.POD_SUBNET,
            "maxPods": layout.MAX_PODS,
            "failSwapOn": False,
            # The VM refuses negative values (the default is -999).
            "oomScoreAdj": 0,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "200Mi",
                "nodefs.available": "2%",
                "imagefs.available": "2%",
            },
            "podLogsDir": str(p.pod_logs),
            "volumePluginDir": str(p.kubelet_root / "volume-plugins"),
            "serializeImagePulls": False,
        },
        indent=2,
    )
