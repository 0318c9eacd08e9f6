"""The derive phases: what several keys give together, before the rules check it (``resolve``)
and once they passed (``assemble``: the Settings)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from infra.settings.keys import PLACEMENT_ROLES, PROJECT, SECRET_CAPABLE_KEYS, TENSORBOARD_TAG, TRAINER_CPU_TAG, \
    TRAINER_GPU_TAG
from infra.settings.kubeconfig import kubeconfig_server
from infra.settings.model import Placement, RegistryCredentials, Settings, TaskSettings
from infra.settings.parsers import image_host
from infra.settings.read import Reading
from trainer import cluster_spec as cs


@dataclass(frozen=True)
class Resolved:
    """Values worked out from several keys (or the kubeconfig file), which some rules check.

    Resolved from ``Reading.values``, that is with a bad key's default in its place.

    Attributes:
        cpu_image: ps.image, or <imageRegistry>/trainer:<version>-cpu; also the chief's (on
            CPUs) and the staging Job's.
        worker_image: worker.image, or the GPU trainer image (the CPU one with worker.gpuCount 0).
        tensorboard_image: tensorboard.image, or <imageRegistry>/tensorboard:<version>.
        registry_server: the registry the pull Secret logs in to: registryCredentials.server,
            or the host of imageRegistry.
        replicas: one chief beside ps.number ps and worker.number workers.
        ports: task type -> gRPC port (the chief listens on worker.port).
        cluster_identifier: with kubeconfig, clusterIdentifier or the API server URL of the
            kubeconfig's current context; None without kubeconfig, or when it names no server.
        cluster_identifier_error: why the kubeconfig names no server (a rule reports it).
    """

    cpu_image: str
    worker_image: str
    tensorboard_image: str
    registry_server: str
    replicas: cs.Replicas
    ports: Mapping[str, int]
    cluster_identifier: Optional[str]
    cluster_identifier_error: Optional[str]


def resolve(values: Mapping[str, Any]) -> Resolved:
    """The values that come from several keys, for the rules and ``assemble``."""
    registry = values["imageRegistry"]
    cpu_image = values["ps.image"] or f"{registry}/{TRAINER_CPU_TAG}"
    worker_image = values["worker.image"] or (f"{registry}/{TRAINER_GPU_TAG}" if values["worker.gpuCount"] > 0
                                              else cpu_image)
    identifier: Optional[str] = None
    error: Optional[str] = None
    if values["kubeconfig"] is not None:
        identifier = values["clusterIdentifier"]
        if identifier is None:
            try:
                identifier = kubeconfig_server(values["kubeconfig"])
            except ValueError as why:
                error = str(why)
    return Resolved(
        cpu_image=cpu_image,
        worker_image=worker_image,
        tensorboard_image=values["tensorboard.image"] or f"{registry}/{TENSORBOARD_TAG}",
        registry_server=values["registryCredentials.server"] or image_host(registry),
        replicas=cs.Replicas(chief=1, worker=values["worker.number"], ps=values["ps.number"]),
        ports={"chief": values["worker.port"], "worker": values["worker.port"], "ps": values["ps.port"]},
        cluster_identifier=identifier,
        cluster_identifier_error=error,
    )


def assemble(reading: Reading, resolved: Resolved, stack: str) -> Settings:
    """The Settings of a configuration that passed every rule."""
    v = reading.values
    kubeconfig = v["kubeconfig"]
    username, password = v["registryCredentials.username"], v["registryCredentials.password"]
    credentials: Optional[RegistryCredentials] = None
    if username is not None and password is not None:
        credentials = RegistryCredentials(resolved.registry_server, username, password)
    pull_secret = v["imagePullSecret"] or (f"{v['namePrefix']}-registry" if username or password else None)
    cpu_image, worker_image = resolved.cpu_image, resolved.worker_image
    # With ps.number 0 the chief is one of the synchronous replicas (MultiWorkerMirroredStrategy),
    # whose collectives refuse a group mixing CPU and GPU devices: it then runs like a worker.
    chief_uses_gpu = v["ps.number"] == 0 and v["worker.gpuCount"] > 0
    gpu_pods = v["worker.number"] + (1 if chief_uses_gpu else 0)
    gpu_size = v["gpuPool.size"]
    if gpu_size is None:
        gpu_size = max(1, math.ceil(gpu_pods * v["worker.gpuCount"] / v["gpuPool.gpusPerInstance"]))
    ps_task = TaskSettings(cpu_image, v["ps.imagePullPolicy"], v["ps.port"], v["ps.cpu"], v["ps.memory"])
    worker_task = TaskSettings(worker_image, v["worker.imagePullPolicy"], v["worker.port"], v["worker.cpu"],
                               v["worker.memory"])
    placement = {role: Placement(dict(v[f"{role}.nodeSelector"]), tuple(v[f"{role}.tolerations"]))
                 for role in PLACEMENT_ROLES}
    placement["stage-data"] = placement["chief"]
    if chief_uses_gpu:
        placement["chief"] = placement["worker"]
    return Settings(
        project=PROJECT,
        stack=stack,
        name_prefix=v["namePrefix"],
        namespace=v["namespace"],
        create_namespace=v["createNamespace"],
        replicas=resolved.replicas,
        worker=worker_task,
        gpu_count=v["worker.gpuCount"],
        ps=ps_task,
        chief=worker_task if chief_uses_gpu else TaskSettings(
            cpu_image, v["ps.imagePullPolicy"], v["worker.port"], v["ps.cpu"], v["ps.memory"]),
        staging_image=cpu_image,
        epochs=v["hyperparams.epochs"],
        batch_size=v["hyperparams.batchsize"],
        learning_rate=v["hyperparams.learningrate"],
        mount_path=v["mountPath"],
        data_source=v["data.source"],
        storage=v["persistence.pvc.storage"],
        match_labels=dict(v["persistence.pvc.matchLabels"]),
        tensorboard_image=resolved.tensorboard_image,
        tensorboard_service_type=v["tensorboard.serviceType"],
        tensorboard_address_type=v["tensorboard.addressType"],
        tensorboard_source_ranges=tuple(v["tensorboard.allowedSourceRanges"]),
        backoff_limit=v["job.backoffLimit"],
        wait_for_chief=v["job.waitForChief"],
        wait_timeout_minutes=v["job.waitTimeoutMinutes"],
        active_deadline_seconds=v["job.activeDeadlineSeconds"],
        peer_timeout_seconds=v["job.peerTimeoutSeconds"],
        priority_class_name=v["job.priorityClassName"],
        placement=placement,
        chief_uses_gpu=chief_uses_gpu,
        image_pull_secret=pull_secret,
        registry_credentials=credentials,
        volume_type=v["persistence.volume.type"],
        nfs_server=v["nfs.server"],
        nfs_path=v["nfs.path"],
        host_path=v["hostPath.path"],
        create_cloud=kubeconfig is None,
        zone=v["zone"],
        vpc_id=v["vpc.id"],
        vpc_cidr=v["vpc.cidr"],
        vswitch_id=v["vswitch.id"],
        vswitch_cidr=v["vswitch.cidr"],
        cluster_id=v["cluster.id"],
        cluster_version=v["cluster.version"],
        pod_cidr=v["cluster.podCidr"],
        service_cidr=v["cluster.serviceCidr"],
        api_server_public=v["cluster.apiServerPublic"],
        kubeconfig=kubeconfig,
        cluster_identifier=resolved.cluster_identifier,
        cluster_identifier_from_kubeconfig=kubeconfig is not None and v["clusterIdentifier"] is None,
        gpu_instance_types=tuple(v["gpuPool.instanceTypes"]),
        gpus_per_instance=v["gpuPool.gpusPerInstance"],
        gpu_pool_size=gpu_size,
        gpu_autoscaling=v["gpuPool.autoscaling"],
        gpu_system_disk_category=v["gpuPool.systemDiskCategory"],
        gpu_system_disk_size=v["gpuPool.systemDiskSize"],
        cpu_instance_types=tuple(v["cpuPool.instanceTypes"]),
        cpu_pool_size=v["cpuPool.size"],
        cpu_system_disk_category=v["cpuPool.systemDiskCategory"],
        key_name=v["nodePools.keyName"],
        nas_storage_type=v["nas.storageType"],
        nas_retain=v["nas.retainOnDestroy"],
        nas_path=v["nas.path"],
        nas_mount_target_domain=v["nas.mountTargetDomain"],
        ports=resolved.ports,
        secret_keys=frozenset(reading.secrets & set(SECRET_CAPABLE_KEYS)),
    )
