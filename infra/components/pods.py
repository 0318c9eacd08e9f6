"""Pod spec parts shared by every workload of the stack: placement, image pull Secrets and
the "restricted" security context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, Protocol

import pulumi_kubernetes as k8s

from infra.components.node_pools import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from infra.settings import PodIdentity, Settings
from infra.settings.constants import POD_ID

#: The toleration of the GPU pool's taint (infra/components/node_pools.py).
GPU_TOLERATION: dict[str, Any] = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


class Placement(Protocol):
    """Where one role's pods may run: the section of its ``<role>.nodeSelector`` and
    ``<role>.tolerations`` keys (worker, ps, chief, tensorboard).

    Attributes:
        node_selector: node label -> value (pod spec nodeSelector); empty = any node.
        tolerations: core/v1 Toleration objects, camelCase fields as Kubernetes spells them.
            The GPU pool's taint toleration is not among them: ``tolerations`` adds it to
            every pod that requests a GPU.
    """

    @property
    def node_selector(self) -> Mapping[str, str]: ...

    @property
    def tolerations(self) -> tuple[Mapping[str, Any], ...]: ...


def placements(settings: Settings) -> dict[str, Placement]:
    """Role (chief, worker, ps, stage-data) -> the section that places its pods:
    the staging Job takes the chief.* keys, and a GPU chief (``training.chief_uses_gpu``) the
    workers', beside whom it trains."""
    chief = settings.worker if settings.training.chief_uses_gpu else settings.chief
    return {
        "chief": chief,
        "worker": settings.worker,
        "ps": settings.ps,
        "stage-data": settings.chief,
    }


def node_selector(placement: Placement) -> dict[str, str] | None:
    """A pod's nodeSelector, None (no field) when the role has none."""
    return dict(placement.node_selector) or None


def tolerations(placement: Placement, uses_gpu: bool) -> list[k8s.core.v1.TolerationArgs] | None:
    """A pod's tolerations: the GPU pool's taint for GPU pods (always), then the role's own.

    Returns None (no field) when there are none.
    """
    items = ([GPU_TOLERATION] if uses_gpu else []) + [
        t for t in placement.tolerations if not (uses_gpu and dict(t) == GPU_TOLERATION)
    ]
    return [
        k8s.core.v1.TolerationArgs(
            key=t.get("key"),
            operator=t.get("operator"),
            value=t.get("value"),
            effect=t.get("effect"),
            toleration_seconds=t.get("tolerationSeconds"),
        )
        for t in items
    ] or None


def image_pull_secrets(secret_name: str | None) -> list[k8s.core.v1.LocalObjectReferenceArgs] | None:
    """A pod's imagePullSecrets: the configured (or created) Secret, None without one."""
    return [k8s.core.v1.LocalObjectReferenceArgs(name=secret_name)] if secret_name else None


# Pod Security Standard "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards):
# every pod of the stack passes it, so a namespace may enforce it.

#: The uid and gid every container runs as by default (pods.runAsUser, pods.runAsGroup): the
#: USER of docker/*.Dockerfile, above 10000 as checkov (CKV_K8S_40) and kube-score
#: (container-security-context-user-group-id) want, so that it is no user of the node. Any
#: non-root id works; the volume's directory must be writable by it (infra/components/storage.py
#: says what the stack does for each type).
RUN_AS_USER = POD_ID
RUN_AS_GROUP = POD_ID
#: The identity of the pods that mount no volume (the run monitor): the image's own.
IMAGE_IDENTITY = PodIdentity(run_as_user=RUN_AS_USER, run_as_group=RUN_AS_GROUP)
#: The writable scratch directory of a read-only root filesystem: TensorFlow, TensorBoard and
#: Python's tempfile write under /tmp, and HOME points there (a uid without a home directory).
SCRATCH_VOLUME = "tmp"
SCRATCH_PATH = "/tmp"
#: The scratch emptyDir's cap: TensorFlow's and TensorBoard's temporary files are a few MB.
SCRATCH_SIZE = "256Mi"
#: The namespace labels that make the API server enforce (and warn and audit) "restricted".
POD_SECURITY_LABELS = {
    f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")
}


def pod_security_context(identity: PodIdentity = IMAGE_IDENTITY) -> k8s.core.v1.PodSecurityContextArgs:
    """The pod-level securityContext of every pod: ``identity``'s non-root uid and gid (the
    settings reject uid 0), fsGroup = that gid (so volume types that honour it, unlike
    hostPath, NFS and the NAS CSI driver, are group-writable), seccomp RuntimeDefault."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True,
        run_as_user=identity.run_as_user,
        run_as_group=identity.run_as_group,
        fs_group=identity.run_as_group,
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def container_security_context() -> k8s.core.v1.SecurityContextArgs:
    """The container-level securityContext of every container: no privilege escalation, no
    capabilities, a read-only root filesystem (writes go to the volume and to SCRATCH_PATH)."""
    return k8s.core.v1.SecurityContextArgs(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
    )


#: Every container's ephemeral-storage request and limit. What counts against them: the
#: container's logs (the root filesystem is read-only, so no writable layer), which the kubelet
#: rotates at 10 MiB x 5 files by default, and the pod's scratch emptyDir (SCRATCH_SIZE, which
#: its own sizeLimit caps first). The request is what a pod typically uses (a few MB of logs
#: and temporary files); the limit leaves room for SCRATCH_SIZE plus full logs, so it never
#: evicts a pod that the sizeLimit and the log rotation let run.
EPHEMERAL_STORAGE_REQUEST = "64Mi"
EPHEMERAL_STORAGE_LIMIT = "512Mi"


def resources(requests: dict[str, str], limits: dict[str, str]) -> k8s.core.v1.ResourceRequirementsArgs:
    """A container's resources: ``requests`` and ``limits`` (cpu, memory, nvidia.com/gpu as
    Kubernetes quantities) with the ephemeral storage of EPHEMERAL_STORAGE_*."""
    return k8s.core.v1.ResourceRequirementsArgs(
        requests={**requests, "ephemeral-storage": EPHEMERAL_STORAGE_REQUEST},
        limits={**limits, "ephemeral-storage": EPHEMERAL_STORAGE_LIMIT},
    )


def volume_dir_mount(
    volume: str, mount_path: str, directory: str, read_only: bool
) -> k8s.core.v1.VolumeMountArgs:
    """One directory of the shared volume alone: ``directory`` (an absolute path under the
    volume's ``mount_path``) mounted by subPath at that same path, so that every path the
    trainer prints is the one on the volume, and nothing else of the volume is in the
    container (docs/design.md, "What a task pod may write").

    The directory must exist before the pod starts: the kubelet would make a missing one as
    root, with the mode of the volume's root (the staging Job makes the run's directory first,
    trainer.stage make_run_dir; the data and package folders exist by then).

    Raises:
        ValueError: ``directory`` is not under ``mount_path``, or is it.
    """
    root, path = PurePosixPath(mount_path), PurePosixPath(directory)
    if path == root or not path.is_relative_to(root) or ".." in path.parts:
        raise ValueError(f"{directory}: not a directory under the volume's mount path {mount_path}")
    return k8s.core.v1.VolumeMountArgs(
        name=volume, mount_path=directory, sub_path=str(path.relative_to(root)), read_only=read_only or None
    )


#: Pod condition the control plane sets on a pod it evicts, preempts or garbage-collects.
DISRUPTION_TARGET = "DisruptionTarget"


def disruption_rule() -> k8s.batch.v1.PodFailurePolicyRuleArgs:
    """A podFailurePolicy rule: a pod failed by a disruption (DISRUPTION_TARGET: eviction,
    preemption, a drained node, pod GC) is Ignored, i.e. replaced without counting against the
    Job's backoffLimit."""
    return k8s.batch.v1.PodFailurePolicyRuleArgs(
        action="Ignore",
        on_pod_conditions=[
            k8s.batch.v1.PodFailurePolicyOnPodConditionsPatternArgs(type=DISRUPTION_TARGET, status="True")
        ],
    )


def failure_policy(
    container: str, fail_job: Sequence[int], ignore: Sequence[int]
) -> k8s.batch.v1.PodFailurePolicyArgs:
    """A Job's podFailurePolicy, its rules in this order: ``container`` exiting with a code of
    ``fail_job`` fails the Job at once (a new pod would fail the same way); exiting with a code
    of ``ignore``, or a disruption (``disruption_rule``), gets a new pod that does not count
    against backoffLimit. Any other failure counts. Each list of codes is sorted and must not
    be empty (Kubernetes refuses an empty ``In``)."""

    def exit_codes(action: str, codes: Sequence[int]) -> k8s.batch.v1.PodFailurePolicyRuleArgs:
        return k8s.batch.v1.PodFailurePolicyRuleArgs(
            action=action,
            on_exit_codes=k8s.batch.v1.PodFailurePolicyOnExitCodesRequirementArgs(
                container_name=container, operator="In", values=sorted(codes)
            ),
        )

    return k8s.batch.v1.PodFailurePolicyArgs(
        rules=[exit_codes("FailJob", fail_job), exit_codes("Ignore", ignore), disruption_rule()]
    )


def scratch_volume() -> k8s.core.v1.VolumeArgs:
    """The emptyDir mounted at SCRATCH_PATH."""
    return k8s.core.v1.VolumeArgs(
        name=SCRATCH_VOLUME, empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=SCRATCH_SIZE)
    )


def scratch_mount() -> k8s.core.v1.VolumeMountArgs:
    """SCRATCH_PATH in a container."""
    return k8s.core.v1.VolumeMountArgs(name=SCRATCH_VOLUME, mount_path=SCRATCH_PATH)


def scratch_env() -> list[k8s.core.v1.EnvVarArgs]:
    """HOME and TMPDIR on the scratch directory (the image's user has no home directory)."""
    return [
        k8s.core.v1.EnvVarArgs(name="HOME", value=SCRATCH_PATH),
        k8s.core.v1.EnvVarArgs(name="TMPDIR", value=SCRATCH_PATH),
    ]


#: Seconds a task pod gets between SIGTERM and SIGKILL. On SIGTERM the chief finishes the
#: chunk of --steps_per_execution (50) steps in flight and saves a checkpoint
#: (trainer/training/loop.py); SIGTERM at an epoch's end first waits for that epoch's
#: checkpoint and evaluation (10,000 test digits). That takes a few seconds on the local
#: cluster (tests/cluster/test_stack_on_cluster.py prints it; docs/benchmarks.md has the
#: figures), so 120 s leaves room for a slow or busy NAS; the ps and the workers exit at once
#: on SIGTERM (trainer/servers.py), so only a stuck process waits this long. Kubernetes'
#: default is 30 s.
TASK_GRACE_SECONDS = 120
