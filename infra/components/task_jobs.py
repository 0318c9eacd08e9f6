"""What the task Jobs of a run share, apart from the component that creates them: the
trainer's flags of every task (``trainer_args``), what they see of the shared volume
(``task_mounts``), how a Job treats a failed pod (``pod_failure_policy``), and the hash of the pod templates that decides when `pulumi up`
replaces the Jobs, and so starts a new run (``templates_hash``; infra/components/training.py
says why).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import pods
from infra.settings import TrainingSettings
from trainer.contract import recipe
from trainer.contract.exit_codes import EXIT_SIGTERM, PERMANENT_EXIT_CODES

#: The trainer's container in every task pod.
CONTAINER_NAME = "tensorflow"
#: Pod condition the control plane sets on a pod it evicts, preempts or garbage-collects.
DISRUPTION_TARGET = pods.DISRUPTION_TARGET
#: A replacement pod starts only once the failed one is gone (see training.TrainingJob).
POD_REPLACEMENT_POLICY = "Failed"


def task_precision(precision: str, gpu_count: int) -> str:
    """``--precision`` for every task: hyperparams.precision, except that ``auto`` is float32
    on a stack with GPU workers (worker.gpuCount > 0). With a ps, the chief traces the
    training function the workers run, on a CPU node whose bfloat16 says nothing of the
    workers' GPUs (GN5's Tesla P100 has no bfloat16), so every task must agree."""
    return "float32" if precision == "auto" and gpu_count > 0 else precision


def trainer_args(
    training: TrainingSettings, data_dir: str, log_dir: str, run_id: pulumi.Input[str] | None
) -> list[pulumi.Input[str]]:
    """Container args of every task: the trainer's flags, as trainer/flags.py defines them; the
    recipe's in its table's order (``recipe.flag_args``).

    Args:
        training: the run's recipe, GPU count and peer timeout.
        data_dir: the trainer's ``--data_dir`` (where staging put MNIST).
        log_dir: the trainer's ``--log_dir`` (the run directory).
        run_id: the run's id (``--run_id``), or None to leave the flag out, which only the
            hash of the templates does (``templates_hash``).
    """
    flags: list[pulumi.Input[str]] = [
        "--data_dir",
        data_dir,
        "--log_dir",
        log_dir,
        *recipe.flag_args(
            {
                **training.hyperparams,
                "precision": task_precision(training.hyperparams["precision"], training.worker.gpus),
            }
        ),
        "--peer_timeout",
        str(training.job.peer_timeout_seconds),
    ]
    return flags if run_id is None else [*flags, "--run_id", run_id]


def task_mounts(
    volume: str, mount_path: str, data_dir: str, log_dir: str
) -> list[k8s.core.v1.VolumeMountArgs]:
    """What a task sees of the shared volume ``volume`` (mounted at ``mount_path`` elsewhere):
    ``data_dir`` read-only and ``log_dir``, its run's directory, read-write, each alone (by
    subPath, at its own path: ``pods.volume_dir_mount``), and nothing else. So a task, whose
    gRPC port runs what its peers send, cannot change the data, another run's checkpoints or
    export, or the package folders (docs/design.md, "What a task pod may write"). Both exist
    before any task starts: the staging Job, which every task Job waits for, stages the data
    and makes the run's directory (``--run_dir``)."""
    return [
        pods.volume_dir_mount(volume, mount_path, data_dir, read_only=True),
        pods.volume_dir_mount(volume, mount_path, log_dir, read_only=False),
    ]


def templates_hash(templates: dict[str, k8s.core.v1.PodTemplateSpecArgs], fixed: dict | None = None) -> str:
    """12 hex digits of the SHA-256 of every task's pod template (without the run id): what
    decides whether `pulumi up` replaces the Jobs, and so starts a new run (see training.TrainingJob).

    A change to any template replaces the Jobs (pulumi-kubernetes forces replacement on
    ``spec.template``). Changes that leave the templates alone (backoffLimit, the deadline,
    await annotations) update the Jobs in place and keep the run and its id.

    Args:
        templates: task name -> its pod template, built without ``--run_id``.
        fixed: Job spec fields hashed along (the failure policy): the API server refuses to
            change podFailurePolicy on an existing Job, so a change to it must change the
            run id, and with it the templates, which replaces the Jobs instead of failing
            the update.

    Raises:
        TypeError: a template holds an Output, whose value a preview may not know; the hash
            must be the same in every preview and update.
    """

    def plain(value: Any) -> Any:
        # An input type of pulumi_kubernetes (``...Args``) as the dict of its set fields, with
        # Kubernetes' names; anything else (an Output above all) has no value fixed in advance.
        if type(value).__module__.split(".")[0] != "pulumi_kubernetes":
            raise TypeError(f"a pod template holds {type(value).__name__}, which has no fixed value")
        return {_camel_case(name): field for name, field in vars(value).items() if field is not None}

    text = json.dumps([templates, fixed or {}], default=plain, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _camel_case(name: str) -> str:
    """A field's Kubernetes name from its pulumi_kubernetes argument name (``run_as_user`` ->
    ``runAsUser``). The rule holds for every field of a pod template but a few acronyms
    (``host_ipc`` is ``hostIPC``) that no template here sets; tests/infra/test_infra_jobs.py
    pins the dev stack's run id, which holds this hash, so a field that broke the rule would
    show there."""
    return re.sub(r"_([a-z0-9])", lambda match: match.group(1).upper(), name)


def pod_failure_policy() -> k8s.batch.v1.PodFailurePolicyArgs:
    """How a task Job treats a failed pod: a permanent error fails the Job, a stop does not count.

    * exit 2 (bad flags or TF_CONFIG), 3 (bad data), 4 (the volume is full) or 5 (the chief
      ended with one of these) of the trainer: FailJob at once, a new pod would fail the same
      way (trainer/contract/exit_codes.py PERMANENT_EXIT_CODES);
    * exit 143: the task was stopped with SIGTERM (its pod deleted, by a person or a drain)
      and the chief saved a checkpoint first: Ignore, i.e. a new pod that does not count
      against backoffLimit;
    * the DisruptionTarget condition (eviction, preemption, taint manager, pod GC): Ignore.

    Anything else (1: lost peers) counts against backoffLimit.
    """
    return pods.failure_policy(CONTAINER_NAME, fail_job=PERMANENT_EXIT_CODES, ignore=[EXIT_SIGTERM])
