"""What the data staging Job runs and how long it may take: its command, its limits and
deadlines, and the data source it reads from a Secret.

How long: a stager that fails exits at once (trainer/stage.py; a permanent download error is not
tried again, a transient one for about a minute), and its first failed pod fails the Job
(STAGE_BACKOFF_LIMIT). A pod that never starts (it cannot be scheduled, its claim is not bound, its
image cannot be pulled, its volume does not mount) fails the Job through its
activeDeadlineSeconds, data.startTimeoutSeconds (``start_deadline``); once the pod runs, the run
monitor (infra/run_monitor.py ``staging_deadline``) raises the deadline to
STAGING_TIMEOUT_SECONDS, the bound of `pulumi up`'s wait, so that a long download is not cut.
Either way the Job fails with reason BackoffLimitExceeded or DeadlineExceeded, the two that
pulumi-kubernetes's Job await reports at once, printing the pod's messages with it.

A data.source set with ``--secret`` (a presigned URL: infra/url_credentials.py) never
enters the Job's command, which ``kubectl get job -o yaml`` shows and the state stores in plain
text: the stack writes it into the Secret ``<prefix>-data-source`` (a Pulumi secret, so the
state holds it encrypted), and the staging container reads it from the environment variable
SOURCES_ENV (``python -m trainer.stage --sources_env``). A plain data.source stays in the
command, as before, so its staging Job does not change.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from infra.components import pods
from infra.values.parsers import source_list

#: Staging copies or downloads about 11 MB (55 MB for the full set) with one Python thread.
STAGE_REQUESTS = {"cpu": "100m", "memory": "256Mi"}
STAGE_LIMITS = {"cpu": "1", "memory": "512Mi"}
#: How long `pulumi up` waits for staging as a whole (pulumi.com/timeoutSeconds), and the Job's
#: activeDeadlineSeconds once its pod runs: room for a large data set over a slow link.
STAGING_TIMEOUT_SECONDS = 1200
#: Pod condition the control plane sets on a pod it evicts, preempts or garbage-collects.
DISRUPTION_TARGET = pods.DISRUPTION_TARGET
#: The staging Job's backoffLimit: its first failed pod fails it. A podFailurePolicy FailJob
#: rule would too, but its Failed condition has reason PodFailurePolicy, which the Job await of
#: pulumi-kubernetes (4.25, cloud-ready-checks' job checker) does not take for a failure: it
#: reports only BackoffLimitExceeded and DeadlineExceeded, and waited out STAGING_TIMEOUT_SECONDS
#: (seen on the local cluster). What fails staging (a volume it cannot write, exit 6; a checksum;
#: a source) fails it again at once, and the next `pulumi up` retries it anyway (REPLACE_UNREADY).
STAGE_BACKOFF_LIMIT = 0
#: The environment variable that holds the sources as a JSON list of strings.
SOURCES_ENV = "DATA_SOURCES"
#: The Secret's key that holds them.
SOURCES_KEY = "sources"
SECRET = "kubernetes:core/v1:Secret"


def start_deadline(start_timeout_seconds: int) -> int:
    """The staging Job's activeDeadlineSeconds as created: data.startTimeoutSeconds, so a pod that
    never starts fails the Job then (seconds from the Job's start, which the Job controller sets
    when it creates the first pod).

    Raises:
        ValueError: outside 1..STAGING_TIMEOUT_SECONDS (the key's parser already refuses it).
    """
    if not 0 < start_timeout_seconds <= STAGING_TIMEOUT_SECONDS:
        raise ValueError(
            f"data.startTimeoutSeconds {start_timeout_seconds}: must be between 1 and "
            f"{STAGING_TIMEOUT_SECONDS}"
        )
    return start_timeout_seconds


def stage_failure_policy() -> k8s.batch.v1.PodFailurePolicyArgs:
    """How the staging Job treats a failed pod: a disruption (DisruptionTarget: eviction,
    preemption, a drained node) gets a new pod, not counted against STAGE_BACKOFF_LIMIT; any
    other failure fails the Job."""
    return k8s.batch.v1.PodFailurePolicyArgs(rules=[pods.disruption_rule()])


def source_secret_name(name: str) -> str:
    """The data source Secret's name: ``<name>-data-source``."""
    return f"{name}-data-source"


def stage_command(
    data_dir: str,
    source: str | tuple[str, ...] | None,
    volume_hint: str = "",
    from_secret: bool = False,
    run_dir: str | None = None,
) -> list[str]:
    """The staging Job's command: ``python -m trainer.stage --dest DIR``, with one ``--source``
    per URL of a list, the one source, or none (the sample in the image), or, ``from_secret``,
    ``--sources_env DATA_SOURCES`` instead of them; ``--volume_hint`` when given (the end of
    its error on a volume it cannot write); last ``--run_dir RUN_DIR`` when given (the run
    directory it makes for the task pods, which mount it alone: trainer.stage make_run_dir)."""
    sources = (
        ["--sources_env", SOURCES_ENV]
        if from_secret
        else [a for s in source_list(source) for a in ("--source", s)]
    )
    run = ["--run_dir", run_dir] if run_dir else []
    hint = ["--volume_hint", volume_hint] if volume_hint else []
    return ["python", "-m", "trainer.stage", "--dest", data_dir, *sources, *hint, *run]


def source_secret(
    name: str, source: str | tuple[str, ...], metadata: k8s.meta.v1.ObjectMetaArgs, parent: pulumi.Resource
) -> k8s.core.v1.Secret:
    """The Secret ``metadata`` names, holding ``source`` under SOURCES_KEY as a JSON list, its
    value a Pulumi secret (encrypted in the state, hidden in the preview)."""
    return k8s.core.v1.Secret(
        name,
        metadata=metadata,
        type="Opaque",
        string_data=pulumi.Output.secret({SOURCES_KEY: json.dumps(source_list(source))}),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def source_env(secret_name: str) -> list[k8s.core.v1.EnvVarArgs]:
    """SOURCES_ENV from the SOURCES_KEY of the Secret ``secret_name`` (a plain name: the pod
    template holds no Output)."""
    return [
        k8s.core.v1.EnvVarArgs(
            name=SOURCES_ENV,
            value_from=k8s.core.v1.EnvVarSourceArgs(
                secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret_name, key=SOURCES_KEY)
            ),
        )
    ]
