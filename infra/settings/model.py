"""The validated settings: ``Settings`` and its sections, frozen dataclasses the program reads.

A section field that holds one key's value as parsed is declared with ``from_key``
(``port: int = from_key("worker.port")``) and filled by ``section``; the other
fields are worked out from several keys (infra/settings/derive.py). The sections that hold
such fields take keyword arguments only, so that their fields keep the order that reads best.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from infra.settings import runs
from trainer.contract import cluster_spec as cs
from trainer.contract import recipe

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: The field metadata entry that names a field's key.
KEY = "key"

T = TypeVar("T", bound="DataclassInstance")


def from_key(name: str) -> Any:
    """A section field holding key ``name``'s parsed value (its default when unset)."""
    return field(metadata={KEY: name})


def section(cls: type[T], values: Mapping[str, Any], **derived: Any) -> T:
    """Section ``cls`` with each ``from_key`` field taken from ``values`` (key -> parsed value;
    a map is copied) and every other field from ``derived``.

    Raises:
        KeyError: a ``from_key`` names no key of ``values``.
        TypeError: ``derived`` misses a field, or names one that is not a field of ``cls``.
    """
    keyed = {f.name: values[f.metadata[KEY]] for f in fields(cls) if KEY in f.metadata}
    return cls(
        **{name: dict(value) if isinstance(value, Mapping) else value for name, value in keyed.items()},
        **derived,
    )


@dataclass(frozen=True)
class TaskSettings:
    """One task type's container settings, the image and its pull policy resolved
    (derive.py; infra/settings/images.py: pull_policy)."""

    image: str
    image_pull_policy: str
    port: int
    cpu: str
    memory: str
    #: The package set the pods load from the volume (infra/bundle.py PACKAGE_FILES) when
    #: ``image`` is the base image; None: an image of your own, which holds code and packages.
    packages: str | None = None
    #: The reference as configured when ``image`` is the digest `pulumi up` resolved its tag to
    #: (infra/image_pins.py); None: ``image`` is as configured.
    configured_image: str | None = None

    @property
    def reference(self) -> str:
        """The image as configured (a tag stays a tag): what the run key holds."""
        return self.configured_image or self.image


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


@dataclass(frozen=True, kw_only=True)
class ClusterSettings:
    """The cluster the stack deploys into: one it creates, or the one a kubeconfig names.

    Without ``kubeconfig`` the stack creates the cloud layer (``create_cloud``): a network
    (or uses vswitch.id), an ACK cluster (or uses cluster.id), its node pools and NAS. The
    other fields (zone, vpc.*, vswitch.*, cluster.*, gpuPool.*, cpuPool.*, nodePools.*) shape
    that layer and are not read with a kubeconfig.
    """

    kubeconfig: str | None = from_key("kubeconfig")
    #: The kubernetes provider's cluster_identifier with a kubeconfig: clusterIdentifier, or
    #: the API server URL of the kubeconfig's current context; None without one.
    identifier: str | None
    #: Whether ``identifier`` was read from the kubeconfig (not set as clusterIdentifier).
    identifier_from_kubeconfig: bool
    zone: str | None = from_key("zone")
    vpc_id: str | None = from_key("vpc.id")
    vpc_cidr: str = from_key("vpc.cidr")
    vswitch_id: str | None = from_key("vswitch.id")
    vswitch_cidr: str = from_key("vswitch.cidr")
    cluster_id: str | None = from_key("cluster.id")
    version: str | None = from_key("cluster.version")
    #: The plugin of the cluster the stack creates (flannel or terway): cluster.networkPlugin, else
    #: the one the stack's state records, else terway; None when it creates no cluster.
    network_plugin: str | None
    #: The plugin of the cluster in the stack's state, when it holds one (and was read).
    deployed_network_plugin: str | None
    pod_cidr: str = from_key("cluster.podCidr")
    #: A new Terway cluster's existing pod vSwitch; None = the stack creates one of
    #: ``pod_vswitch_cidr`` (see ``creates_pod_vswitch``).
    pod_vswitch_id: str | None = from_key("cluster.podVswitchId")
    pod_vswitch_cidr: str = from_key("cluster.podVswitchCidr")
    service_cidr: str = from_key("cluster.serviceCidr")
    api_server_public: bool = from_key("cluster.apiServerPublic")
    credential_minutes: int = from_key("cluster.credentialMinutes")
    gpu_instance_types: tuple[str, ...] = from_key("gpuPool.instanceTypes")
    gpus_per_instance: int = from_key("gpuPool.gpusPerInstance")
    #: gpuPool.size, or as many nodes as the GPU pods need (see its Key).
    gpu_pool_size: int
    gpu_autoscaling: bool = from_key("gpuPool.autoscaling")
    gpu_system_disk_category: str = from_key("gpuPool.systemDiskCategory")
    gpu_system_disk_size: int = from_key("gpuPool.systemDiskSize")
    #: The NVIDIA driver of new GPU nodes (ACK's node pool label); None = ACK's default.
    gpu_driver_version: str | None = from_key("gpuPool.driverVersion")
    gpu_image_type: str = from_key("gpuPool.imageType")
    cpu_instance_types: tuple[str, ...] = from_key("cpuPool.instanceTypes")
    cpu_pool_size: int = from_key("cpuPool.size")
    cpu_system_disk_category: str = from_key("cpuPool.systemDiskCategory")
    key_name: str | None = from_key("nodePools.keyName")

    @property
    def create_cloud(self) -> bool:
        """Whether the stack creates the cloud layer: when no kubeconfig names a cluster."""
        return self.kubeconfig is None

    @property
    def creates_pod_vswitch(self) -> bool:
        """Whether the stack creates a pod vSwitch: for a Terway cluster it creates (no
        cluster.id) without cluster.podVswitchId (the rules then made sure it creates the node
        vSwitch too, so the VPC is known)."""
        return (
            self.create_cloud
            and self.cluster_id is None
            and self.network_plugin == "terway"
            and self.pod_vswitch_id is None
        )


@dataclass(frozen=True, kw_only=True)
class StorageSettings:
    """The shared volume every pod mounts: persistence.*, mountPath, and the keys of its
    type (nas.*, nfs.*, hostPath.path; the rules refuse the other types' keys)."""

    mount_path: str = from_key("mountPath")
    #: The PV's capacity and the claim's request, as written ("5Gi").
    capacity: str = from_key("persistence.pvc.storage")
    match_labels: Mapping[str, str] = from_key("persistence.pvc.matchLabels")
    #: persistence.volume.type: nas, nfs or hostPath.
    volume_type: str = from_key("persistence.volume.type")
    #: The type of the NAS file system the stack creates: nas.storageType, else the one the
    #: stack's state records, else Capacity; None when it creates none.
    nas_storage_type: str | None
    #: Whether this stack's state holds the NAS file system it created; None when the state was
    #: not read (infra/nas_zones.py reads it then).
    nas_deployed: bool | None
    nas_zone_check: str = from_key("nas.zoneCheck")
    nas_retain_on_destroy: bool = from_key("nas.retainOnDestroy")
    nas_path: str = from_key("nas.path")
    nas_mount_target_domain: str | None = from_key("nas.mountTargetDomain")
    nas_file_system_id: str | None = from_key("nas.fileSystemId")
    nfs_server: str | None = from_key("nfs.server")
    nfs_path: str | None = from_key("nfs.path")
    host_path: str = from_key("hostPath.path")

    @property
    def path(self) -> str:
        """The directory the PV mounts: nas.path, nfs.path or hostPath.path, by volume type."""
        path = {"nas": self.nas_path, "nfs": self.nfs_path, "hostPath": self.host_path}[self.volume_type]
        assert path is not None, "the rules require nfs.path with persistence.volume.type nfs"
        return path


@dataclass(frozen=True, kw_only=True)
class PodIdentity:
    """The uid and gid of the pods that mount the volume (pods.*): the staging Job, the task
    Jobs and TensorBoard. Their fsGroup is ``run_as_group`` too, which NFS, hostPath and the
    NAS CSI driver (no fsGroupPolicy) ignore: the volume's directory must be writable by
    ``run_as_user`` itself (see infra/components/storage.py for what the stack does)."""

    run_as_user: int = from_key("pods.runAsUser")
    run_as_group: int = from_key("pods.runAsGroup")


@dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """The training run: its tasks, the trainer's flags and its Jobs' policy (worker.*, ps.*,
    hyperparams.*, job.*, monitor.*, data.source)."""

    #: One chief (the coordinator) beside ps.number ps and worker.number workers.
    replicas: cs.Replicas
    #: Task type -> gRPC port (the chief listens on worker.port).
    ports: Mapping[str, int]
    chief: TaskSettings
    worker: TaskSettings
    ps: TaskSettings
    #: nvidia.com/gpu of each pod that trains on GPUs (``uses_gpu``); 0 = none does.
    gpu_count: int = from_key("worker.gpuCount")
    #: Whether the chief trains on GPUs like the workers (ps.number 0, worker.gpuCount > 0):
    #: MultiWorkerMirroredStrategy's collectives refuse a group mixing CPU and GPU devices.
    chief_uses_gpu: bool
    #: The data-staging Job's image: the CPU trainer's (it pulls with ps.imagePullPolicy).
    staging_image: str
    #: worker.imagePullPolicy and ps.imagePullPolicy as set; None: derived from the image, and
    #: a tag is then resolved to its digest at `pulumi up` (infra/image_pins.py).
    worker_pull_policy: str | None = from_key("worker.imagePullPolicy")
    ps_pull_policy: str | None = from_key("ps.imagePullPolicy")
    #: ``trainer.stage --source``: a URL or path, a tuple of file URLs, or None = the sample in
    #: the trainer image.
    data_source: str | tuple[str, ...] | None = from_key("data.source")
    #: Seconds the staging pod may take to start before its Job fails (data.startTimeoutSeconds).
    staging_start_timeout_seconds: int = from_key("data.startTimeoutSeconds")
    #: The recipe: argparse dest -> parsed value, one per row of trainer/contract/recipe.py's
    #: table (``recipe["learning_rate"]`` is hyperparams.learningrate's value).
    recipe: Mapping[str, Any]
    backoff_limit: int = from_key("job.backoffLimit")
    wait_for_chief: bool = from_key("job.waitForChief")
    wait_timeout_minutes: int = from_key("job.waitTimeoutMinutes")
    #: activeDeadlineSeconds of every training Job; None = no deadline.
    active_deadline_seconds: int | None = from_key("job.activeDeadlineSeconds")
    #: The trainer's --peer_timeout, seconds.
    peer_timeout_seconds: int = from_key("job.peerTimeoutSeconds")
    #: PriorityClass of the training and staging pods; None = the cluster's default.
    priority_class_name: str | None = from_key("job.priorityClassName")
    #: Seconds a task pod may stay unschedulable before the run monitor ends the run; 0 = never.
    schedule_timeout_seconds: int = from_key("job.scheduleTimeoutSeconds")
    start_timeout_seconds: int = from_key("job.startTimeoutSeconds")
    #: The API server URL the run monitor calls; None = the in-cluster address.
    monitor_api_server: str | None = from_key("monitor.apiServer")
    #: The port the run monitor's NetworkPolicy opens to the API server; None = worked out
    #: (infra/monitor_egress.py).
    monitor_api_server_port: int | None = from_key("monitor.apiServerPort")

    def task(self, task_type: str) -> TaskSettings:
        """The container settings of ``task_type`` (chief, worker or ps)."""
        return {"chief": self.chief, "worker": self.worker, "ps": self.ps}[task_type]

    def uses_gpu(self, task_type: str) -> bool:
        """Whether ``task_type``'s pods request GPUs: workers with worker.gpuCount > 0, and
        then the chief too when it trains with them (``chief_uses_gpu``)."""
        return self.gpu_count > 0 and (
            task_type == "worker" or (task_type == "chief" and self.chief_uses_gpu)
        )


@dataclass(frozen=True, kw_only=True)
class TensorBoardSettings:
    """TensorBoard and its Service (tensorboard.*)."""

    image: str
    #: ps.imagePullPolicy, or derived from ``image`` (infra/settings/images.py: pull_policy).
    image_pull_policy: str
    #: "tensorboard" when ``image`` is the base image (TensorBoard loads from the volume);
    #: None: an image of your own.
    packages: str | None = None
    service_type: str = from_key("tensorboard.serviceType")
    address_type: str = from_key("tensorboard.addressType")
    source_ranges: tuple[str, ...] = from_key("tensorboard.allowedSourceRanges")


@dataclass(frozen=True)
class RuntimeSettings:
    """What the pods without images of their own run on (baseImage, packageIndex): the base
    image, and the package sets the setup Job installs for them (infra/components/setup.py)."""

    #: baseImage, or the region's (infra/settings/key_values.py regional_runtime).
    base_image: str
    #: The setup Job's pull policy of it: ps.imagePullPolicy, or derived from the reference.
    image_pull_policy: str
    #: The index the setup Job installs from: packageIndex, or the region's.
    package_index: str
    #: The package sets some role needs, in PACKAGE_FILES' order; empty when every role runs
    #: an image of your own (then no code ConfigMap and no setup Job exist).
    package_sets: tuple[str, ...]

    @property
    def used(self) -> bool:
        """Whether any pod runs the base image."""
        return bool(self.package_sets)


@dataclass(frozen=True)
class RegistrySettings:
    """How pods pull their images (imagePullSecret, registryCredentials.*)."""

    #: The docker-registry Secret every pod pulls with; None = the nodes' own credentials.
    image_pull_secret: str | None
    #: When set, the stack creates ``image_pull_secret`` from these.
    credentials: RegistryCredentials | None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The validated configuration of one stack, by section.

    Attributes:
        project: the Pulumi project (tf-mnist).
        stack: the stack name, part of cloud resource names.
        placement: role (chief, worker, ps, tensorboard, stage-data) -> Placement, resolved:
            a GPU chief has the workers' placement, the staging Job the chief.* keys'.
        secret_keys: the keys (of SECRET_CAPABLE_KEYS) set with ``--secret``: the program
            wraps their values in ``pulumi.Output.secret``.
    """

    project: str
    stack: str
    #: The start of every object name.
    name_prefix: str = from_key("namePrefix")
    namespace: str = from_key("namespace")
    #: createNamespace, or, unset, whether namespace is the stack's own default (derive.creates_namespace).
    create_namespace: bool
    #: Whether the run gets its NetworkPolicies (infra/components/network_policy.py).
    network_policy: bool = from_key("networkPolicy.enabled")
    cluster: ClusterSettings
    storage: StorageSettings
    pods: PodIdentity
    training: TrainingSettings
    tensorboard: TensorBoardSettings
    registry: RegistrySettings
    runtime: RuntimeSettings
    placement: Mapping[str, Placement]
    secret_keys: frozenset[str]

    @property
    def runs_dir(self) -> str:
        """The directory of this stack's runs: ``<mountPath>/runs/<stack>-<namespace>-<prefix>``
        (TensorBoard's --logdir: it shows every run of the stack)."""
        return f"{self.storage.mount_path}/runs/{self.stack}-{self.namespace}-{self.name_prefix}"

    @property
    def data_dir(self) -> str:
        """Where staging puts MNIST and the trainer reads it (``--data_dir``), by data.source:
        ``<mountPath>/mnist/<source key>`` (infra/settings/runs.py)."""
        return f"{self.storage.mount_path}/mnist/{runs.source_key(self.training.data_source)}"

    @property
    def run_key(self) -> str:
        """The key of this configuration's run directory (``runs.run_key``)."""
        t = self.training
        return runs.run_key(
            recipe.run_key_recipe(t.recipe),
            runs.source_key(t.data_source),
            runs.layout(t.replicas, t.gpu_count),
            runs.trainer_images(t.worker.reference, t.ps.reference, t.worker.packages, t.ps.packages),
        )

    @property
    def log_dir(self) -> str:
        """This configuration's run directory, ``<runs_dir>/<run_key>``: the trainer's --log_dir."""
        return f"{self.runs_dir}/{self.run_key}"
