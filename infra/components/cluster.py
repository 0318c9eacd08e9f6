"""Cluster: an ACK managed cluster (created or reused by id) and a Kubernetes provider for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s


@dataclass
class ClusterArgs:
    """The ACK cluster to create or reuse (cluster.*).

    Attributes:
        vswitch_id: the node vSwitch of a new cluster.
        cluster_id: an existing ACK cluster; then only the provider is created.
        version: the Kubernetes version of a new cluster; None = the newest.
        pod_cidr: the flannel pod CIDR of a new cluster.
        service_cidr: the Service CIDR of a new cluster.
        api_server_public: whether a new cluster's API server gets an internet load balancer.
        credential_minutes: lifetime of the temporary kubeconfig read for the provider
            (ACK: 15 to 4320 minutes).
    """

    vswitch_id: pulumi.Input[str]
    cluster_id: Optional[str]
    version: Optional[str]
    pod_cidr: str
    service_cidr: str
    api_server_public: bool
    credential_minutes: int


class Cluster(pulumi.ComponentResource):
    """ACK managed Kubernetes cluster and the Kubernetes provider that deploys into it.

    Children: ``cluster`` (alicloud.cs.ManagedKubernetes, unless ``args.cluster_id`` is given) and
    ``provider`` (kubernetes.Provider).

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

    def __init__(self, name: str, args: ClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("tf-mnist:index:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.cluster_id is None:
            cluster = alicloud.cs.ManagedKubernetes(
                f"{name}-ack",
                name=name,
                cluster_spec="ack.pro.small",
                vswitch_ids=[args.vswitch_id],
                # Flannel with explicit CIDRs: Terway would need pod vSwitches; both are
                # immutable after creation.
                pod_cidr=args.pod_cidr,
                service_cidr=args.service_cidr,
                # Nodes have no public IPs: the NAT gateway lets them pull images.
                new_nat_gateway=True,
                # Pulumi talks to the API server from outside the VPC.
                slb_internet_enabled=args.api_server_public,
                addons=[
                    alicloud.cs.ManagedKubernetesAddonArgs(name="flannel"),
                    alicloud.cs.ManagedKubernetesAddonArgs(name="csi-plugin"),
                    alicloud.cs.ManagedKubernetesAddonArgs(name="csi-provisioner"),
                ],
                version=args.version,
                opts=child,
            )
            self.cluster_id = cluster.id
            if args.api_server_public:
                # The provider cannot put an allowlist on ACK's own API server load balancer.
                pulumi.log.warn(
                    f"The API server of {name} is reachable from the internet (cluster.apiServerPublic): its "
                    "kubeconfig is a temporary credential (cluster.credentialMinutes); restrict the endpoint "
                    "with an ACL in the ACK console, or set cluster.apiServerPublic false when Pulumi runs "
                    "inside the VPC.", resource=self)
        else:
            self.cluster_id = pulumi.Output.from_input(args.cluster_id)
        # A temporary credential: the kubeconfig in the state and the stack output stops
        # working after credential_minutes instead of holding a long-lived client certificate;
        # every `pulumi up` reads a new one (a provider update: cluster_identifier stays).
        credential = alicloud.cs.get_cluster_credential_output(
            cluster_id=self.cluster_id, temporary_duration_minutes=args.credential_minutes,
            opts=pulumi.InvokeOutputOptions(parent=self))
        self.kubeconfig = pulumi.Output.secret(credential.kube_config)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster_id,
            opts=child,
        )
        self.register_outputs({"cluster_id": self.cluster_id, "kubeconfig": self.kubeconfig})
