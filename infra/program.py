"""The Pulumi program: reads the configuration (and nothing else does), builds the stack,
exports its outputs."""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components.cluster import Cluster
from infra.components.labels import recommended_labels
from infra.components.nas import NasStorage
from infra.components.network import Network
from infra.components.node_pools import NodePools
from infra.components.registry import PullSecret
from infra.components.storage import SharedVolume
from infra.components.tensorboard import TensorBoard
from infra.components.training import TrainingJob
from infra.settings import PROJECT, Settings, is_kubeconfig_path, load_settings


def run() -> dict[str, Any]:
    """Validate the stack configuration, register every resource, export the outputs.

    Returns:
        The stack outputs by name (the same values ``pulumi.export`` receives), for tests.

    Raises:
        infra.settings.ConfigError: on any invalid configuration, before any resource exists.
    """
    settings = load_settings()
    outputs = build(settings)
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs


def build(settings: Settings) -> dict[str, Any]:
    """Register the cloud layer (unless a kubeconfig is given) and the Kubernetes layer."""
    prefix = settings.name_prefix
    cloud_name = f"{prefix}-{settings.stack}"
    cluster_id: Optional[pulumi.Output[str]] = None
    file_system_id: Optional[pulumi.Output[str]] = None
    pods_depend_on: list[pulumi.Resource] = []
    if settings.cluster.create_cloud:
        network = Network(cloud_name, zone=settings.cluster.zone, vpc_id=settings.cluster.vpc_id, vpc_cidr=settings.cluster.vpc_cidr,
                          vswitch_id=settings.cluster.vswitch_id, vswitch_cidr=settings.cluster.vswitch_cidr)
        cluster = Cluster(cloud_name, vswitch_id=network.vswitch_id, cluster_id=settings.cluster.cluster_id,
                          version=settings.cluster.version, pod_cidr=settings.cluster.pod_cidr,
                          service_cidr=settings.cluster.service_cidr, api_server_public=settings.cluster.api_server_public)
        pools = NodePools(
            cloud_name, cluster_id=cluster.cluster_id, vswitch_id=network.vswitch_id,
            cpu_instance_types=settings.cluster.cpu_instance_types, cpu_size=settings.cluster.cpu_pool_size,
            cpu_system_disk_category=settings.cluster.cpu_system_disk_category,
            gpu_instance_types=settings.cluster.gpu_instance_types,
            gpu_size=settings.cluster.gpu_pool_size if settings.training.gpu_count > 0 else None,
            gpu_autoscaling=settings.cluster.gpu_autoscaling,
            gpu_system_disk_category=settings.cluster.gpu_system_disk_category,
            gpu_system_disk_size=settings.cluster.gpu_system_disk_size, key_name=settings.cluster.key_name)
        nas = NasStorage(cloud_name, vswitch_id=network.vswitch_id, vswitch_cidr=network.vswitch_cidr,
                         storage_type=settings.storage.nas_storage_type, retain_on_destroy=settings.storage.nas_retain_on_destroy)
        provider = cluster.provider
        kubeconfig: pulumi.Output[str] = cluster.kubeconfig
        cluster_id = cluster.cluster_id
        file_system_id = nas.file_system_id
        server: Optional[pulumi.Input[str]] = nas.mount_target_domain
        # The domain is unknown until the mount target exists, and the volume's name must be
        # known at preview: it stands for what gives a new domain (a new file system or vSwitch).
        server_key = (f"nas {cloud_name} storageType={settings.storage.nas_storage_type} zone={settings.cluster.zone} "
                      f"vpc={settings.cluster.vpc_id or settings.cluster.vpc_cidr} "
                      f"vswitch={settings.cluster.vswitch_id or settings.cluster.vswitch_cidr}")
        # The PV must not exist before its NFS server does; pods need nodes to run on.
        volume_depends_on: list[pulumi.Resource] = [nas.mount_target]
        pods_depend_on = [pools]
    else:
        kubeconfig = pulumi.Output.secret(settings.cluster.kubeconfig)
        identifier: pulumi.Input[str] = settings.cluster.identifier
        if "kubeconfig" in settings.secret_keys and settings.cluster.identifier_from_kubeconfig:
            # Derived from a secret kubeconfig (its API server URL): as secret as its source.
            identifier = pulumi.Output.secret(identifier)
        # cluster_identifier: the provider (and with it every Kubernetes object) is replaced
        # only when this changes, not when the kubeconfig's credentials, CA or cluster entry
        # do (pulumi-kubernetes DiffConfig); the cloud layer's Cluster uses the ACK cluster id.
        provider = k8s.Provider(f"{prefix}-k8s", kubeconfig=kubeconfig, cluster_identifier=identifier)
        server = {"nas": settings.storage.nas_mount_target_domain, "nfs": settings.storage.nfs_server}.get(settings.storage.volume_type)
        server_key = server or ""
        volume_depends_on = []
    path_key: str = {"nas": settings.storage.nas_path, "nfs": settings.storage.nfs_path,
                     "hostPath": settings.storage.host_path}[settings.storage.volume_type]
    volume_path: pulumi.Input[str] = path_key
    if server is not None and settings.secret_keys & {"nas.mountTargetDomain", "nfs.server", "nfs.path"}:
        # Set with --secret: keep it secret in the PV's inputs and the stack outputs.
        server = pulumi.Output.secret(server)
        volume_path = pulumi.Output.secret(volume_path)

    k8s_opts = pulumi.ResourceOptions(providers=[provider])
    # Namespaced objects take the name from the Namespace resource when the stack creates it,
    # which orders them after it.
    namespace: pulumi.Input[str] = settings.namespace
    if settings.create_namespace:
        namespace = k8s.core.v1.Namespace(
            settings.namespace,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=settings.namespace,
                                                labels=recommended_labels(prefix, "namespace")),
            opts=pulumi.ResourceOptions(provider=provider)).metadata.name

    # A change of what the API server cannot change in place on the PV or its claim (capacity,
    # matchLabels, the source, the namespace) renames both: a new pair is created, the Jobs and
    # TensorBoard move to it (the claim's name is in their pod templates), the old pair is
    # deleted last; the data stays where it is (Retain, same directory). See SharedVolume.
    # On a run in progress that replaces the Jobs (a new run id): the old Jobs' pods get
    # SIGTERM, on which the chief saves a checkpoint, and the new tasks resume from the latest
    # checkpoint in log_dir, which is the same directory on the new PV; staging runs again and
    # finds the data already there. A finished run stays finished (its last checkpoint).
    volume = SharedVolume(
        prefix, namespace=namespace, namespace_name=settings.namespace, volume_type=settings.storage.volume_type,
        server=server, server_key=server_key, path=volume_path, path_key=path_key,
        storage=settings.storage.capacity, match_labels=settings.storage.match_labels,
        after=volume_depends_on, opts=k8s_opts)
    if settings.registry.credentials is not None and settings.registry.image_pull_secret is not None:
        # Pods would pull before the Secret exists and back off: create it first.
        pods_depend_on = [*pods_depend_on, PullSecret(
            prefix, secret_name=settings.registry.image_pull_secret, namespace=namespace,
            credentials=settings.registry.credentials, opts=k8s_opts)]
    training = TrainingJob(settings, namespace=namespace, claim_name=volume.claim_name,
                           after=[*pods_depend_on, volume.pvc], opts=k8s_opts)
    tensorboard = TensorBoard(
        prefix, namespace=namespace, image=settings.tensorboard.image,
        image_pull_policy=settings.tensorboard.image_pull_policy, log_dir=settings.log_dir,
        mount_path=settings.storage.mount_path, pvc_name=volume.pvc_name,
        service_type=settings.tensorboard.service_type, address_type=settings.tensorboard.address_type,
        source_ranges=settings.tensorboard.source_ranges, cloud_acl=settings.cluster.create_cloud,
        placement=settings.placement["tensorboard"], image_pull_secret=settings.registry.image_pull_secret,
        after=pods_depend_on, opts=k8s_opts)

    ns = settings.namespace
    chief = f"{prefix}-chief-0"
    follow_log: Any = [
        f"pulumi stack output kubeconfig --show-secrets > {PROJECT}-kubeconfig.yaml",
        f"kubectl --kubeconfig {PROJECT}-kubeconfig.yaml --namespace {ns} logs --follow job/{chief}",
    ]
    if settings.cluster.kubeconfig is not None and is_kubeconfig_path(settings.cluster.kubeconfig):
        # The kubeconfig output is then the path itself, not a file kubectl could read.
        follow_log = [f"kubectl --kubeconfig {settings.cluster.kubeconfig} --namespace {ns} logs --follow job/{chief}"]
        if "kubeconfig" in settings.secret_keys:
            follow_log = pulumi.Output.secret(follow_log)
    return {
        "clusterId": cluster_id,
        "kubeconfig": kubeconfig,
        "nasFileSystemId": file_system_id,
        "mountTargetDomain": pulumi.Output.from_input(server if settings.storage.volume_type == "nas" else None),
        "namespace": ns,
        "pvName": volume.pv_name,
        "pvcName": volume.pvc_name,
        "clusterSpec": training.cluster_spec,
        "jobNames": training.job_names,
        "stagingJobName": training.staging_job_name,
        "runId": training.run_id,
        "tensorboardUrl": tensorboard.url,
        "followChiefLog": follow_log,
    }
