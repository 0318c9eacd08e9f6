"""The derive phases: what several keys give together, before the rules check it (``resolve``)
and once they passed (``assemble``: the Settings)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from infra.bundle import PACKAGE_FILES
from infra.settings.deployed import Deployed
from infra.settings.images import pull_policy
from infra.settings.key_values import (
    DEFAULT_NAMESPACE,
    NEW_CLUSTER_NETWORK_PLUGIN,
    NEW_NAS_STORAGE_TYPE,
    PROJECT,
    TENSORBOARD_TAG,
    TRAINER_CPU_TAG,
    TRAINER_GPU_TAG,
    regional_runtime,
)
from infra.settings.keys import PLACEMENT_ROLES, SECRET_CAPABLE_KEYS
from infra.settings.kubeconfig import kubeconfig_server
from infra.settings.model import (
    ClusterSettings,
    Placement,
    PodIdentity,
    RegistryCredentials,
    RegistrySettings,
    RuntimeSettings,
    Settings,
    StorageSettings,
    TaskSettings,
    TensorBoardSettings,
    TrainingSettings,
    section,
)
from infra.settings.parsers import image_host
from infra.settings.read import Reading
from infra.stack_state import StateUnreadable
from trainer.contract import cluster_spec as cs
from trainer.contract import recipe


@dataclass(frozen=True)
class Resolved:
    """Values worked out from several keys (or the kubeconfig file), which some rules check.

    Resolved from ``Reading.values``, that is with a bad key's default in its place.

    Attributes:
        cpu_image: ps.image, or <imageRegistry>/trainer:<version>-cpu, or without imageRegistry
            the base image; also the chief's (on CPUs) and the staging Job's.
        worker_image: worker.image, or the GPU trainer image (the CPU one with worker.gpuCount 0).
        tensorboard_image: tensorboard.image, or <imageRegistry>/tensorboard:<version>, or the
            base image.
        cpu_packages, worker_packages, tensorboard_packages: the package set (a key of
            infra/bundle.py PACKAGE_FILES) the setup Job installs for the role when it runs the
            base image; None when it runs an image of your own.
        base_image: baseImage, or the region's (key_values.regional_runtime).
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


def creates_cluster(values: Mapping[str, Any]) -> bool:
    """Whether the stack creates the ACK cluster: no kubeconfig and no cluster.id."""
    return values["kubeconfig"] is None and values["cluster.id"] is None


def creates_file_system(values: Mapping[str, Any]) -> bool:
    """Whether the stack creates a NAS file system: cloud mode on NAS, neither
    nas.mountTargetDomain nor nas.fileSystemId naming an existing one."""
    return (
        values["kubeconfig"] is None
        and values["persistence.volume.type"] == "nas"
        and values["nas.mountTargetDomain"] is None
        and values["nas.fileSystemId"] is None
    )


def _fixed_choices(values: Mapping[str, Any], read_deployed: Callable[[], Deployed]) -> dict[str, Any]:
    """network_plugin, nas_storage_type, deployed and state_error of ``Resolved``: the state is
    read only when an unset key of a resource the stack creates needs it."""
    plugin = values["cluster.networkPlugin"] if creates_cluster(values) else None
    storage_type = values["nas.storageType"] if creates_file_system(values) else None
    deployed, error, state_read = Deployed(), None, False
    if (creates_cluster(values) and plugin is None) or (creates_file_system(values) and storage_type is None):
        try:
            deployed, state_read = read_deployed(), True
        except StateUnreadable as why:
            error = str(why)
    if creates_cluster(values) and plugin is None:
        plugin = deployed.network_plugin or NEW_CLUSTER_NETWORK_PLUGIN
    if creates_file_system(values) and storage_type is None:
        storage_type = deployed.nas_storage_type or NEW_NAS_STORAGE_TYPE
    return {
        "network_plugin": plugin,
        "nas_storage_type": storage_type,
        "deployed": deployed,
        "state_read": state_read,
        "state_error": error,
    }


def _images(values: Mapping[str, Any], region: str | None) -> dict[str, Any]:
    """The images and package sets of ``Resolved``: each role runs the image of its key, else
    the one built from docker/ under imageRegistry, else the base image with its package set."""
    registry = values["imageRegistry"]
    base_image, index = regional_runtime(region)
    base_image = values["baseImage"] or base_image

    def own(key: str, tag: str) -> str | None:
        return values[key] or (f"{registry}/{tag}" if registry else None)

    cpu = own("ps.image", TRAINER_CPU_TAG)
    gpu = values["worker.gpuCount"] > 0
    worker = own("worker.image", TRAINER_GPU_TAG) if gpu else values["worker.image"] or cpu
    board = own("tensorboard.image", TENSORBOARD_TAG)
    return {
        "cpu_image": cpu or base_image,
        "worker_image": worker or base_image,
        "tensorboard_image": board or base_image,
        "cpu_packages": None if cpu else "cpu",
        "worker_packages": None if worker else ("gpu" if gpu else "cpu"),
        "tensorboard_packages": None if board else "tensorboard",
        "base_image": base_image,
        "package_index": values["packageIndex"] or index,
        "registry_server": values["registryCredentials.server"] or image_host(registry or base_image),
    }


def resolve(
    values: Mapping[str, Any], read_deployed: Callable[[], Deployed] = Deployed, region: str | None = None
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
    if values["kubeconfig"] is not None:
        identifier = values["clusterIdentifier"]
        if identifier is None:
            try:
                identifier = kubeconfig_server(values["kubeconfig"])
            except ValueError as why:
                error = str(why)
    return Resolved(
        **_images(values, region),
        replicas=cs.Replicas(chief=1, worker=values["worker.number"], ps=values["ps.number"]),
        ports={"chief": values["worker.port"], "worker": values["worker.port"], "ps": values["ps.port"]},
        cluster_identifier=identifier,
        cluster_identifier_error=error,
        **_fixed_choices(values, read_deployed),
    )


def creates_namespace(values: Mapping[str, Any]) -> bool:
    """Whether the stack creates its namespace: createNamespace, or, unset, whether the namespace
    is the stack's own default (keys.DEFAULT_NAMESPACE), which no other stack shares unless it is
    told to (infra/ownership.py refuses a namespace another stack created)."""
    create = values["createNamespace"]
    return values["namespace"] == DEFAULT_NAMESPACE if create is None else bool(create)


def assemble(reading: Reading, resolved: Resolved, stack: str) -> Settings:
    """The Settings of a configuration that passed every rule."""
    v = reading.values
    training = _training(v, resolved)
    return section(
        Settings,
        v,
        project=PROJECT,
        stack=stack,
        create_namespace=creates_namespace(v),
        cluster=_cluster(v, resolved, training),
        storage=section(
            StorageSettings,
            v,
            nas_storage_type=resolved.nas_storage_type,
            nas_deployed=resolved.deployed.nas_storage_type is not None if resolved.state_read else None,
        ),
        pods=section(PodIdentity, v),
        training=training,
        tensorboard=section(
            TensorBoardSettings,
            v,
            image=resolved.tensorboard_image,
            image_pull_policy=pull_policy(v["ps.imagePullPolicy"], resolved.tensorboard_image),
            packages=resolved.tensorboard_packages,
        ),
        registry=_registry(v, resolved),
        runtime=_runtime(resolved, v["ps.imagePullPolicy"]),
        placement=_placement(v, training.chief_uses_gpu),
        secret_keys=frozenset(reading.secrets & set(SECRET_CAPABLE_KEYS)),
    )


def _training(v: Mapping[str, Any], resolved: Resolved) -> TrainingSettings:
    # With ps.number 0 the chief is one of the synchronous replicas (MultiWorkerMirroredStrategy),
    # whose collectives refuse a group mixing CPU and GPU devices: it then runs like a worker.
    chief_uses_gpu = v["ps.number"] == 0 and v["worker.gpuCount"] > 0
    ps = TaskSettings(
        resolved.cpu_image,
        pull_policy(v["ps.imagePullPolicy"], resolved.cpu_image),
        v["ps.port"],
        v["ps.cpu"],
        v["ps.memory"],
        resolved.cpu_packages,
    )
    worker = TaskSettings(
        resolved.worker_image,
        pull_policy(v["worker.imagePullPolicy"], resolved.worker_image),
        v["worker.port"],
        v["worker.cpu"],
        v["worker.memory"],
        resolved.worker_packages,
    )
    # A CPU chief runs the ps image and resources, on the workers' port.
    chief = worker if chief_uses_gpu else replace(ps, port=v["worker.port"])
    return section(
        TrainingSettings,
        v,
        replicas=resolved.replicas,
        ports=resolved.ports,
        chief=chief,
        worker=worker,
        ps=ps,
        chief_uses_gpu=chief_uses_gpu,
        staging_image=resolved.cpu_image,
        recipe={row.dest: v[row.key] for row in recipe.HYPERPARAMETERS},
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


def _cluster(v: Mapping[str, Any], resolved: Resolved, training: TrainingSettings) -> ClusterSettings:
    gpu_pool_size = v["gpuPool.size"]
    if gpu_pool_size is None:
        gpu_pods = v["worker.number"] + (1 if training.chief_uses_gpu else 0)
        gpu_pool_size = max(1, math.ceil(gpu_pods * v["worker.gpuCount"] / v["gpuPool.gpusPerInstance"]))
    return section(
        ClusterSettings,
        v,
        identifier=resolved.cluster_identifier,
        identifier_from_kubeconfig=v["kubeconfig"] is not None and v["clusterIdentifier"] is None,
        gpu_pool_size=gpu_pool_size,
        network_plugin=resolved.network_plugin,
        deployed_network_plugin=resolved.deployed.network_plugin,
    )


def _registry(v: Mapping[str, Any], resolved: Resolved) -> RegistrySettings:
    username, password = v["registryCredentials.username"], v["registryCredentials.password"]
    credentials: RegistryCredentials | None = None
    if username is not None and password is not None:
        # The rules made sure that some image comes from this server.
        credentials = RegistryCredentials(resolved.registry_server, username, password)
    pull_secret = v["imagePullSecret"] or (f"{v['namePrefix']}-registry" if username or password else None)
    return RegistrySettings(image_pull_secret=pull_secret, credentials=credentials)


def _placement(v: Mapping[str, Any], chief_uses_gpu: bool) -> dict[str, Placement]:
    """Role -> Placement: the staging Job takes the chief.* keys, a GPU chief the workers'."""
    placement = {
        role: Placement(dict(v[f"{role}.nodeSelector"]), tuple(v[f"{role}.tolerations"]))
        for role in PLACEMENT_ROLES
    }
    placement["stage-data"] = placement["chief"]
    if chief_uses_gpu:
        placement["chief"] = placement["worker"]
    return placement
