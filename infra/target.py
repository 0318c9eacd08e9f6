"""Where the Kubernetes layer deploys: the cluster the stack creates with the cloud layer, or
the existing one a kubeconfig names. The one place that decides between the two."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components.cluster import Cluster, ClusterArgs
from infra.components.nas import NasStorage, NasStorageArgs
from infra.components.network import Network, NetworkArgs
from infra.components.node_pools import NodePools, NodePoolsArgs, gpu_nodes
from infra.components.observability import Observability, ObservabilityArgs
from infra.settings import PROJECT, Settings


@dataclass(frozen=True)
class Target:
    """The cluster the Kubernetes layer deploys into, and what the cloud layer made for it.

    Attributes:
        provider: the kubernetes provider of every Kubernetes object.
        kubeconfig: the cluster's kubeconfig (secret): the ACK credential, or the configured
            path or content.
        cluster_id: the ACK cluster id; None for a cluster the stack does not manage.
        nas_file_system_id: the NAS file system of the mount target the stack created (new or
            nas.fileSystemId); None when it created none.
        volume_server: the PV's server: the NAS mount target domain (created or configured) or
            the NFS server; None for hostPath.
        volume_server_key: plain text standing for ``volume_server`` in the volume's name
            (infra.components.storage.volume_name).
        volume_after: what the PV waits for (the NAS mount target the stack created).
        pods_after: what every pod waits for (the node pools the stack created).
    """

    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    cluster_id: pulumi.Output[str] | None
    nas_file_system_id: pulumi.Output[str] | None
    volume_server: pulumi.Input[str] | None
    volume_server_key: str
    volume_after: Sequence[pulumi.Resource] = field(default_factory=list)
    pods_after: Sequence[pulumi.Resource] = field(default_factory=list)


def deploy_target(settings: Settings) -> Target:
    """The cluster to deploy into: created with the cloud layer when no kubeconfig names one
    (``creates_cloud``), else the kubeconfig's."""
    return created_cluster(settings) if settings.creates_cloud else existing_cluster(settings)


def cloud_name(settings: Settings) -> str:
    """The cloud layer's name, ``tf-mnist-<stack>``: the start of its resources' Pulumi names
    and of their names in Alibaba Cloud.

    Not namePrefix: a new prefix renames the Kubernetes objects (which is what it is for), but
    a Pulumi name that changes is a replacement, and a replaced VPC, cluster or NAS file
    system loses the cluster and its data. The stack name is part of the URN anyway.
    """
    return f"{PROJECT}-{settings.stack}"


def _moved_from_prefix(settings: Settings) -> pulumi.ResourceOptions:
    """Options of a cloud component: an alias from the name it had when it was
    ``<namePrefix>-<stack>`` (a stack created before cloud_name), so such a stack keeps its
    resources; children inherit the alias (their names start with the component's)."""
    old = f"{settings.name_prefix}-{settings.stack}"
    return pulumi.ResourceOptions(aliases=[pulumi.Alias(name=old)] if old != cloud_name(settings) else [])


def created_cluster(settings: Settings) -> Target:
    """The cloud layer: network (with a Terway cluster's pod vSwitch), ACK cluster, node pools
    and NAS, named ``cloud_name``."""
    name, nas, target = cloud_name(settings), settings.nas, settings.target
    opts = _moved_from_prefix(settings)
    pod_vswitch_cidr = settings.cluster.pod_vswitch_cidr if target.creates_pod_vswitch else None
    network = Network(
        name,
        NetworkArgs(
            zone=settings.zone, vpc=settings.vpc, vswitch=settings.vswitch, pod_vswitch_cidr=pod_vswitch_cidr
        ),
        opts=opts,
    )
    cluster = _cluster(name, settings, network, opts)
    pools = NodePools(
        name,
        NodePoolsArgs(
            cluster_id=cluster.cluster_id,
            vswitch_id=network.vswitch_id,
            cpu_pool=settings.cpu_pool,
            gpu_pool=settings.gpu_pool if settings.worker.gpu_count > 0 else None,
            gpu_nodes=gpu_nodes(settings.gpu_pool, _gpu_pods(settings), settings.worker.gpu_count),
            node_pools=settings.node_pools,
        ),
        opts=opts,
    )
    common: dict[str, Any] = {
        "provider": cluster.provider,
        "kubeconfig": cluster.kubeconfig,
        "cluster_id": cluster.cluster_id,
        "pods_after": [pools, *_observability(name, settings, cluster, pools, opts)],
    }  # pods need nodes to run on (and, with observability.logs, the log collection)
    if nas.mount_target_domain is not None:
        # An existing mount target (in the VPC of vpc.id or vswitch.id, the rules made sure):
        # the stack creates no NAS resource and reports no file system of its own.
        return Target(
            **common,
            nas_file_system_id=None,
            volume_server=nas.mount_target_domain,
            volume_server_key=nas.mount_target_domain,
        )
    storage_type = settings.target.nas_storage_type
    file_system = NasStorage(
        name,
        NasStorageArgs(
            vswitch_id=network.vswitch_id,
            vswitch_cidr=network.vswitch_cidr,
            storage_type=storage_type or "Capacity",
            nas=nas,
            zone=settings.zone,
        ),
        opts=opts,
    )
    which = (
        f"fileSystem={nas.file_system_id}"
        if nas.file_system_id is not None
        else f"storageType={storage_type}"
    )
    vpc, vswitch = settings.vpc, settings.vswitch
    return Target(
        **common,
        nas_file_system_id=file_system.file_system_id,
        volume_server=file_system.mount_target_domain,
        # The domain is unknown until the mount target exists, and the volume's name must be
        # known at preview: it stands for what gives a new domain (a new file system or vSwitch).
        volume_server_key=(
            f"nas {settings.name_prefix}-{settings.stack} {which} zone={settings.zone} "
            f"vpc={vpc.id or vpc.cidr} vswitch={vswitch.id or vswitch.cidr}"
        ),
        # The PV must not exist before its NFS server does.
        volume_after=[file_system.mount_target],
    )


def _observability(
    name: str, settings: Settings, cluster: Cluster, pools: NodePools, opts: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """The add-ons of observability.* on the cluster (none when both keys are false), after its
    node pools; returns what the pods wait for (Observability.ready)."""
    keys = settings.observability
    if not (keys.gpu_metrics or keys.logs):
        return []
    return Observability(
        name,
        ObservabilityArgs(
            cluster_id=cluster.cluster_id,
            provider=cluster.provider,
            gpu_metrics=keys.gpu_metrics,
            logs=keys.logs,
            name_prefix=settings.name_prefix,
            namespace=settings.namespace,
            after=[pools],
        ),
        opts=opts,
    ).ready


def _gpu_pods(settings: Settings) -> int:
    """The pods that request GPUs: the workers, and the chief when it trains beside them."""
    training = settings.training
    return training.replicas.worker + (1 if training.chief_uses_gpu else 0)


def _cluster(name: str, settings: Settings, network: Network, opts: pulumi.ResourceOptions) -> Cluster:
    """The ACK cluster in ``network``'s vSwitch (a Terway cluster's pods in its pod vSwitch,
    configured or created)."""
    target = settings.target
    return Cluster(
        name,
        ClusterArgs(
            vswitch_id=network.vswitch_id,
            cluster=settings.cluster,
            network_plugin=target.network_plugin or "terway",
            pod_vswitch_id=settings.cluster.pod_vswitch_id or network.pod_vswitch_id,
            deployed_network_plugin=target.deployed_network_plugin,
        ),
        opts=opts,
    )


def existing_volume_server(settings: Settings) -> str | None:
    """The volume's server on a cluster the stack does not create: nas.mountTargetDomain or
    nfs.server by persistence.volume.type; None for hostPath."""
    return {"nas": settings.nas.mount_target_domain, "nfs": settings.nfs.server}.get(settings.volume.type)


def volume_path(settings: Settings) -> str:
    """The directory the PV mounts: nas.path, nfs.path or hostPath.path, by volume type."""
    path = {"nas": settings.nas.path, "nfs": settings.nfs.path, "hostPath": settings.host_path.path}[
        settings.volume.type
    ]
    assert path is not None, "the rules require nfs.path with persistence.volume.type nfs"
    return path


def existing_cluster(settings: Settings) -> Target:
    """A provider for the kubeconfig's cluster; the volume's server as configured."""
    # With a kubeconfig the rules made sure that it names the cluster's API server.
    assert settings.kubeconfig is not None and settings.target.identifier is not None
    kubeconfig = pulumi.Output.secret(settings.kubeconfig)
    identifier: pulumi.Input[str] = settings.target.identifier
    if "kubeconfig" in settings.secret_keys and settings.cluster_identifier is None:
        # Derived from a secret kubeconfig (its API server URL): as secret as its source.
        identifier = pulumi.Output.secret(identifier)
    # cluster_identifier: the provider (and with it every Kubernetes object) is replaced
    # only when this changes, not when the kubeconfig's credentials, CA or cluster entry
    # do (pulumi-kubernetes DiffConfig); the cloud layer's Cluster uses the ACK cluster id.
    provider = k8s.Provider(
        f"{settings.name_prefix}-k8s", kubeconfig=kubeconfig, cluster_identifier=identifier
    )
    server = existing_volume_server(settings)
    return Target(
        provider=provider,
        kubeconfig=kubeconfig,
        cluster_id=None,
        nas_file_system_id=None,
        volume_server=server,
        volume_server_key=server or "",
    )
