"""The derive phase: what several keys give together (``model.Derived``), worked out before the
rules, which check some of it, and kept in the Settings once they pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from infra.bundle import PACKAGE_FILES, regional_runtime
from infra.deployed import NEW_CLUSTER_NETWORK_PLUGIN, NEW_NAS_STORAGE_TYPE, Deployed
from infra.kubeconfig import kubeconfig_server
from infra.pull_policy import pull_policy
from infra.settings.config import Config
from infra.settings.constants import TENSORBOARD_TAG, TRAINER_CPU_TAG, TRAINER_GPU_TAG
from infra.settings.model import (
    Derived,
    ImageSettings,
    RuntimeSettings,
    TargetSettings,
    TaskSettings,
    TrainingSettings,
)
from infra.stack_state import StateUnreadable
from infra.values.parsers import image_host
from trainer.contract import cluster_spec as cs


def derive(c: Config, read_deployed: Callable[[], Deployed] = Deployed, region: str | None = None) -> Derived:
    """What several keys give together, for the rules and the Settings.

    Args:
        read_deployed: what the stack's state holds (deployed.read_deployed through the engine;
            raises StateUnreadable); called at most once, and only while cluster.networkPlugin or
            nas.storageType is unset for a resource the stack creates. The default: nothing.
        region: alicloud:region (or ALICLOUD_REGION), which picks the base image and the
            package index while baseImage and packageIndex are unset; None: no region.
    """
    base_image, index = regional_runtime(region)
    base_image = c.base_image or base_image
    registry = c.image_registry

    def own(image: str | None, tag: str) -> str | None:
        """A role's image of your own: its key, else the one built from docker/ under imageRegistry."""
        return image or (f"{registry}/{tag}" if registry else None)

    def role(image: str | None, packages: str, policy: str | None) -> ImageSettings:
        """A role's image, else the base image with ``packages``; its pull policy."""
        chosen = image or base_image
        return ImageSettings(chosen, pull_policy(policy, chosen), None if image else packages)

    gpu = c.worker.gpu_count > 0
    cpu = role(own(c.ps.image, TRAINER_CPU_TAG), "cpu", c.ps.image_pull_policy)
    worker_image = (
        own(c.worker.image, TRAINER_GPU_TAG) if gpu else c.worker.image or own(c.ps.image, TRAINER_CPU_TAG)
    )
    worker = role(worker_image, "gpu" if gpu else "cpu", c.worker.image_pull_policy)
    board = role(own(c.tensorboard.image, TENSORBOARD_TAG), "tensorboard", c.ps.image_pull_policy)
    used = {cpu.packages, worker.packages, board.packages}
    return Derived(
        target=_target(c, read_deployed),
        training=_training(c, cpu, worker),
        tensorboard_image=board,
        registry_server=c.registry_credentials.server or image_host(registry or base_image),
        runtime=RuntimeSettings(
            base_image=base_image,
            image_pull_policy=pull_policy(c.ps.image_pull_policy, base_image),
            package_index=c.package_index or index,
            package_sets=tuple(s for s in PACKAGE_FILES if s in used),
        ),
    )


def _training(c: Config, cpu: ImageSettings, worker: ImageSettings) -> TrainingSettings:
    """The tasks: a CPU chief runs the ps image and resources on the workers' port; with ps.number
    0 the chief is one of the synchronous replicas (MultiWorkerMirroredStrategy), whose collectives
    refuse a group mixing CPU and GPU devices: it then runs like a worker."""
    chief_uses_gpu = c.ps.number == 0 and c.worker.gpu_count > 0
    ps_task = TaskSettings(**dataclasses.asdict(cpu), port=c.ps.port, cpu=c.ps.cpu, memory=c.ps.memory)
    worker_task = TaskSettings(
        **dataclasses.asdict(worker),
        port=c.worker.port,
        cpu=c.worker.cpu,
        memory=c.worker.memory,
        gpus=c.worker.gpu_count,
    )
    return TrainingSettings(
        replicas=cs.Replicas(chief=1, worker=c.worker.number, ps=c.ps.number),
        ports={"chief": c.worker.port, "worker": c.worker.port, "ps": c.ps.port},
        chief=worker_task if chief_uses_gpu else dataclasses.replace(ps_task, port=c.worker.port),
        worker=worker_task,
        ps=ps_task,
        chief_uses_gpu=chief_uses_gpu,
        hyperparams=c.hyperparams,
        job=c.job,
        data=c.data,
        monitor=c.monitor,
        gang=c.scheduling.gang,
    )


def _target(c: Config, read_deployed: Callable[[], Deployed]) -> TargetSettings:
    """The cluster: its identity with a kubeconfig; the network plugin and NAS type of what the
    stack creates, from their keys, else from the stack's state (read only when an unset key of
    a resource the stack creates needs it), else today's default for a new resource."""
    identifier, identifier_error = c.cluster_identifier, None
    if c.kubeconfig is not None and identifier is None:
        try:
            identifier = kubeconfig_server(c.kubeconfig)
        except ValueError as why:
            identifier_error = str(why)
    plugin = c.cluster.network_plugin if c.creates_cluster else None
    storage_type = c.nas.storage_type if c.creates_file_system else None
    deployed, state_error, state_read = Deployed(), None, False
    if (c.creates_cluster and plugin is None) or (c.creates_file_system and storage_type is None):
        try:
            deployed, state_read = read_deployed(), True
        except StateUnreadable as why:
            state_error = str(why)
    if c.creates_cluster and plugin is None:
        plugin = deployed.network_plugin or NEW_CLUSTER_NETWORK_PLUGIN
    if c.creates_file_system and storage_type is None:
        storage_type = deployed.nas_storage_type or NEW_NAS_STORAGE_TYPE
    return TargetSettings(
        identifier=identifier if c.kubeconfig is not None else None,
        identifier_error=identifier_error,
        network_plugin=plugin,
        deployed_network_plugin=deployed.network_plugin,
        creates_pod_vswitch=c.creates_cluster and plugin == "terway" and c.cluster.pod_vswitch_id is None,
        nas_storage_type=storage_type,
        nas_deployed=deployed.nas_storage_type is not None if state_read else None,
        state_error=state_error,
    )
