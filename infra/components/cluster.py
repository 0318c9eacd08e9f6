"""Cluster: an ACK managed cluster (created or reused by id) and a Kubernetes provider for it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from infra.components.tags import cloud_tags
from infra.settings.cloud import Cluster as ClusterKeys


@dataclass
class ClusterArgs:
    """The ACK cluster to create or reuse (cluster.*).

    Attributes:
        vswitch_id: the node vSwitch of a new cluster.
        cluster: the cluster.* keys: ``id``, an existing ACK cluster (then only the provider
            is created); of a new cluster ``version`` (None = the newest), ``pod_cidr``
            (Flannel's), ``service_cidr``, ``api_server_public`` (an internet load balancer
            for the API server) and ``credential_minutes`` (lifetime of the temporary
            kubeconfig read for the provider; ACK: 15 to 4320 minutes).
        network_plugin: the network plugin of a new cluster: ``flannel`` (pods on ``cluster.pod_cidr``)
            or ``terway`` (pods on ``pod_vswitch_id``; enforces NetworkPolicy).
        deployed_network_plugin: the plugin of the cluster in the stack's state, if any: a
            different ``network_plugin`` replaces that cluster (a warning says so).
        pod_vswitch_id: the pod vSwitch of a new Terway cluster, configured or created; None
            with Flannel.
    """

    vswitch_id: pulumi.Input[str]
    cluster: ClusterKeys
    network_plugin: str = "terway"
    pod_vswitch_id: pulumi.Input[str] | None = None
    deployed_network_plugin: str | None = None


#: The ACK addon of each network plugin. terway-eniip is Terway's shared-ENI mode.
NETWORK_ADDONS = {"flannel": "flannel", "terway": "terway-eniip"}
#: Each addon's config (ACK's addon config, a JSON string). NetworkPolicy is asked for
#: explicitly, as ACK's own Terraform guide does (``config = jsonencode({NetworkPolicy =
#: "true"})``): no source says Terway enforces policies when the config leaves it out, and the
#: task servers' gRPC ports are unauthenticated, so the NetworkPolicies are the boundary.
NETWORK_ADDON_CONFIGS = {"terway-eniip": json.dumps({"NetworkPolicy": "true"})}


def _pod_network(args: ClusterArgs) -> dict:
    """The ManagedKubernetes inputs that give pods addresses: ``pod_cidr`` with Flannel,
    ``pod_vswitch_ids`` with Terway (ACK CreateCluster takes PodVswitchIds, not a container CIDR)."""
    if args.network_plugin == "terway":
        if args.pod_vswitch_id is None:
            raise ValueError(
                "cluster.networkPlugin terway needs a pod vSwitch (cluster.podVswitchId, or one the "
                "stack creates of cluster.podVswitchCidr)"
            )
        return {"pod_vswitch_ids": [args.pod_vswitch_id]}
    return {"pod_cidr": args.cluster.pod_cidr}


def _warn(name: str, args: ClusterArgs, cluster: pulumi.Resource) -> None:
    """Warnings about a cluster the stack creates: a public API server, and Flannel, which
    enforces no NetworkPolicy (Terway does; neither can be switched on an existing cluster)."""
    if args.cluster.api_server_public:
        # The provider cannot put an allowlist on ACK's own API server load balancer.
        pulumi.log.warn(
            f"The API server of {name} is reachable from the internet (cluster.apiServerPublic): its "
            "kubeconfig is a temporary credential (cluster.credentialMinutes); restrict the endpoint "
            "with an ACL in the ACK console, or set cluster.apiServerPublic false when Pulumi runs "
            "inside the VPC.",
            resource=cluster,
        )
    if args.network_plugin == "flannel":
        pulumi.log.warn(
            f"The cluster {name} uses Flannel (cluster.networkPlugin flannel), which does not enforce Kubernetes "
            "NetworkPolicy: the stack's NetworkPolicies are created but every pod still accepts traffic from "
            "any pod. For enforcement, create the cluster with Terway: pulumi config set cluster.networkPlugin "
            "terway on a new stack (ACK cannot change the plugin of an existing cluster: on a deployed stack "
            "the change replaces the cluster).",
            resource=cluster,
        )
    deployed = args.deployed_network_plugin
    if deployed is not None and deployed != args.network_plugin:
        pulumi.log.warn(
            f"cluster.networkPlugin {args.network_plugin}: the stack's cluster {name} has {deployed}, which ACK cannot "
            "change, so `pulumi up` replaces the cluster (new nodes; every Kubernetes object is created again). To "
            "keep it: pulumi config rm cluster.networkPlugin",
            resource=cluster,
        )


class Cluster(pulumi.ComponentResource):
    """ACK managed Kubernetes cluster and the Kubernetes provider that deploys into it.

    Children: ``cluster`` (alicloud.cs.ManagedKubernetes, unless ``args.cluster.id`` is given) and
    ``provider`` (kubernetes.Provider). A new cluster gets the addon of its network plugin
    (``NETWORK_ADDONS``) and the CSI plugin and provisioner.

    The kubeconfig comes from ``cs.get_cluster_credential_output`` (the cluster resource has
    no kubeconfig attribute); while the cluster id is unknown (a preview before creation) the
    invoke is not made and the kubeconfig stays unknown. The provider gets
    ``cluster_identifier=<cluster id>``, so a refreshed credential is a provider update rather
    than a replacement of every Kubernetes resource.

    Outputs:
        cluster_id: the ACK cluster id.
        kubeconfig: the cluster's kubeconfig (secret).
    """

    cluster_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.cluster.id is None:
            cluster = alicloud.cs.ManagedKubernetes(
                f"{name}-ack",
                name=name,
                cluster_spec="ack.pro.small",
                vswitch_ids=[args.vswitch_id],
                # Flannel's pod_cidr or Terway's pod_vswitch_ids: ACK cannot switch the plugin of
                # an existing cluster, and pod_cidr is ForceNew.
                **_pod_network(args),
                service_cidr=args.cluster.service_cidr,
                # Nodes have no public IPs: the NAT gateway lets them pull images.
                new_nat_gateway=True,
                # Pulumi talks to the API server from outside the VPC.
                slb_internet_enabled=args.cluster.api_server_public,
                addons=[
                    alicloud.cs.ManagedKubernetesAddonArgs(
                        name=NETWORK_ADDONS[args.network_plugin],
                        config=NETWORK_ADDON_CONFIGS.get(NETWORK_ADDONS[args.network_plugin]),
                    ),
                    alicloud.cs.ManagedKubernetesAddonArgs(name="csi-plugin"),
                    alicloud.cs.ManagedKubernetesAddonArgs(name="csi-provisioner"),
                ],
                version=args.cluster.version,
                # ACK puts the cluster's tags on its nodes too.
                tags=cloud_tags(),
                opts=child,
            )
            self.cluster_id = cluster.id
            _warn(name, args, self)
        else:
            self.cluster_id = pulumi.Output.from_input(args.cluster.id)
        # A temporary credential: the kubeconfig in the state and the stack output stops
        # working after credential_minutes instead of holding a long-lived client certificate;
        # every run of the program reads a new one (a provider update: cluster_identifier
        # stays). `pulumi destroy` and `refresh` run the program only with --run-program;
        # without it they use the one in the state, which the API server refuses once expired.
        credential = alicloud.cs.get_cluster_credential_output(
            cluster_id=self.cluster_id,
            temporary_duration_minutes=args.cluster.credential_minutes,
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        self.kubeconfig = pulumi.Output.secret(credential.kube_config)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster_id,
            opts=child,
        )
        self.register_outputs({"cluster_id": self.cluster_id, "kubeconfig": self.kubeconfig})
