"""TrainingJob: cluster-spec ConfigMap, data staging Job, and one headless Service + Job per task.

What every task Job shares (the trainer's flags, failure policy, templates' hash): task_jobs.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.components import checker_suppressions as suppress
from infra.components import chief_await, pods, staging
from infra.components.labels import gang_labels, recommended_labels, task_selector
from infra.components.setup import DATA_VOLUME, Runtime
from infra.components.task_jobs import (
    CONTAINER_NAME,
    POD_REPLACEMENT_POLICY,
    pod_failure_policy,
    task_mounts,
    templates_hash,
    trainer_args,
)
from infra.settings import PodIdentity, TaskSettings, TrainingSettings
from trainer.contract import cluster_spec as cs

#: The shared volume in every pod (the same name as in the setup Job's, whose Runtime mounts
#: the package folders from it).
VOLUME_NAME = DATA_VOLUME
#: Pulumi's await annotations (pulumi-kubernetes): skip the wait, or bound it.
SKIP_AWAIT = "pulumi.com/skipAwait"
#: Custom await (pulumi-kubernetes 4.x): the object is ready when the JSONPath matches.
WAIT_FOR = "pulumi.com/waitFor"
#: A task Job is "ready" as soon as the API server has it: `pulumi up` does not wait for the
#: training. Not skipAwait: pulumi-kubernetes 4.25 also skips the wait for a skipAwait Job's
#: *deletion* (a legacy behaviour kept for Jobs, pkg/metadata/overrides.go), so replacing a
#: Job under its fixed name created the new one while the old was still being deleted and the
#: API server refused it (server-side apply field conflict; seen on the local cluster).
TASK_JOB_AWAIT = {WAIT_FOR: "jsonpath={.metadata.uid}"}
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"
#: pulumi-kubernetes reads a Job with this annotation from the cluster on every diff and
#: replaces it when it is not complete (failed, or cut off mid-way): a staging Job that failed
#: (a volume it could not write) is run anew by the next `pulumi up` once the cause is fixed,
#: instead of being awaited again as Failed. A complete one is left alone.
REPLACE_UNREADY = "pulumi.com/replaceUnready"
STAGE_CONTAINER = "stage"


#: Pulumi type tokens of the objects a TrainingJob creates.
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"


def cluster_spec_name(name: str) -> str:
    """The cluster-spec ConfigMap's name: ``<name>-cluster-spec``."""
    return f"{name}-cluster-spec"


def run_name(name: str) -> str:
    """The run ConfigMap's name (the run's identity): ``<name>-run``."""
    return f"{name}-run"


def staging_name(name: str) -> str:
    """The data staging Job's name: ``<name>-stage-data``."""
    return f"{name}-stage-data"


def object_names(name: str, replicas: cs.Replicas) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every object ``TrainingJob(name, ...)`` creates, in its
    namespace: the cluster-spec and run ConfigMaps, the staging Job, and per task (chief-0,
    worker-i, ps-i) a Service and a Job, both ``<name>-<task_type>-<index>``."""
    objects = [(CONFIG_MAP, cluster_spec_name(name)), (CONFIG_MAP, run_name(name)), (JOB, staging_name(name))]
    for task in task_names(name, replicas):
        objects += [(SERVICE, task), (JOB, task)]
    return objects


def task_names(name: str, replicas: cs.Replicas) -> list[str]:
    """The names of the task Jobs (and of their Services), ``<name>-<task_type>-<index>``,
    chief first, then the workers and the ps tasks in index order."""
    return [cs.task_name(name, task_type, index) for task_type, index in replicas.tasks()]


@dataclass
class TrainingJobArgs:
    """One training run and where it runs.

    Attributes:
        training: its tasks, the trainer's flags and the Jobs' policy.
        placement: role -> Placement, for chief, worker, ps and stage-data.
        namespace: the namespace (an Output when the stack creates it).
        namespace_name: the same as plain text: the TF_CONFIG hosts name it.
        claim_name: the claim every pod mounts at ``mount_path`` (a plain name: it is part of
            the pod templates, whose hash is the run id).
        mount_path: where the volume is mounted in every pod.
        data_dir: where staging puts MNIST and the trainer reads it (``--data_dir``).
        log_dir: the trainer's ``--log_dir``: this configuration's run directory
            (checkpoints, summaries, markers; infra/runs.py).
        run_key: the run directory's key (``runs.run_key``), the start of the run id.
        image_pull_secret: the docker-registry Secret every pod pulls with, if any.
        identity: the uid and gid every pod runs as (pods.*).
        data_source_secret: data.source was set with ``--secret``: staging reads it from a
            Secret (infra/components/staging.py), not from its command.
        volume_hint: where the volume lives and how to make it writable, which the staging
            Job's error ends with (``storage.unwritable_hint``).
        after: resources the staging Job waits for (the node pools, the claim, the pull Secret).
        failed_before: uids of the Jobs that this stack's state recorded as failed before the
            program ran (chief_await.failed_before; read with job.waitForChief only): a chief's
            Job among them fails no `pulumi up` again.
        runtime: what pods on the base image add (code, PYTHONPATH; setup.Runtime); None when
            every role runs an image of your own.
    """

    training: TrainingSettings
    placement: Mapping[str, pods.Placement]
    namespace: pulumi.Input[str]
    namespace_name: str
    claim_name: str
    mount_path: str
    data_dir: str
    log_dir: str
    run_key: str
    image_pull_secret: str | None
    identity: PodIdentity = pods.IMAGE_IDENTITY
    data_source_secret: bool = False
    volume_hint: str = ""
    after: Sequence[pulumi.Resource] = ()
    failed_before: frozenset[str] = frozenset()
    runtime: Runtime | None = None


class TrainingJob(pulumi.ComponentResource):
    """One distributed training run on Kubernetes.

    Children:
        ``<prefix>-cluster-spec`` ConfigMap with the cluster spec JSON (for people and tools;
        each task gets its TF_CONFIG in the environment).
        ``<prefix>-stage-data`` Job: ``python -m trainer.stage --dest <mountPath>/mnist``;
        Pulumi waits for it (bounded), and every task Job depends on it, so training starts
        only once the data is on the volume.
        Per task (chief-0, worker-i, ps-i): a headless Service and a batch/v1 Job, both named
        ``<prefix>-<task_type>-<index>``.

    Task Jobs are ready for Pulumi once created (TASK_JOB_AWAIT): the chief trains for
    hours, which `pulumi up` must not block on. With job.waitForChief the chief's Job is
    awaited until it ends, at most job.waitTimeoutMinutes, and `pulumi up` fails with its
    reason when it failed (chief_await.py says why not by Pulumi's own Job await).

    A failed task pod is replaced, not restarted in place (restartPolicy Never, which a
    podFailurePolicy needs; see ``pod_failure_policy``). The replacement has the same labels,
    so its headless Service (and the DNS name in every TF_CONFIG) selects it, the same
    TF_CONFIG and flags, and resumes from the checkpoint in ``--log_dir`` on the shared
    volume (TrainState.restore_latest in trainer/training/checkpoints.py restores the latest
    one there).

    The run id (``--run_id``, the same for every task) is ``<run key>-<uid>``, the uid being
    that of the ``<prefix>-run`` ConfigMap, which holds the hash of the task templates
    (``templates_hash``) and is replaced whenever that hash changes. So every `pulumi up` that
    creates or replaces the Jobs, and so starts a run, gives it an id no earlier run had
    (Kubernetes uids are random per object, and a destroy then up creates the ConfigMap anew):
    no heartbeat or done marker an earlier run left in the run directory ends the new tasks
    (trainer/servers.py compares the id). An update that leaves the templates alone keeps the
    ConfigMap, its uid and the run; a preview shows the id it already has (the uid is known
    from the state), and an unknown id exactly where the Jobs are replaced anyway. The id is
    not a hash of the configuration (it was once): after a destroy and up that hash repeated
    and the old run's done marker told the new tasks the run was over.

    Outputs:
        cluster_spec: task type -> list of host:port.
        job_names: the task Jobs' names, chief first.
        staging_job_name.
        run_id: the ``--run_id`` of every task.
        run_dir: the run's directory on the volume (``--log_dir``).
    """

    cluster_spec: pulumi.Output[dict]
    job_names: pulumi.Output[list]
    staging_job_name: pulumi.Output[str]
    run_id: pulumi.Output[str]
    run_dir: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:TrainingJob", name, None, opts)
        self._name = name
        self._args = args
        training = args.training
        spec = cs.kubernetes_cluster_spec(name, args.namespace_name, training.replicas, training.ports)
        k8s.core.v1.ConfigMap(
            cluster_spec_name(name),
            metadata=self._metadata(cluster_spec_name(name), "cluster-spec"),
            data={"cluster_spec.json": json.dumps(spec, sort_keys=True, indent=2)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        staging = self._staging_job()
        tasks = list(training.replicas.tasks())
        templates = templates_hash(
            {cs.task_name(name, t, i): self._template(t, i, spec, None) for t, i in tasks},
            {"podFailurePolicy": pod_failure_policy(), "podReplacementPolicy": POD_REPLACEMENT_POLICY},
        )
        run = self._run_config_map(templates)
        run_id = run.metadata.uid.apply(lambda uid: f"{args.run_key}-{uid}")
        job_names = [self._task(task_type, index, spec, run_id, after=staging) for task_type, index in tasks]

        self.cluster_spec = pulumi.Output.from_input(spec)
        self.job_names = pulumi.Output.from_input(job_names)
        self.staging_job_name = staging.metadata.name
        self.run_id = run_id
        self.run_dir = pulumi.Output.from_input(args.log_dir)
        self.register_outputs(
            {
                "cluster_spec": self.cluster_spec,
                "job_names": self.job_names,
                "staging_job_name": self.staging_job_name,
                "run_id": self.run_id,
                "run_dir": self.run_dir,
            }
        )

    def _run_config_map(self, templates: str) -> k8s.core.v1.ConfigMap:
        """``<prefix>-run``: the run's identity. Replaced (a new object, so a new uid) exactly
        when the Jobs are, i.e. when the templates' hash changes, and created anew after a
        destroy; its uid is the random part of the run id (see the class docstring)."""
        name = run_name(self._name)
        return k8s.core.v1.ConfigMap(
            name,
            metadata=self._metadata(name, "run"),
            immutable=True,
            data={"runDir": self._args.log_dir, "runKey": self._args.run_key, "templates": templates},
            # An immutable ConfigMap cannot change in place; delete first: its name is fixed.
            opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["data"], delete_before_replace=True),
        )

    def _staging_job(self) -> k8s.batch.v1.Job:
        """``<prefix>-stage-data``: ``python -m trainer.stage`` puts MNIST on the volume.

        A stager that fails (a volume it cannot write, exit 6; a source that answers 404) fails
        the Job at once (staging.STAGE_BACKOFF_LIMIT; restartPolicy Never, which a
        podFailurePolicy needs), with its error as the container's termination message, which
        `pulumi up` prints. A pod that never starts (unschedulable, an unbound claim, an image
        it cannot pull, a volume that does not mount) fails it after data.startTimeoutSeconds
        (its activeDeadlineSeconds, which the run monitor raises to STAGING_TIMEOUT_SECONDS
        once the pod runs; staging.start_deadline). The next `pulumi up` replaces a failed Job
        (REPLACE_UNREADY)."""
        args, training = self._args, self._args.training
        name, secret_name = staging_name(self._name), staging.source_secret_name(self._name)
        placement = args.placement["stage-data"]
        annotations = {TIMEOUT_SECONDS: str(staging.STAGING_TIMEOUT_SECONDS), REPLACE_UNREADY: "true"}
        secret = None
        if args.data_source_secret and training.data.source is not None:
            # data.source set with --secret: staging reads it from this Secret.
            secret = staging.source_secret(
                secret_name, training.data.source, self._metadata(secret_name, "stage-data"), self
            )
        return k8s.batch.v1.Job(
            name,
            metadata=self._metadata(
                name,
                "stage-data",
                annotations,
                role=suppress.STAGE if secret is None else suppress.STAGE_SECRET_SOURCE,
                pulls=[(training.ps.image, training.ps.image_pull_policy)],
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=staging.STAGE_BACKOFF_LIMIT,
                active_deadline_seconds=staging.start_deadline(training.data.start_timeout_seconds),
                pod_failure_policy=staging.stage_failure_policy(),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=recommended_labels(self._name, "stage-data")),
                    spec=k8s.core.v1.PodSpecArgs(
                        restart_policy="Never",
                        node_selector=pods.node_selector(placement),
                        tolerations=pods.tolerations(placement, uses_gpu=False),
                        priority_class_name=training.job.priority_class_name,
                        image_pull_secrets=pods.image_pull_secrets(args.image_pull_secret),
                        security_context=pods.pod_security_context(args.identity),
                        automount_service_account_token=False,
                        containers=[self._staging_container(secret_name, from_secret=secret is not None)],
                        volumes=[
                            self._volume(),
                            pods.scratch_volume(),
                            *self._runtime_parts(training.ps.packages)[2],
                        ],
                    ),
                ),
            ),
            # Pulumi waits for this Job: its pod needs the node pools (`after`) to exist. The run
            # monitor raises activeDeadlineSeconds once the pod runs: an update leaves the field
            # alone (no server-side-apply conflict with the monitor, no diff on the next preview).
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*args.after, *([secret] if secret else [])],
                ignore_changes=["spec.activeDeadlineSeconds"],
            ),
        )

    def _staging_container(self, secret_name: str, from_secret: bool) -> k8s.core.v1.ContainerArgs:
        """The stager's container; ``from_secret``: it reads the sources from the Secret
        ``secret_name`` (data.source set with ``--secret``), not from its command."""
        args, training = self._args, self._args.training
        env, mounts = self._runtime_parts(training.ps.packages)[:2]
        # On the base image the sample comes from the setup Job's folder, not the image.
        sample = args.runtime.sample_dir if args.runtime and training.ps.packages else None
        return k8s.core.v1.ContainerArgs(
            name=STAGE_CONTAINER,
            image=training.ps.image,
            image_pull_policy=training.ps.image_pull_policy,
            # It also makes the run's directory, which the task pods then mount alone.
            command=staging.stage_command(
                args.data_dir,
                training.data.source or sample,
                args.volume_hint,
                from_secret=from_secret,
                run_dir=args.log_dir,
            ),
            # The stager's last line on failure is its error: the message
            # the pod's status, and so `pulumi up`, shows.
            termination_message_policy="FallbackToLogsOnError",
            resources=pods.resources(staging.STAGE_REQUESTS, staging.STAGE_LIMITS),
            env=pods.scratch_env() + (staging.source_env(secret_name) if from_secret else []) + env,
            security_context=pods.container_security_context(),
            volume_mounts=[self._volume_mount(), pods.scratch_mount(), *mounts],
        )

    def _task(
        self,
        task_type: str,
        index: int,
        spec: cs.ClusterSpec,
        run_id: pulumi.Input[str],
        after: pulumi.Resource,
    ) -> str:
        """One task's headless Service and Job, both named ``<prefix>-<task_type>-<index>``;
        returns the name. The Job waits for ``after`` (the staging Job)."""
        training = self._args.training
        name = cs.task_name(self._name, task_type, index)
        task = training.task(task_type)
        port = task.port
        selector = task_selector(self._name, task_type, index)
        k8s.core.v1.Service(
            name,
            # Headless Services get endpoints only once the pod runs (image pulls, node
            # start-up): nothing for `pulumi up` to wait for.
            metadata=self._metadata(name, task_type, {SKIP_AWAIT: "true"}, selector),
            spec=k8s.core.v1.ServiceSpecArgs(
                cluster_ip="None",
                selector=selector,
                # TensorFlow tasks dial each other while starting, before they are Ready.
                publish_not_ready_addresses=True,
                ports=[k8s.core.v1.ServicePortArgs(name="grpc", port=port, target_port=port, protocol="TCP")],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        waits = task_type == "chief" and training.job.wait_for_chief
        annotations = (
            {TIMEOUT_SECONDS: str(training.job.wait_timeout_minutes * 60), WAIT_FOR: chief_await.WAIT_FOR_END}
            if waits
            else TASK_JOB_AWAIT
        )
        job = k8s.batch.v1.Job(
            name,
            metadata=self._metadata(
                name,
                task_type,
                annotations,
                selector,
                role=suppress.TASK,
                pulls=[(task.image, task.image_pull_policy)],
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=training.job.backoff_limit,
                active_deadline_seconds=training.job.active_deadline_seconds,
                pod_failure_policy=pod_failure_policy(),
                # A replacement starts only once the failed pod is gone: two pods of one
                # task would both answer at its address. (The only value a
                # podFailurePolicy allows; stated, not left to the default.)
                pod_replacement_policy=POD_REPLACEMENT_POLICY,
                template=self._template(task_type, index, spec, run_id),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[after]),
        )
        if waits:
            args = self._args
            chief_await.check(
                job,
                name=name,
                namespace=args.namespace_name,
                log_dir=args.log_dir,
                failed_before=args.failed_before,
            )
        return name

    def _metadata(
        self,
        name: str,
        component: str,
        annotations: dict | None = None,
        extra_labels: dict | None = None,
        role: str = suppress.OBJECT,
        pulls: Sequence[suppress.Pull] = (),
    ) -> k8s.meta.v1.ObjectMetaArgs:
        """An object's metadata; ``role`` and its containers' ``pulls`` pick its checkers' suppressions."""
        return k8s.meta.v1.ObjectMetaArgs(
            name=name,
            namespace=self._args.namespace,
            labels={**recommended_labels(self._name, component), **(extra_labels or {})},
            annotations=suppress.merged(annotations, role, pulls),
        )

    def _runtime_parts(self, packages: str | None) -> tuple[list, list, list]:
        """(env, volume mounts, volumes) a pod of ``packages``' set adds on the base image."""
        runtime = self._args.runtime
        if runtime is None or packages is None:
            return [], [], []
        return runtime.env(packages), runtime.mounts(packages), runtime.volumes(packages)

    def _volume_mount(self) -> k8s.core.v1.VolumeMountArgs:
        return k8s.core.v1.VolumeMountArgs(name=VOLUME_NAME, mount_path=self._args.mount_path)

    def _volume(self) -> k8s.core.v1.VolumeArgs:
        return k8s.core.v1.VolumeArgs(
            name=VOLUME_NAME,
            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                claim_name=self._args.claim_name
            ),
        )

    def _template(
        self, task_type: str, index: int, spec: cs.ClusterSpec, run_id: pulumi.Input[str] | None
    ) -> k8s.core.v1.PodTemplateSpecArgs:
        """One task's pod template; ``run_id`` None leaves ``--run_id`` out (see templates_hash)."""
        training = self._args.training
        labels = {**recommended_labels(self._name, task_type), **task_selector(self._name, task_type, index)}
        return k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels={**labels, **gang_labels(self._name, training)}),
            spec=self._task_pod(task_type, index, training.task(task_type), spec, run_id),
        )

    def _task_pod(
        self,
        task_type: str,
        index: int,
        task: TaskSettings,
        spec: cs.ClusterSpec,
        run_id: pulumi.Input[str] | None,
    ) -> k8s.core.v1.PodSpecArgs:
        args, training = self._args, self._args.training
        env = [
            k8s.core.v1.EnvVarArgs(name="TF_CONFIG", value=cs.tf_config_json(spec, task_type, index)),
            # Fail RPCs to a peer that is down instead of hanging (TensorFlow's PS tutorial).
            k8s.core.v1.EnvVarArgs(name="GRPC_FAIL_FAST", value="use_caller"),
        ]
        uses_gpu = training.uses_gpu(task_type)
        limits = {"memory": task.memory}
        if uses_gpu:
            limits["nvidia.com/gpu"] = str(task.gpus)
        else:
            # ps, a CPU chief and CPU workers must not grab a GPU even on a GPU node.
            env += [
                k8s.core.v1.EnvVarArgs(name="NVIDIA_VISIBLE_DEVICES", value="void"),
                k8s.core.v1.EnvVarArgs(name="CUDA_VISIBLE_DEVICES", value=""),
            ]
        placement = args.placement[task_type]
        runtime_env, runtime_mounts, runtime_volumes = self._runtime_parts(task.packages)
        return k8s.core.v1.PodSpecArgs(
            # Never: a failed task gets a new pod (see the class docstring), which a
            # podFailurePolicy requires; backoffLimit caps the failures that count.
            restart_policy="Never",
            termination_grace_period_seconds=pods.TASK_GRACE_SECONDS,
            security_context=pods.pod_security_context(args.identity),
            automount_service_account_token=False,
            node_selector=pods.node_selector(placement),
            tolerations=pods.tolerations(placement, uses_gpu),
            priority_class_name=training.job.priority_class_name,
            image_pull_secrets=pods.image_pull_secrets(args.image_pull_secret),
            containers=[
                k8s.core.v1.ContainerArgs(
                    name=CONTAINER_NAME,
                    image=task.image,
                    image_pull_policy=task.image_pull_policy,
                    command=["python", "-m", "trainer"],
                    args=trainer_args(training, args.data_dir, args.log_dir, run_id),
                    env=env + pods.scratch_env() + runtime_env,
                    security_context=pods.container_security_context(),
                    ports=[
                        k8s.core.v1.ContainerPortArgs(name="grpc", container_port=task.port, protocol="TCP")
                    ],
                    resources=pods.resources({"cpu": task.cpu, "memory": task.memory}, limits),
                    volume_mounts=[
                        *task_mounts(VOLUME_NAME, args.mount_path, args.data_dir, args.log_dir),
                        pods.scratch_mount(),
                        *runtime_mounts,
                    ],
                )
            ],
            volumes=[self._volume(), pods.scratch_volume(), *runtime_volumes],
        )
