"""PackageSetup: what the pods without images of their own get from the stack, and the Job that
installs their packages.

A role whose image key (worker.image, ps.image, tensorboard.image) is unset while imageRegistry
is unset runs the base image (baseImage: a public Python 3.11 image, holding neither the
project's code nor TensorFlow). Then:

- the trainer's code (``trainer/**/*.py``) is one immutable ConfigMap ``<prefix>-code-<hash>``,
  mounted read-only at CODE_DIR in every task pod and the staging pod (PYTHONPATH), ``hash``
  being the content hash of the code (infra/bundle.py); the bundled sample is
  ``<prefix>-sample-<hash>-<i>`` ConfigMaps of pieces that fit one each, and the requirement
  files of the sets in use one ``<prefix>-packages-<hash>``. A change of content is a new name:
  new objects, the pods moved to them, the old ones deleted at the end of `pulumi up`;
- the setup Job ``<prefix>-setup`` runs ``python -m trainer.install`` on the base image: it
  installs each package set the roles need (``cpu``, ``gpu``, ``tensorboard``) with
  ``pip install --require-hashes`` into ``<mountPath>/packages/<set>-<lock hash>`` on the shared
  volume, swapped in by a rename and reused when already there, and joins the sample into
  ``<mountPath>/sample/<sample hash>``. `pulumi up` waits for it (SETUP_TIMEOUT_SECONDS); the
  staging Job, and so the task Jobs, and TensorBoard start after it. A failed setup (an index
  out of reach, a wheel whose hash does not match, a full volume) fails `pulumi up` with its
  one-line reason and leaves no half-installed folder; the next `pulumi up` runs it again
  (REPLACE_UNREADY);
- each pod's PYTHONPATH is CODE_DIR and its set's folder: the package folder's name, in the
  pod template, changes with the requirement file, so a new set is a new run (and the run key
  holds both hashes: infra/runs.py trainer_images).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi
import pulumi_kubernetes as k8s

from infra import bundle
from infra.components import checker_suppressions as suppress
from infra.components import pods, staging
from infra.components.labels import recommended_labels
from infra.components.pods import Placement
from infra.settings import PodIdentity, RuntimeSettings

#: Where the pods see the code ConfigMap: ``CODE_DIR/trainer/...``, first on PYTHONPATH.
CODE_DIR = "/opt/tf-mnist"
#: Where the setup pod sees the sample's pieces and the requirement files.
SAMPLE_PARTS_DIR = "/opt/tf-mnist-sample"
LOCKS_DIR = "/opt/tf-mnist-locks"
CODE_VOLUME, SAMPLE_VOLUME, LOCKS_VOLUME, DATA_VOLUME = "code", "sample", "locks", "data"
COMPONENT = "setup"
CONTAINER = "setup"
#: How long `pulumi up` waits for the setup Job, and its activeDeadlineSeconds once its pod runs
#: (the run monitor raises it there from data.startTimeoutSeconds, as for staging): a first
#: install of the GPU set writes what made the GPU image 6.74 GB (docs/building.md), downloaded
#: from the index; an hour leaves room for a slow link. Not measured on the stack yet.
SETUP_TIMEOUT_SECONDS = 3600
#: pip unpacking wheels, then one timed `import tensorflow`: the limit is the ps tasks' default
#: memory (ps.memory 2Gi), in which the same TensorFlow imports and trains.
SETUP_REQUESTS = {"cpu": "250m", "memory": "512Mi"}
SETUP_LIMITS = {"cpu": "1", "memory": "2Gi"}
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
JOB = "kubernetes:batch/v1:Job"
#: The sets whose pods run the trainer (and so mount the code); TensorBoard's only reads.
TRAINER_SETS = ("cpu", "gpu")


def setup_name(prefix: str) -> str:
    """The setup Job's name: ``<prefix>-setup``."""
    return f"{prefix}-setup"


def code_map_name(prefix: str) -> str:
    """The code ConfigMap's name: ``<prefix>-code-<code hash>``."""
    return f"{prefix}-code-{bundle.code_hash()}"


def sample_map_names(prefix: str) -> list[str]:
    """The sample ConfigMaps' names, ``<prefix>-sample-<sample hash>-<i>``, one per group of
    ``bundle.split_parts``."""
    count = len(bundle.split_parts(bundle.sample_files()))
    return [f"{prefix}-sample-{bundle.sample_hash()}-{i}" for i in range(count)]


def locks_map_name(prefix: str, sets: Sequence[str]) -> str:
    """The requirement files' ConfigMap: ``<prefix>-packages-<hash of the sets' lock hashes>``."""
    text = ",".join(f"{s}-{bundle.lock_hash(s)}" for s in sets)
    return f"{prefix}-packages-{hashlib.sha256(text.encode()).hexdigest()[: bundle.HASH_DIGITS]}"


def packages_dir(mount_path: str) -> str:
    """The folder of the package sets on the volume: ``<mountPath>/packages``."""
    return f"{mount_path}/packages"


@dataclass(frozen=True)
class Runtime:
    """What a pod on the base image adds to its spec, by its package set.

    Attributes:
        code_map: the code ConfigMap's name.
        code_paths: the repository paths it holds (``trainer/stage.py``), each mounted at
            ``CODE_DIR/<path>``.
        package_dirs: package set -> its packages' folder on the volume (PYTHONPATH).
        sample_dir: where the setup Job joins the sample on the volume; None when data.source
            is set (nothing to join: staging fetches the source).
        mount_path: where the pods mount the volume (mountPath): a trainer set's package folder
            is mounted alone, read-only, at its path under it (``mounts``).
    """

    code_map: str
    code_paths: tuple[str, ...]
    package_dirs: Mapping[str, str]
    sample_dir: str | None
    mount_path: str

    def env(self, packages: str | None) -> list[k8s.core.v1.EnvVarArgs]:
        """PYTHONPATH (CODE_DIR for the trainer's sets, then the set's folder); none for an
        image of your own (``packages`` None). The GPU set's pods also name the driver
        capabilities the NVIDIA runtime mounts (docker/trainer-gpu.Dockerfile sets the same)."""
        if packages is None:
            return []
        path = [CODE_DIR] if packages in TRAINER_SETS else []
        env = [
            k8s.core.v1.EnvVarArgs(name="PYTHONPATH", value=":".join([*path, self.package_dirs[packages]]))
        ]
        if packages == "gpu":
            env.append(k8s.core.v1.EnvVarArgs(name="NVIDIA_DRIVER_CAPABILITIES", value="compute,utility"))
        # The volume's packages were compiled by the setup Job; the code's directory is read-only.
        return [*env, k8s.core.v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1")]

    def code_volume(self) -> k8s.core.v1.VolumeArgs:
        """The code ConfigMap as a volume, each key at its path under the mount."""
        return k8s.core.v1.VolumeArgs(
            name=CODE_VOLUME,
            config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(
                name=self.code_map,
                items=[
                    k8s.core.v1.KeyToPathArgs(key=bundle.config_map_key(p), path=p) for p in self.code_paths
                ],
            ),
        )

    def volumes(self, packages: str | None) -> list[k8s.core.v1.VolumeArgs]:
        """The code volume for the trainer's sets; nothing otherwise."""
        return [self.code_volume()] if packages in TRAINER_SETS else []

    def mounts(self, packages: str | None) -> list[k8s.core.v1.VolumeMountArgs]:
        """For the trainer's sets: the code volume at CODE_DIR and the set's package folder on
        the shared volume (DATA_VOLUME, by subPath, at its own path), both read-only; nothing
        otherwise. The folder exists before any such pod starts: the setup Job, which they all
        wait for, renamed it into place."""
        if packages not in TRAINER_SETS:
            return []
        folder = str(PurePosixPath(self.package_dirs[packages]).parent)
        return [
            k8s.core.v1.VolumeMountArgs(name=CODE_VOLUME, mount_path=CODE_DIR, read_only=True),
            pods.volume_dir_mount(DATA_VOLUME, self.mount_path, folder, read_only=True),
        ]


def runtime(prefix: str, mount_path: str, settings: RuntimeSettings, sample: bool) -> Runtime | None:
    """The pods' Runtime, or None when every role runs an image of your own.

    Args:
        sample: data.source is unset: the staging Job copies the sample, which the setup Job joins.
    """
    if not settings.used:
        return None
    return Runtime(
        code_map=code_map_name(prefix),
        code_paths=tuple(bundle.code_files()),
        package_dirs={s: bundle.package_path(packages_dir(mount_path), s) for s in settings.package_sets},
        sample_dir=f"{mount_path}/sample/{bundle.sample_hash()}" if sample else None,
        mount_path=mount_path,
    )


def object_names(prefix: str, settings: RuntimeSettings, sample: bool) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every object ``PackageSetup`` creates: none when every
    role runs an image of your own; else the code, sample (when ``sample``) and requirement
    ConfigMaps and the setup Job."""
    if not settings.used:
        return []
    maps = [code_map_name(prefix), *(sample_map_names(prefix) if sample else [])]
    maps.append(locks_map_name(prefix, settings.package_sets))
    return [*((CONFIG_MAP, m) for m in maps), (JOB, setup_name(prefix))]


@dataclass
class PackageSetupArgs:
    """Where the setup runs and what it installs.

    Attributes:
        namespace: the namespace (an Output when the stack creates it).
        runtime: the pods' Runtime (``runtime``).
        settings: the base image, the index and the package sets.
        claim_name: the shared volume's claim (plain name), mounted at ``mount_path``.
        identity: the uid and gid the pod runs as (pods.*): the package folders are its.
        placement: where the pod goes (the staging Job's: chief.*).
        image_pull_policy: the base image's (ps.imagePullPolicy, or derived from the image).
        image_pull_secret: the docker-registry Secret pods pull with, if any.
        priority_class_name: job.priorityClassName.
        start_timeout_seconds: data.startTimeoutSeconds: the Job's activeDeadlineSeconds as
            created, so that a pod that never starts (a base image that cannot be pulled) fails
            it then; the run monitor raises it to SETUP_TIMEOUT_SECONDS once the pod runs.
        after: resources the Job waits for (the node pools, the claim, the NetworkPolicies).
    """

    namespace: pulumi.Input[str]
    runtime: Runtime
    settings: RuntimeSettings
    claim_name: str
    mount_path: str
    identity: PodIdentity
    placement: Placement
    image_pull_policy: str
    image_pull_secret: str | None
    priority_class_name: str | None
    start_timeout_seconds: int
    after: Sequence[pulumi.Resource] = ()


class PackageSetup(pulumi.ComponentResource):
    """The code, sample and requirement ConfigMaps and the setup Job (the module docstring).

    Outputs:
        job_name: the setup Job's name.
    """

    job_name: pulumi.Output[str]

    def __init__(self, name: str, args: PackageSetupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:PackageSetup", name, None, opts)
        self._name, self._args = name, args
        code = {bundle.config_map_key(p): data.decode() for p, data in bundle.code_files().items()}
        maps = [self._config_map(code_map_name(name), data=code)]
        if args.runtime.sample_dir is not None:
            parts = bundle.split_parts(bundle.sample_files())
            for map_name, group in zip(sample_map_names(name), parts, strict=True):
                binary = {key: _base64(data) for key, data in group.items()}
                maps.append(self._config_map(map_name, binary=binary))
        locks = {f"{s}.txt": bundle.lock_text(s) for s in args.settings.package_sets}
        maps.append(self._config_map(locks_map_name(name, args.settings.package_sets), data=locks))
        self.job = self._job(maps)
        self.job_name = self.job.metadata.name
        self.register_outputs({"job_name": self.job_name})

    def _config_map(
        self, map_name: str, data: dict[str, str] | None = None, binary: dict[str, str] | None = None
    ) -> k8s.core.v1.ConfigMap:
        """An immutable ConfigMap named by its content (``data`` text, ``binary`` base64): a new
        content is a new object."""
        return k8s.core.v1.ConfigMap(
            map_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=map_name,
                namespace=self._args.namespace,
                labels=recommended_labels(self._name, COMPONENT),
                annotations=suppress.merged(None, suppress.OBJECT),
            ),
            immutable=True,
            data=data,
            binary_data=binary,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def command(self) -> list[str]:
        """``python -m trainer.install`` with every set's requirement file, and the sample."""
        args, sample_dir = self._args, self._args.runtime.sample_dir
        locks = [a for s in args.settings.package_sets for a in ("--lock", f"{s}={LOCKS_DIR}/{s}.txt")]
        joined = ["--sample_parts", SAMPLE_PARTS_DIR, "--sample_dest", sample_dir] if sample_dir else []
        return [
            "python", "-m", "trainer.install", "--dest", packages_dir(args.mount_path),
            "--index_url", args.settings.package_index, *locks, *joined,
        ]  # fmt: skip

    def _job(self, maps: list[k8s.core.v1.ConfigMap]) -> k8s.batch.v1.Job:
        """``<prefix>-setup``: fails on its first failed pod, with its one-line reason."""
        args, name = self._args, setup_name(self._name)
        image = args.settings.base_image
        return k8s.batch.v1.Job(
            name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=name,
                namespace=args.namespace,
                labels=recommended_labels(self._name, COMPONENT),
                annotations=suppress.merged(
                    {
                        "pulumi.com/timeoutSeconds": str(SETUP_TIMEOUT_SECONDS),
                        # A failed setup is run anew by the next `pulumi up` (training.REPLACE_UNREADY).
                        "pulumi.com/replaceUnready": "true",
                    },
                    suppress.STAGE,
                    [(image, args.image_pull_policy)],
                ),
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=0,
                active_deadline_seconds=staging.start_deadline(args.start_timeout_seconds),
                pod_failure_policy=staging.stage_failure_policy(),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=recommended_labels(self._name, COMPONENT)),
                    spec=self._pod(image, maps),
                ),
            ),
            # The run monitor raises activeDeadlineSeconds once the pod runs: an update leaves it
            # alone (no server-side-apply conflict with the monitor, no diff on the next preview).
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.after, *maps], ignore_changes=["spec.activeDeadlineSeconds"]
            ),
        )

    def _pod(self, image: str, maps: list[k8s.core.v1.ConfigMap]) -> k8s.core.v1.PodSpecArgs:
        args = self._args
        sample = args.runtime.sample_dir is not None
        volumes = [
            k8s.core.v1.VolumeArgs(
                name=DATA_VOLUME,
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=args.claim_name
                ),
            ),
            args.runtime.code_volume(),
            k8s.core.v1.VolumeArgs(
                name=LOCKS_VOLUME,
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(
                    name=locks_map_name(self._name, args.settings.package_sets)
                ),
            ),
            pods.scratch_volume(),
        ]
        mounts = [
            k8s.core.v1.VolumeMountArgs(name=DATA_VOLUME, mount_path=args.mount_path),
            k8s.core.v1.VolumeMountArgs(name=CODE_VOLUME, mount_path=CODE_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name=LOCKS_VOLUME, mount_path=LOCKS_DIR, read_only=True),
            pods.scratch_mount(),
        ]
        if sample:
            sources = [
                k8s.core.v1.VolumeProjectionArgs(config_map=k8s.core.v1.ConfigMapProjectionArgs(name=n))
                for n in sample_map_names(self._name)
            ]
            volumes.append(
                k8s.core.v1.VolumeArgs(
                    name=SAMPLE_VOLUME, projected=k8s.core.v1.ProjectedVolumeSourceArgs(sources=sources)
                )
            )
            mounts.append(
                k8s.core.v1.VolumeMountArgs(name=SAMPLE_VOLUME, mount_path=SAMPLE_PARTS_DIR, read_only=True)
            )
        return k8s.core.v1.PodSpecArgs(
            restart_policy="Never",
            node_selector=pods.node_selector(args.placement),
            tolerations=pods.tolerations(args.placement, uses_gpu=False),
            priority_class_name=args.priority_class_name,
            image_pull_secrets=pods.image_pull_secrets(args.image_pull_secret),
            security_context=pods.pod_security_context(args.identity),
            automount_service_account_token=False,
            containers=[
                k8s.core.v1.ContainerArgs(
                    name=CONTAINER,
                    image=image,
                    image_pull_policy=args.image_pull_policy,
                    command=self.command(),
                    # The last line on failure is the reason: the pod's message, which `pulumi up` shows.
                    termination_message_policy="FallbackToLogsOnError",
                    resources=pods.resources(SETUP_REQUESTS, SETUP_LIMITS),
                    env=[
                        k8s.core.v1.EnvVarArgs(name="PYTHONPATH", value=CODE_DIR),
                        k8s.core.v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1"),
                        k8s.core.v1.EnvVarArgs(name="PYTHONUNBUFFERED", value="1"),
                        *pods.scratch_env(),
                    ],
                    security_context=pods.container_security_context(),
                    volume_mounts=mounts,
                )
            ],
            volumes=volumes,
        )


def _base64(data: bytes) -> str:
    """``data`` as a ConfigMap's binaryData value."""
    return base64.b64encode(data).decode()
