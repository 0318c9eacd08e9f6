"""TrainingJob: cluster-spec ConfigMap, data staging Job, and one headless Service + Job per task."""

from __future__ import annotations

import json
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.components.labels import recommended_labels, task_selector
from infra.components.node_pools import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from infra.settings import Settings, TaskSettings
from trainer import cluster_spec as cs

CONTAINER_NAME = "tensorflow"
VOLUME_NAME = "data"
#: Pulumi's await annotations (pulumi-kubernetes): skip the wait, or bound it.
SKIP_AWAIT = "pulumi.com/skipAwait"
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"
#: Staging copies about 11 MB from the image: ten minutes covers node start and image pull.
STAGING_TIMEOUT_SECONDS = 1200


def trainer_args(settings: Settings) -> list[str]:
    """Container args of every task: the trainer's flags (team contract)."""
    return [
        "--data_dir", settings.data_dir,
        "--log_dir", settings.log_dir,
        "--epochs", str(settings.epochs),
        "--batch_size", str(settings.batch_size),
        "--learning_rate", repr(settings.learning_rate),
    ]


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

    Task Jobs skip Pulumi's await: ps and worker servers never exit and the chief trains for
    hours, which `pulumi up` must not block on; with ``wait_for_chief`` the chief's Job is
    awaited for ``wait_timeout_minutes`` instead.

    Args:
        settings: the validated stack settings (the TF_CONFIG hosts use settings.namespace).
        namespace: the namespace name (an Output when the stack creates the namespace).
        pvc_name: the claim every pod mounts at settings.mount_path.
        after: resources the staging Job waits for (the node pools).

    Outputs:
        cluster_spec: task type -> list of host:port.
        job_names: the task Jobs' names, chief first.
        staging_job_name.
    """

    cluster_spec: pulumi.Output[dict]
    job_names: pulumi.Output[list]
    staging_job_name: pulumi.Output[str]

    def __init__(self, settings: Settings, *, namespace: pulumi.Input[str], pvc_name: pulumi.Input[str],
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        prefix = settings.name_prefix
        super().__init__("tf-mnist:index:TrainingJob", prefix, None, opts)
        self._settings = settings
        self._pvc_name = pvc_name
        self._namespace = namespace
        spec = cs.kubernetes_cluster_spec(prefix, settings.namespace, settings.replicas, settings.ports)

        k8s.core.v1.ConfigMap(
            f"{prefix}-cluster-spec",
            metadata=self._metadata(f"{prefix}-cluster-spec", "cluster-spec"),
            data={"cluster_spec.json": json.dumps(spec, sort_keys=True, indent=2)},
            opts=pulumi.ResourceOptions(parent=self),
        )

        staging_name = f"{prefix}-stage-data"
        staging = k8s.batch.v1.Job(
            staging_name,
            metadata=self._metadata(staging_name, "stage-data",
                                    {TIMEOUT_SECONDS: str(STAGING_TIMEOUT_SECONDS)}),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=settings.backoff_limit,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=recommended_labels(prefix, "stage-data")),
                    spec=k8s.core.v1.PodSpecArgs(
                        restart_policy="OnFailure",
                        containers=[k8s.core.v1.ContainerArgs(
                            name="stage",
                            image=settings.staging_image,
                            image_pull_policy=settings.ps.image_pull_policy,
                            command=["python", "-m", "trainer.stage", "--dest", settings.data_dir,
                                     *(["--source", settings.data_source] if settings.data_source else [])],
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

        job_names: list[str] = []
        for task_type, index in settings.replicas.tasks():
            name = cs.task_name(prefix, task_type, index)
            task = settings.chief if task_type == "chief" else (
                settings.worker if task_type == "worker" else settings.ps)
            selector = task_selector(prefix, task_type, index)
            labels = {**recommended_labels(prefix, task_type), **selector}
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
            waits = task_type == "chief" and settings.wait_for_chief
            annotations = ({TIMEOUT_SECONDS: str(settings.wait_timeout_minutes * 60)} if waits
                           else {SKIP_AWAIT: "true"})
            k8s.batch.v1.Job(
                name,
                metadata=self._metadata(name, task_type, annotations, selector),
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=settings.backoff_limit,
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                        spec=self._task_pod(task_type, index, task, spec),
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[staging]),
            )
            job_names.append(name)

        self.cluster_spec = pulumi.Output.from_input(spec)
        self.job_names = pulumi.Output.from_input(job_names)
        self.staging_job_name = staging.metadata.name
        self.register_outputs({"cluster_spec": self.cluster_spec, "job_names": self.job_names,
                               "staging_job_name": self.staging_job_name})

    def _metadata(self, name: str, component: str, annotations: Optional[dict] = None,
                  extra_labels: Optional[dict] = None) -> k8s.meta.v1.ObjectMetaArgs:
        return k8s.meta.v1.ObjectMetaArgs(
            name=name,
            namespace=self._namespace,
            labels={**recommended_labels(self._settings.name_prefix, component), **(extra_labels or {})},
            annotations=annotations,
        )

    def _volume_mount(self) -> k8s.core.v1.VolumeMountArgs:
        return k8s.core.v1.VolumeMountArgs(name=VOLUME_NAME, mount_path=self._settings.mount_path)

    def _volume(self) -> k8s.core.v1.VolumeArgs:
        return k8s.core.v1.VolumeArgs(
            name=VOLUME_NAME,
            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(claim_name=self._pvc_name))

    def _task_pod(self, task_type: str, index: int, task: TaskSettings, spec: cs.ClusterSpec) -> k8s.core.v1.PodSpecArgs:
        settings = self._settings
        env = [
            k8s.core.v1.EnvVarArgs(name="TF_CONFIG", value=cs.tf_config_json(spec, task_type, index)),
            # Fail RPCs to a peer that is down instead of hanging (TensorFlow's PS tutorial).
            k8s.core.v1.EnvVarArgs(name="GRPC_FAIL_FAST", value="use_caller"),
        ]
        uses_gpu = task_type == "worker" and settings.gpu_count > 0
        limits = {"memory": task.memory}
        tolerations = None
        if uses_gpu:
            limits["nvidia.com/gpu"] = str(settings.gpu_count)
            tolerations = [k8s.core.v1.TolerationArgs(key=GPU_TAINT_KEY, operator="Exists",
                                                      effect=GPU_TAINT_EFFECT)]
        else:
            # ps, chief and CPU workers must not grab a GPU even on a GPU node.
            env += [k8s.core.v1.EnvVarArgs(name="NVIDIA_VISIBLE_DEVICES", value="void"),
                    k8s.core.v1.EnvVarArgs(name="CUDA_VISIBLE_DEVICES", value="")]
        return k8s.core.v1.PodSpecArgs(
            # A failed task restarts in place (same pod name and DNS); backoffLimit caps it.
            restart_policy="OnFailure",
            tolerations=tolerations,
            containers=[k8s.core.v1.ContainerArgs(
                name=CONTAINER_NAME,
                image=task.image,
                image_pull_policy=task.image_pull_policy,
                command=["python", "-m", "trainer"],
                args=trainer_args(settings),
                env=env,
                ports=[k8s.core.v1.ContainerPortArgs(name="grpc", container_port=task.port, protocol="TCP")],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": task.cpu, "memory": task.memory}, limits=limits),
                volume_mounts=[self._volume_mount()],
            )],
            volumes=[self._volume()],
        )
