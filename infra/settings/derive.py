"""The derive phases: what several keys give together, before the rules check it (``resolve``)
and once they passed (``assemble``: the Settings)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.bundle import PACKAGE_FILES
from infra.deployed import Deployed
from infra.kubeconfig import kubeconfig_server
from infra.pull_policy import pull_policy
from infra.settings.config import Config
from infra.settings.constants import (
    NEW_CLUSTER_NETWORK_PLUGIN,
    NEW_NAS_STORAGE_TYPE,
    PROJECT,
    TENSORBOARD_TAG,
    TRAINER_CPU_TAG,
    TRAINER_GPU_TAG,
    regional_runtime,
)
from infra.settings.model import (
    ImageSettings,
    Placement,
    RegistryCredentials,
    RegistrySettings,
    RuntimeSettings,
    Settings,
    StorageSettings,
    TargetSettings,
    TaskSettings,
    TrainingSettings,
)
from infra.stack_state import StateUnreadable
from infra.values.parsers import image_host
from trainer.contract import cluster_spec as cs


@dataclass(frozen=True)
class Resolved:
    """Values worked out from several keys (or the kubeconfig file), which some rules check.

    Resolved from the configuration as read, that is with a bad key's default in its place.

    Attributes:
        cpu_image: ps.image, or <imageRegistry>/trainer:<version>-cpu, or without imageRegistry
            the base image; also the chief's (on CPUs) and the staging Job's.
        worker_image: worker.image, or the GPU trainer image (the CPU one with worker.gpuCount 0).
        tensorboard_image: tensorboard.image, or <imageRegistry>/tensorboard:<version>, or the
            base image.
        cpu_packages, worker_packages, tensorboard_packages: the package set (a key of
            infra/bundle.py PACKAGE_FILES) the setup Job installs for the role when it runs the
            base image; None when it runs an image of your own.
        base_image: baseImage, or the region's (constants.regional_runtime).
        package_index: packageIndex, or the region's.
        registry_server: the registry the pull Secret logs in to: registryCredentials.server,
            or the host of imageRegistry.
        replicas: one chief beside ps.number ps and worker.number workers.
        ports: task type -> gRPC port (the chief listens on worker.port).
        cluster_identifier: with kubeconfig, clusterIdentifier or the API server URL of the
            kubeconfig's current context; None without kubeconfig, or when it names no server.
        cluster_identifier_error: why the kubeconfig names no server (a rule reports it).
        network_plugin: the plugin of the cluster the stack creates: cluster.networkPlugin, else
            the one its state records for the cluster it already created, else
            NEW_CLUSTER_NETWORK_PLUGIN; None when the stack creates no cluster.
        nas_storage_type: likewise nas.storageType, the state's file system, NEW_NAS_STORAGE_TYPE;
            None when the stack creates no NAS file system.
        deployed: what the stack's state holds (empty when it was not read or holds nothing).
        state_read: whether the state was read (``deployed`` is then what it holds).
        state_error: why the state could not be read, when an unset key needed it (a rule
            reports it).
    """

    cpu_image: str
    worker_image: str
    tensorboard_image: str
    registry_server: str
    cpu_packages: str | None
    worker_packages: str | None
    tensorboard_packages: str | None
    base_image: str
    package_index: str
    replicas: cs.Replicas
    ports: Mapping[str, int]
    cluster_identifier: str | None
    cluster_identifier_error: str | None
    network_plugin: str | None = None
    nas_storage_type: str | None = None
    deployed: Deployed = Deployed()
    state_read: bool = False
    state_error: str | None = None


def creates_cluster(c: Config) -> bool:
    """Whether the stack creates the ACK cluster: no kubeconfig and no cluster.id."""
    return c.kubeconfig is None and c.cluster.id is None


def creates_file_system(c: Config) -> bool:
    """Whether the stack creates a NAS file system: cloud mode on NAS, neither
    nas.mountTargetDomain nor nas.fileSystemId naming an existing one."""
    return (
        c.kubeconfig is None
        and c.volume.type == "nas"
        and c.nas.mount_target_domain is None
        and c.nas.file_system_id is None
    )


def _fixed_choices(c: Config, read_deployed: Callable[[], Deployed]) -> dict[str, Any]:
    """network_plugin, nas_storage_type, deployed and state_error of ``Resolved``: the state is
    read only when an unset key of a resource the stack creates needs it."""
    plugin = c.cluster.network_plugin if creates_cluster(c) else None
    storage_type = c.nas.storage_type if creates_file_system(c) else None
    deployed, error, state_read = Deployed(), None, False
    if (creates_cluster(c) and plugin is None) or (creates_file_system(c) and storage_type is None):
        try:
            deployed, state_read = read_deployed(), True
        except StateUnreadable as why:
            error = str(why)
    if creates_cluster(c) and plugin is None:
        plugin = deployed.network_plugin or NEW_CLUSTER_NETWORK_PLUGIN
    if creates_file_system(c) and storage_type is None:
        storage_type = deployed.nas_storage_type or NEW_NAS_STORAGE_TYPE
    return {
        "network_plugin": plugin,
        "nas_storage_type": storage_type,
        "deployed": deployed,
        "state_read": state_read,
        "state_error": error,
    }


def _images(c: Config, region: str | None) -> dict[str, Any]:
    """The images and package sets of ``Resolved``: each role runs the image of its key, else
    the one built from docker/ under imageRegistry, else the base image with its package set."""
    registry = c.image_registry
    base_image, index = regional_runtime(region)
    base_image = c.base_image or base_image

    def own(image: str | None, tag: str) -> str | None:
        return image or (f"{registry}/{tag}" if registry else None)

    cpu = own(c.ps.image, TRAINER_CPU_TAG)
    gpu = c.worker.gpu_count > 0
    worker = own(c.worker.image, TRAINER_GPU_TAG) if gpu else c.worker.image or cpu
    board = own(c.tensorboard.image, TENSORBOARD_TAG)
    return {
        "cpu_image": cpu or base_image,
        "worker_image": worker or base_image,
        "tensorboard_image": board or base_image,
        "cpu_packages": None if cpu else "cpu",
        "worker_packages": None if worker else ("gpu" if gpu else "cpu"),
        "tensorboard_packages": None if board else "tensorboard",
        "base_image": base_image,
        "package_index": c.package_index or index,
        "registry_server": c.registry_credentials.server or image_host(registry or base_image),
    }


def resolve(
    c: Config, read_deployed: Callable[[], Deployed] = Deployed, region: str | None = None
) -> Resolved:
    """The values that come from several keys, for the rules and ``assemble``.

    Args:
        read_deployed: what the stack's state holds (deployed.read_deployed through the engine;
            raises StateUnreadable); called at most once, and only while cluster.networkPlugin or
            nas.storageType is unset for a resource the stack creates. The default: nothing.
        region: alicloud:region (or ALICLOUD_REGION), which picks the base image and the
            package index while baseImage and packageIndex are unset; None: no region.
    """
    identifier: str | None = None
    error: str | None = None
    if c.kubeconfig is not None:
        identifier = c.cluster_identifier
        if identifier is None:
            try:
                identifier = kubeconfig_server(c.kubeconfig)
            except ValueError as why:
                error = str(why)
    return Resolved(
        **_images(c, region),
        replicas=cs.Replicas(chief=1, worker=c.worker.number, ps=c.ps.number),
        ports={"chief": c.worker.port, "worker": c.worker.port, "ps": c.ps.port},
        cluster_identifier=identifier,
        cluster_identifier_error=error,
        **_fixed_choices(c, read_deployed),
    )


def assemble(c: Config, resolved: Resolved, secrets: frozenset[str], stack: str) -> Settings:
    """The Settings of a configuration that passed every rule; ``secrets``: the secret-capable
    keys set with ``--secret``."""
    training = _training(c, resolved)
    return Settings(
        **{f.name: getattr(c, f.name) for f in dataclasses.fields(Config)},
        project=PROJECT,
        stack=stack,
        target=_target(c, resolved, training),
        storage=StorageSettings(
            nas_storage_type=resolved.nas_storage_type,
            nas_deployed=resolved.deployed.nas_storage_type is not None if resolved.state_read else None,
            path=_volume_path(c),
        ),
        training=training,
        tensorboard_image=ImageSettings(
            resolved.tensorboard_image,
            pull_policy(c.ps.image_pull_policy, resolved.tensorboard_image),
            resolved.tensorboard_packages,
        ),
        registry=_registry(c, resolved),
        runtime=_runtime(resolved, c.ps.image_pull_policy),
        placement=_placement(c, training.chief_uses_gpu),
        secret_keys=secrets,
    )


def _volume_path(c: Config) -> str:
    """The directory the PV mounts: nas.path, nfs.path or hostPath.path, by volume type."""
    path = {"nas": c.nas.path, "nfs": c.nfs.path, "hostPath": c.host_path.path}[c.volume.type]
    assert path is not None, "the rules require nfs.path with persistence.volume.type nfs"
    return path


def _training(c: Config, resolved: Resolved) -> TrainingSettings:
    # With ps.number 0 the chief is one of the synchronous replicas (MultiWorkerMirroredStrategy),
    # whose collectives refuse a group mixing CPU and GPU devices: it then runs like a worker.
    chief_uses_gpu = c.ps.number == 0 and c.worker.gpu_count > 0
    ps = TaskSettings(
        resolved.cpu_image,
        pull_policy(c.ps.image_pull_policy, resolved.cpu_image),
        resolved.cpu_packages,
        port=c.ps.port,
        cpu=c.ps.cpu,
        memory=c.ps.memory,
    )
    worker = TaskSettings(
        resolved.worker_image,
        pull_policy(c.worker.image_pull_policy, resolved.worker_image),
        resolved.worker_packages,
        port=c.worker.port,
        cpu=c.worker.cpu,
        memory=c.worker.memory,
        gpus=c.worker.gpu_count,
    )
    # A CPU chief runs the ps image and resources, on the workers' port.
    chief = worker if chief_uses_gpu else dataclasses.replace(ps, port=c.worker.port)
    return TrainingSettings(
        replicas=resolved.replicas,
        ports=resolved.ports,
        chief=chief,
        worker=worker,
        ps=ps,
        chief_uses_gpu=chief_uses_gpu,
        staging_image=resolved.cpu_image,
        hyperparams=c.hyperparams,
        job=c.job,
        data=c.data,
        monitor=c.monitor,
    )


def _runtime(resolved: Resolved, pull: str | None) -> RuntimeSettings:
    """The base image and the package sets of the roles that run it (a GPU chief's are the
    workers', a CPU chief's and staging's the ps')."""
    used = {resolved.cpu_packages, resolved.worker_packages, resolved.tensorboard_packages}
    return RuntimeSettings(
        base_image=resolved.base_image,
        image_pull_policy=pull_policy(pull, resolved.base_image),
        package_index=resolved.package_index,
        package_sets=tuple(s for s in PACKAGE_FILES if s in used),
    )


def _target(c: Config, resolved: Resolved, training: TrainingSettings) -> TargetSettings:
    gpu_nodes = c.gpu_pool.size
    if gpu_nodes is None:
        gpu_pods = c.worker.number + (1 if training.chief_uses_gpu else 0)
        gpu_nodes = max(1, math.ceil(gpu_pods * c.worker.gpu_count / c.gpu_pool.gpus_per_instance))
    create_cloud = c.kubeconfig is None
    return TargetSettings(
        create_cloud=create_cloud,
        identifier=resolved.cluster_identifier,
        identifier_from_kubeconfig=c.kubeconfig is not None and c.cluster_identifier is None,
        network_plugin=resolved.network_plugin,
        deployed_network_plugin=resolved.deployed.network_plugin,
        gpu_nodes=gpu_nodes,
        creates_pod_vswitch=create_cloud
        and c.cluster.id is None
        and resolved.network_plugin == "terway"
        and c.cluster.pod_vswitch_id is None,
    )


def _registry(c: Config, resolved: Resolved) -> RegistrySettings:
    username, password = c.registry_credentials.username, c.registry_credentials.password
    credentials: RegistryCredentials | None = None
    if username is not None and password is not None:
        # The rules made sure that some image comes from this server.
        credentials = RegistryCredentials(resolved.registry_server, username, password)
    pull_secret = c.image_pull_secret or (f"{c.name_prefix}-registry" if username or password else None)
    return RegistrySettings(image_pull_secret=pull_secret, credentials=credentials)


def _placement(c: Config, chief_uses_gpu: bool) -> dict[str, Placement]:
    """Role -> Placement: the staging Job takes the chief.* keys, a GPU chief the workers'."""
    placement = {
        role: Placement(dict(section.node_selector), tuple(section.tolerations))
        for role, section in (
            ("chief", c.chief),
            ("worker", c.worker),
            ("ps", c.ps),
            ("tensorboard", c.tensorboard),
        )
    }
    placement["stage-data"] = placement["chief"]
    if chief_uses_gpu:
        placement["chief"] = placement["worker"]
    return placement
