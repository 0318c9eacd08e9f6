"""The validated settings: ``Settings`` is the configuration (``Config``, every key by section)
and what the program works out from several keys (infra/settings/derive.py), in frozen
dataclasses the program and its components read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.settings.config import Config
from infra.settings.run import Data, Job, Monitor
from trainer.contract import cluster_spec as cs


@dataclass(frozen=True)
class ImageSettings:
    """A container's image, its pull policy resolved (infra/pull_policy.py)."""

    image: str
    image_pull_policy: str
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


@dataclass(frozen=True, kw_only=True)
class TaskSettings(ImageSettings):
    """One task type's container: its image, port and resources (a CPU chief has the ps'
    image and resources on worker.port) and the GPUs each of its pods requests."""

    port: int
    cpu: str
    memory: str
    #: nvidia.com/gpu of each pod: worker.gpuCount for the workers and a GPU chief, else 0.
    gpus: int = 0


@dataclass(frozen=True)
class RuntimeSettings:
    """What the pods without images of their own run on (baseImage, packageIndex): the base
    image, and the package sets the setup Job installs for them (infra/components/setup.py)."""

    #: baseImage, or the region's (infra/bundle.py regional_runtime).
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


@dataclass(frozen=True, kw_only=True)
class TargetSettings:
    """The cluster the stack deploys into and the cloud layer it creates, as worked out from
    several keys and the stack's state.

    Without ``kubeconfig`` the stack creates the cloud layer (``Config.creates_cloud``): a network
    (or uses vswitch.id), an ACK cluster (or uses cluster.id), its node pools and NAS.
    """

    #: The kubernetes provider's cluster_identifier with a kubeconfig: clusterIdentifier, or
    #: the API server URL of the kubeconfig's current context; None without one.
    identifier: str | None
    #: Why the kubeconfig names no API server (a rule reports it); None in valid Settings.
    identifier_error: str | None = None
    #: The plugin of the cluster the stack creates (flannel or terway): cluster.networkPlugin, else
    #: the one the stack's state records, else terway; None when it creates no cluster.
    network_plugin: str | None
    #: The plugin of the cluster in the stack's state, when it holds one (and was read).
    deployed_network_plugin: str | None
    #: Whether the stack creates a pod vSwitch: for a Terway cluster it creates (no cluster.id)
    #: without cluster.podVswitchId (the rules then made sure it creates the node vSwitch too,
    #: so the VPC is known).
    creates_pod_vswitch: bool
    #: The type of the NAS file system the stack creates: nas.storageType, else the one the
    #: stack's state records, else Capacity; None when it creates none.
    nas_storage_type: str | None
    #: Whether this stack's state holds the NAS file system it created; None when the state was
    #: not read (infra/nas_zones.py reads it then).
    nas_deployed: bool | None
    #: Why the stack's state could not be read when an unset key needed it (a rule reports
    #: it); None in valid Settings.
    state_error: str | None = None


@dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """The training run: its tasks, the trainer's flags and its Jobs' policy."""

    #: One chief (the coordinator) beside ps.number ps and worker.number workers.
    replicas: cs.Replicas
    #: Task type -> gRPC port (the chief listens on worker.port).
    ports: Mapping[str, int]
    chief: TaskSettings
    worker: TaskSettings
    #: The ps tasks' container; the data-staging Job runs its image too (the CPU trainer's).
    ps: TaskSettings
    #: Whether the chief trains on GPUs like the workers (ps.number 0, worker.gpuCount > 0):
    #: MultiWorkerMirroredStrategy's collectives refuse a group mixing CPU and GPU devices.
    chief_uses_gpu: bool
    #: The recipe: argparse dest -> parsed value, one per row of trainer/contract/recipe.py's
    #: table (``hyperparams["learning_rate"]`` is hyperparams.learningrate's value).
    hyperparams: Mapping[str, Any]
    job: Job
    data: Data
    monitor: Monitor
    #: scheduling.gang: the task pods carry ACK's gang-scheduling labels (labels.gang_labels).
    gang: bool = False

    def task(self, task_type: str) -> TaskSettings:
        """The container settings of ``task_type`` (chief, worker or ps)."""
        return {"chief": self.chief, "worker": self.worker, "ps": self.ps}[task_type]

    def uses_gpu(self, task_type: str) -> bool:
        """Whether ``task_type``'s pods request GPUs."""
        return self.task(task_type).gpus > 0


@dataclass(frozen=True, kw_only=True)
class Derived:
    """What comes of the configuration, worked out from several keys (infra/settings/derive.py;
    with a bad key's default in its place until the rules pass): what ``Settings`` adds."""

    target: TargetSettings
    training: TrainingSettings
    #: TensorBoard's image: tensorboard.image, <imageRegistry>/tensorboard:<version>, or the
    #: base image with TensorBoard's packages.
    tensorboard_image: ImageSettings
    #: The registry the stack's registry login is for: registryCredentials.server, or the host of
    #: imageRegistry (of the base image without one).
    registry_server: str
    runtime: RuntimeSettings


@dataclass(frozen=True, kw_only=True)
class Settings(Derived, Config):
    """The validated configuration of one stack: every key (``Config``) and what comes of them
    (``Derived``).

    Attributes:
        project: the Pulumi project (tf-mnist).
        stack: the stack name, part of cloud resource names.
        secret_keys: the secret-capable keys set with ``--secret``: the program wraps their
            values in ``pulumi.Output.secret``.
    """

    project: str
    stack: str
    secret_keys: frozenset[str]
