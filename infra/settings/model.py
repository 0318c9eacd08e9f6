"""The validated settings: frozen dataclasses that the program and its components read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from trainer import cluster_spec as cs

@dataclass(frozen=True)
class TaskSettings:
    """One task type's container settings (image already resolved)."""

    image: str
    image_pull_policy: str
    port: int
    cpu: str
    memory: str


@dataclass(frozen=True)
class Placement:
    """Where one role's pods may run: ``<role>.nodeSelector`` and ``<role>.tolerations``.

    Attributes:
        node_selector: node label -> value (pod spec nodeSelector); empty = any node.
        tolerations: core/v1 Toleration objects, camelCase fields as Kubernetes spells them.
            The GPU pool's taint toleration is not among them: the training component adds
            it to every pod that requests a GPU.
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RegistryCredentials:
    """Login for the pull Secret the stack creates (registryCredentials.*).

    Never printed: ``repr`` leaves the fields out, and the program passes them to Kubernetes
    only inside ``pulumi.Output.secret``.
    """

    server: str = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)


@dataclass(frozen=True)
class Settings:
    """The validated configuration of one stack.

    ``replicas`` always has one chief (the coordinator) beside ``ps.number`` ps and
    ``worker.number`` workers (team contract).
    """

    project: str
    stack: str
    name_prefix: str
    namespace: str
    create_namespace: bool
    replicas: cs.Replicas
    worker: TaskSettings
    gpu_count: int
    ps: TaskSettings
    chief: TaskSettings
    staging_image: str
    epochs: int
    batch_size: int
    learning_rate: float
    mount_path: str
    #: staging source (``trainer.stage --source``); None = the sample in the trainer image.
    data_source: Optional[str]
    storage: str
    match_labels: Mapping[str, str]
    tensorboard_image: str
    tensorboard_service_type: str
    tensorboard_address_type: str
    tensorboard_source_ranges: tuple[str, ...]
    backoff_limit: int
    wait_for_chief: bool
    wait_timeout_minutes: int
    #: job.activeDeadlineSeconds of every training Job; None = no deadline.
    active_deadline_seconds: Optional[int]
    #: trainer --peer_timeout of every task, seconds.
    peer_timeout_seconds: int
    #: PriorityClass of the training and staging pods; None = the cluster's default.
    priority_class_name: Optional[str]
    #: role (chief, worker, ps, tensorboard, stage-data) -> Placement, resolved: a GPU chief
    #: has the workers' placement, the staging Job the chief.* keys' (see KEYS).
    placement: Mapping[str, Placement]
    #: Whether the chief trains on GPUs like the workers (ps.number 0, worker.gpuCount > 0):
    #: MultiWorkerMirroredStrategy's collectives refuse a group mixing CPU and GPU devices.
    chief_uses_gpu: bool
    #: docker-registry Secret every pod pulls with; None = the nodes' own credentials.
    image_pull_secret: Optional[str]
    #: When set, the stack creates ``image_pull_secret`` from these.
    registry_credentials: Optional[RegistryCredentials]
    #: persistence.volume.type: nas, nfs or hostPath.
    volume_type: str
    nfs_server: Optional[str]
    nfs_path: Optional[str]
    host_path: str
    # cloud
    create_cloud: bool
    zone: Optional[str]
    vpc_id: Optional[str]
    vpc_cidr: str
    vswitch_id: Optional[str]
    vswitch_cidr: str
    cluster_id: Optional[str]
    cluster_version: Optional[str]
    pod_cidr: str
    service_cidr: str
    api_server_public: bool
    kubeconfig: Optional[str]
    #: The kubernetes provider's cluster_identifier in kubeconfig mode (clusterIdentifier,
    #: or the API server URL of the kubeconfig's current context); None in cloud mode.
    cluster_identifier: Optional[str]
    #: Whether cluster_identifier was read from the kubeconfig (not set as clusterIdentifier).
    cluster_identifier_from_kubeconfig: bool
    gpu_instance_types: tuple[str, ...]
    gpus_per_instance: int
    gpu_pool_size: int
    gpu_autoscaling: bool
    gpu_system_disk_category: str
    gpu_system_disk_size: int
    cpu_instance_types: tuple[str, ...]
    cpu_pool_size: int
    cpu_system_disk_category: str
    key_name: Optional[str]
    nas_storage_type: str
    nas_retain: bool
    nas_path: str
    nas_mount_target_domain: Optional[str]
    ports: Mapping[str, int] = field(default_factory=dict)
    #: Keys (of SECRET_CAPABLE_KEYS) set with ``--secret``: the program wraps them in
    #: ``pulumi.Output.secret``.
    secret_keys: frozenset[str] = frozenset()

    @property
    def data_dir(self) -> str:
        """Where staging puts MNIST and the trainer reads it (team contract)."""
        return f"{self.mount_path}/mnist"

    @property
    def log_dir(self) -> str:
        """Trainer --log_dir and TensorBoard --logdir (team contract)."""
        return f"{self.mount_path}/runs/{self.name_prefix}"

    def uses_gpu(self, task_type: str) -> bool:
        """Whether ``task_type``'s pods request GPUs: workers with worker.gpuCount > 0, and
        then the chief too when it trains with them (``chief_uses_gpu``)."""
        return self.gpu_count > 0 and (task_type == "worker" or (task_type == "chief" and self.chief_uses_gpu))

    @property
    def uses_gpu_pool(self) -> bool:
        return self.gpu_count > 0 and self.create_node_pools

    @property
    def create_node_pools(self) -> bool:
        return self.kubeconfig is None
