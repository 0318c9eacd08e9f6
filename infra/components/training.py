"""TrainingJob: cluster-spec ConfigMap, data staging Job, and one headless Service + Job per task."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional, Sequence

import pulumi
import pulumi._types as pulumi_types
import pulumi_kubernetes as k8s

from infra.components import pods
from infra.components.labels import recommended_labels, task_selector
from infra.settings import Settings, TaskSettings
from trainer import cluster_spec as cs
from trainer.exit_codes import EXIT_SIGTERM, PERMANENT_EXIT_CODES

CONTAINER_NAME = "tensorflow"
VOLUME_NAME = "data"
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
#: Staging copies about 11 MB from the image: ten minutes covers node start and image pull.
STAGING_TIMEOUT_SECONDS = 1200
#: Pod condition the control plane sets on a pod it evicts, preempts or garbage-collects.
DISRUPTION_TARGET = "DisruptionTarget"
#: A replacement pod starts only once the failed one is gone (see TrainingJob).
POD_REPLACEMENT_POLICY = "Failed"


def trainer_args(settings: Settings, run_id: Optional[str]) -> list[str]:
    """Container args of every task: the trainer's flags (team contract).

    Args:
        run_id: the run's id (``--run_id``), or None to leave the flag out, which only the
            hash that makes the run id does (``run_id_of``).
    """
    args = [
        "--data_dir", settings.storage.data_dir,
        "--log_dir", settings.log_dir,
        "--epochs", str(settings.training.epochs),
        "--batch_size", str(settings.training.batch_size),
        "--learning_rate", repr(settings.training.learning_rate),
        "--peer_timeout", str(settings.training.peer_timeout_seconds),
    ]
    return args if run_id is None else [*args, "--run_id", run_id]


def run_id_of(templates: dict[str, k8s.core.v1.PodTemplateSpecArgs], fixed: Optional[dict] = None) -> str:
    """The run id: 12 hex digits of the SHA-256 of every task's pod template (without the id).

    A change to any template replaces the Jobs (pulumi-kubernetes forces replacement on
    ``spec.template``) and so starts a new run, which gets a new id: the new servers then
    ignore the previous run's done marker on the volume (trainer/servers.py). Changes that
    leave the templates alone (backoffLimit, the deadline, await annotations) update the
    Jobs in place and keep the run and its id.

    Args:
        templates: task name -> its pod template, built without ``--run_id``.
        fixed: Job spec fields hashed along (the failure policy): the API server refuses to
            change podFailurePolicy on an existing Job, so a change to it must change the
            run id, and with it the templates, which replaces the Jobs instead of failing
            the update.

    Raises:
        TypeError: a template holds an Output, whose value a preview may not know; a run id
            must be the same in every preview and update.
    """
    def plain(value: Any) -> Any:
        # Input types (``...Args``) as the dict of their set fields, with Pulumi's names.
        if pulumi_types.is_input_type(type(value)):
            return pulumi_types.input_type_to_dict(value)
        raise TypeError(f"a pod template holds {type(value).__name__}, which has no fixed value")

    text = json.dumps([templates, fixed or {}], default=plain, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def pod_failure_policy() -> k8s.batch.v1.PodFailurePolicyArgs:
    """How a task Job treats a failed pod (issue 8.2).

    * exit 2 (bad flags or TF_CONFIG) or 3 (bad data) of the trainer: FailJob at once, a new
      pod would fail the same way (trainer/exit_codes.py PERMANENT_EXIT_CODES);
    * exit 143: the task was stopped with SIGTERM (its pod deleted, by a person or a drain)
      and the chief saved a checkpoint first: Ignore, i.e. a new pod that does not count
      against backoffLimit;
    * the DisruptionTarget condition (eviction, preemption, taint manager, pod GC): Ignore.

    Anything else (1: lost peers) counts against backoffLimit.
    """
    def exit_codes(action: str, codes: Sequence[int]) -> k8s.batch.v1.PodFailurePolicyRuleArgs:
        return k8s.batch.v1.PodFailurePolicyRuleArgs(
            action=action, on_exit_codes=k8s.batch.v1.PodFailurePolicyOnExitCodesRequirementArgs(
                container_name=CONTAINER_NAME, operator="In", values=sorted(codes)))

    return k8s.batch.v1.PodFailurePolicyArgs(rules=[
        exit_codes("FailJob", PERMANENT_EXIT_CODES),
        exit_codes("Ignore", [EXIT_SIGTERM]),
        k8s.batch.v1.PodFailurePolicyRuleArgs(action="Ignore", on_pod_conditions=[
            k8s.batch.v1.PodFailurePolicyOnPodConditionsPatternArgs(type=DISRUPTION_TARGET, status="True")]),
    ])


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
    hours, which `pulumi up` must not block on; with ``wait_for_chief`` the chief's Job is
    awaited for ``wait_timeout_minutes`` instead.

    A failed task pod is replaced, not restarted in place (restartPolicy Never, which a
    podFailurePolicy needs; see ``pod_failure_policy``). The replacement has the same labels,
    so its headless Service (and the DNS name in every TF_CONFIG) selects it, the same
    TF_CONFIG and flags, and resumes from the checkpoint in ``--log_dir`` on the shared
    volume (trainer/train.py restores the latest one there). Every task gets the same
    ``--run_id`` (``run_id_of``).

    Args:
        settings: the validated stack settings (the TF_CONFIG hosts use settings.namespace).
        namespace: the namespace name (an Output when the stack creates the namespace).
        claim_name: the claim every pod mounts at settings.storage.mount_path (a plain name: it is
            part of the pod templates, whose hash is the run id).
        after: resources the staging Job waits for (the node pools, the claim, the pull Secret).

    Outputs:
        cluster_spec: task type -> list of host:port.
        job_names: the task Jobs' names, chief first.
        staging_job_name.
        run_id: the ``--run_id`` of every task.
    """

    cluster_spec: pulumi.Output[dict]
    job_names: pulumi.Output[list]
    staging_job_name: pulumi.Output[str]
    run_id: pulumi.Output[str]

    def __init__(self, settings: Settings, *, namespace: pulumi.Input[str], claim_name: str,
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        prefix = settings.name_prefix
        super().__init__("tf-mnist:index:TrainingJob", prefix, None, opts)
        self._settings = settings
        self._claim_name = claim_name
        self._namespace = namespace
        spec = cs.kubernetes_cluster_spec(prefix, settings.namespace, settings.training.replicas, settings.training.ports)

        k8s.core.v1.ConfigMap(
            f"{prefix}-cluster-spec",
            metadata=self._metadata(f"{prefix}-cluster-spec", "cluster-spec"),
            data={"cluster_spec.json": json.dumps(spec, sort_keys=True, indent=2)},
            opts=pulumi.ResourceOptions(parent=self),
        )

        staging_name = f"{prefix}-stage-data"
        staging_placement = settings.placement["stage-data"]
        staging = k8s.batch.v1.Job(
            staging_name,
            metadata=self._metadata(staging_name, "stage-data",
                                    {TIMEOUT_SECONDS: str(STAGING_TIMEOUT_SECONDS)}),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=settings.training.backoff_limit,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=recommended_labels(prefix, "stage-data")),
                    spec=k8s.core.v1.PodSpecArgs(
                        restart_policy="OnFailure",
                        node_selector=pods.node_selector(staging_placement),
                        tolerations=pods.tolerations(staging_placement, uses_gpu=False),
                        priority_class_name=settings.training.priority_class_name,
                        image_pull_secrets=pods.image_pull_secrets(settings.registry.image_pull_secret),
                        containers=[k8s.core.v1.ContainerArgs(
                            name="stage",
                            image=settings.training.staging_image,
                            image_pull_policy=settings.training.ps.image_pull_policy,
                            command=["python", "-m", "trainer.stage", "--dest", settings.storage.data_dir,
                                     *(["--source", settings.training.data_source] if settings.training.data_source else [])],
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "512Mi"}),
                            volume_mounts=[self._volume_mount()],
                        )],
                        volumes=[self._volume()],
                    ),
                ),
            ),
            # Pulumi waits for this Job: its pod needs the node pools (`after`) to exist.
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )

        tasks = list(settings.training.replicas.tasks())
        run_id = run_id_of({cs.task_name(prefix, t, i): self._template(t, i, spec, None) for t, i in tasks},
                           {"podFailurePolicy": pod_failure_policy(), "podReplacementPolicy": POD_REPLACEMENT_POLICY})
        job_names: list[str] = []
        for task_type, index in tasks:
            name = cs.task_name(prefix, task_type, index)
            task = self._task(task_type)
            selector = task_selector(prefix, task_type, index)
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
                    ports=[k8s.core.v1.ServicePortArgs(name="grpc", port=task.port, target_port=task.port,
                                                      protocol="TCP")],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            waits = task_type == "chief" and settings.training.wait_for_chief
            annotations = ({TIMEOUT_SECONDS: str(settings.training.wait_timeout_minutes * 60)} if waits
                           else TASK_JOB_AWAIT)
            k8s.batch.v1.Job(
                name,
                metadata=self._metadata(name, task_type, annotations, selector),
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=settings.training.backoff_limit,
                    active_deadline_seconds=settings.training.active_deadline_seconds,
                    pod_failure_policy=pod_failure_policy(),
                    # A replacement starts only once the failed pod is gone: two pods of one
                    # task would both answer at its address. (The only value a
                    # podFailurePolicy allows; stated, not left to the default.)
                    pod_replacement_policy=POD_REPLACEMENT_POLICY,
                    template=self._template(task_type, index, spec, run_id),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[staging]),
            )
            job_names.append(name)

        self.cluster_spec = pulumi.Output.from_input(spec)
        self.job_names = pulumi.Output.from_input(job_names)
        self.staging_job_name = staging.metadata.name
        self.run_id = pulumi.Output.from_input(run_id)
        self.register_outputs({"cluster_spec": self.cluster_spec, "job_names": self.job_names,
                               "staging_job_name": self.staging_job_name, "run_id": self.run_id})

    def _task(self, task_type: str) -> TaskSettings:
        settings = self._settings
        return settings.training.task(task_type)

    def _metadata(self, name: str, component: str, annotations: Optional[dict] = None,
                  extra_labels: Optional[dict] = None) -> k8s.meta.v1.ObjectMetaArgs:
        return k8s.meta.v1.ObjectMetaArgs(
            name=name,
            namespace=self._namespace,
            labels={**recommended_labels(self._settings.name_prefix, component), **(extra_labels or {})},
            annotations=annotations,
        )

    def _volume_mount(self) -> k8s.core.v1.VolumeMountArgs:
        return k8s.core.v1.VolumeMountArgs(name=VOLUME_NAME, mount_path=self._settings.storage.mount_path)

    def _volume(self) -> k8s.core.v1.VolumeArgs:
        return k8s.core.v1.VolumeArgs(
            name=VOLUME_NAME,
            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(claim_name=self._claim_name))

    def _template(self, task_type: str, index: int, spec: cs.ClusterSpec,
                  run_id: Optional[str]) -> k8s.core.v1.PodTemplateSpecArgs:
        """One task's pod template; ``run_id`` None leaves ``--run_id`` out (see run_id_of)."""
        prefix = self._settings.name_prefix
        labels = {**recommended_labels(prefix, task_type), **task_selector(prefix, task_type, index)}
        return k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
            spec=self._task_pod(task_type, index, self._task(task_type), spec, run_id),
        )

    def _task_pod(self, task_type: str, index: int, task: TaskSettings, spec: cs.ClusterSpec,
                  run_id: Optional[str]) -> k8s.core.v1.PodSpecArgs:
        settings = self._settings
        env = [
            k8s.core.v1.EnvVarArgs(name="TF_CONFIG", value=cs.tf_config_json(spec, task_type, index)),
            # Fail RPCs to a peer that is down instead of hanging (TensorFlow's PS tutorial).
            k8s.core.v1.EnvVarArgs(name="GRPC_FAIL_FAST", value="use_caller"),
        ]
        uses_gpu = settings.training.uses_gpu(task_type)
        limits = {"memory": task.memory}
        if uses_gpu:
            limits["nvidia.com/gpu"] = str(settings.training.gpu_count)
        else:
            # ps, a CPU chief and CPU workers must not grab a GPU even on a GPU node.
            env += [k8s.core.v1.EnvVarArgs(name="NVIDIA_VISIBLE_DEVICES", value="void"),
                    k8s.core.v1.EnvVarArgs(name="CUDA_VISIBLE_DEVICES", value="")]
        placement = settings.placement[task_type]
        return k8s.core.v1.PodSpecArgs(
            # Never: a failed task gets a new pod (see the class docstring), which a
            # podFailurePolicy requires; backoffLimit caps the failures that count.
            restart_policy="Never",
            node_selector=pods.node_selector(placement),
            tolerations=pods.tolerations(placement, uses_gpu),
            priority_class_name=settings.training.priority_class_name,
            image_pull_secrets=pods.image_pull_secrets(settings.registry.image_pull_secret),
            containers=[k8s.core.v1.ContainerArgs(
                name=CONTAINER_NAME,
                image=task.image,
                image_pull_policy=task.image_pull_policy,
                command=["python", "-m", "trainer"],
                args=trainer_args(settings, run_id),
                env=env,
                ports=[k8s.core.v1.ContainerPortArgs(name="grpc", container_port=task.port, protocol="TCP")],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": task.cpu, "memory": task.memory}, limits=limits),
                volume_mounts=[self._volume_mount()],
            )],
            volumes=[self._volume()],
        )
