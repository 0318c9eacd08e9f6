"""How `pulumi up` waits for the chief with job.waitForChief: until the chief's Job ends, either
way, then fails with the Job's reason when it failed.

Not pulumi-kubernetes' own Job await: in 4.25 (provider/pkg/await/job.go, with cloud-ready-checks
1.3.0 pkg/kubernetes/job/check.go ``collectJobConditionErrors``) it fails on a Failed condition
only of reason BackoffLimitExceeded or DeadlineExceeded. A podFailurePolicy FailJob rule (the
trainer's permanent exit codes, task_jobs.pod_failure_policy) fails the Job with reason
PodFailurePolicy, which it takes for a Job still running: `pulumi up` waited out
job.waitTimeoutMinutes (hours). The staging Job avoids FailJob instead (staging.py,
STAGE_BACKOFF_LIMIT 0); the chief cannot: its failures worth a restart (exit 1) must count
against job.backoffLimit.

So the chief's Job is awaited with WAIT_FOR_END, a ``pulumi.com/waitFor`` JSONPath that holds
once the Job has ended, whatever the end (an await annotation replaces the built-in await:
provider/pkg/await/await.go, "Use our built-in await logic only if the user hasn't specified any
await overrides"), and ``check`` reads the status the await ended on: a failed Job fails the
program with ChiefFailedError, naming the condition's reason, its message and what the trainer's
exit code means.

Only the `pulumi up` that awaited the failure fails on it. An up that leaves the Job as it is
gets the status from the state, and so does the program run of `pulumi destroy --run-program`
(the teardown the README gives), where an error would stop the teardown: the engine deletes only
after the program ended well (pulumi/pulumi pkg/resource/deploy/deployment_executor.go, a source
error bails before performDeletes). A failure that the state recorded before the program started
(``failed_before``, by the Job's uid) is therefore only a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.run_monitor import ENDED_BECAUSE
from infra.stack_state import StateUnreadable, read_stack_resources
from trainer.contract.exit_codes import PERMANENT_REASONS

#: Job conditions that end a Job well: Kubernetes >= 1.31 sets SuccessCriteriaMet first, then
#: Complete once the pods are gone.
SUCCEEDED = ("SuccessCriteriaMet", "Complete")
#: Job conditions that end it badly, likewise: FailureTarget first, then Failed. A pod failure
#: that a podFailurePolicy Ignore rule or job.backoffLimit lets a new pod follow (exit 143,
#: DisruptionTarget, exit 1 below the limit) sets neither.
FAILED = ("FailureTarget", "Failed")
#: The chief's ``pulumi.com/waitFor``: one RFC 9535 JSONPath (pulumi-kubernetes 4.25,
#: provider/pkg/jsonpath/jsonpath.go: "==" is the comparison, the one "=" sets the value), true
#: once a condition of SUCCEEDED or FAILED is True. One expression, not a JSON list: a list means
#: that every expression in it must hold (metadata/overrides.go ReadyCondition, condition.NewAll).
WAIT_FOR_END = (
    "jsonpath={.status.conditions[?("
    + "||".join(f'@.type=="{kind}"' for kind in (*SUCCEEDED, *FAILED))
    + ")].status}=True"
)
#: What a Failed condition's reason says, beyond its message.
REASONS = {
    "BackoffLimitExceeded": (
        "Its pods failed more often than job.backoffLimit allows, each with an exit that a new "
        "pod might not repeat (1: a lost peer, or a crash)."
    ),
    "DeadlineExceeded": "It ran longer than job.activeDeadlineSeconds, or the run monitor ended it.",
}
#: The exit code in the message of a FailJob rule's condition (Kubernetes' Job controller,
#: pkg/controller/job/pod_failure_policy.go: "Container %s for pod %s/%s failed with exit code
#: %v matching %v rule at index %d").
EXIT_CODE = re.compile(r"\bexit code (\d+)\b")


class ChiefFailedError(pulumi.RunError):
    """The chief's Job failed while `pulumi up` waited for it (job.waitForChief); Pulumi prints
    the message without a traceback."""


def failure(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The condition of FAILED that ended a Job of ``status`` (Failed over FailureTarget), or
    None when it has not failed. ``status``: the Job's status as the API server has it, or the
    SDK's JobStatus (the keys read are the same in both)."""
    found = [
        c
        for c in (status or {}).get("conditions") or []
        if c.get("type") in FAILED and c.get("status") == "True"
    ]
    return max(found, key=lambda c: FAILED.index(c["type"]), default=None)


def failure_message(
    job: str,
    namespace: str,
    condition: Mapping[str, Any],
    annotations: Mapping[str, str] | None,
    log_dir: str,
) -> str:
    """Why the chief's Job ``job`` failed: the condition's reason and message, what the trainer's
    exit code in it means (trainer/contract/exit_codes.py), the run monitor's reason when it
    ended the Job (annotation ENDED_BECAUSE), and where the chief's own error is."""
    reason = condition.get("reason") or "no reason given"
    text = (condition.get("message") or "no message").rstrip(".")
    lines = [f"The chief's Job {namespace}/{job} failed ({reason}): {text}."]
    code = EXIT_CODE.search(text)
    if code and int(code.group(1)) in PERMANENT_REASONS:
        lines.append(
            f"Exit {code.group(1)} of the trainer means {PERMANENT_REASONS[int(code.group(1))]}: a "
            "new pod would fail the same way, so the Job's podFailurePolicy failed it at once."
        )
    elif reason in REASONS:
        lines.append(REASONS[reason])
    if (annotations or {}).get(ENDED_BECAUSE):
        lines.append(f"The run monitor ended it: {(annotations or {})[ENDED_BECAUSE]}")
    lines.append(
        f"The chief's error ends its log, {log_dir}/logs/chief-0.log on the volume "
        f"(`kubectl -n {namespace} logs job/{job}`); `python -m infra.status` shows every task."
    )
    return "\n".join(lines)


def failed_job_uids(resources: Mapping[str, Any]) -> frozenset[str]:
    """The uids of the Jobs that a stack's state (infra.stack_state.read_stack_resources: urn ->
    ``{"type", "outputs"}``) records as failed."""
    uids = set()
    for entry in resources.values():
        if not isinstance(entry, Mapping) or entry.get("type") != "kubernetes:batch/v1:Job":
            continue
        outputs = entry.get("outputs") or {}
        uid = (outputs.get("metadata") or {}).get("uid")
        if uid and failure(outputs.get("status")) is not None:
            uids.add(str(uid))
    return frozenset(uids)


def failed_before(state: Callable[[], Mapping[str, Any]] = read_stack_resources) -> frozenset[str]:
    """``failed_job_uids`` of this stack's state (``state()``). Read before the program
    registers anything (infra/stack_state.py says why); a state that cannot be read gives none,
    with a warning."""
    try:
        return failed_job_uids(state())
    except StateUnreadable as error:
        pulumi.log.warn(
            f"could not read this stack's state ({error}): a chief's Job that failed before this "
            "`pulumi up` fails it again"
        )
        return frozenset()


def check(
    job: k8s.batch.v1.Job, *, name: str, namespace: str, log_dir: str, failed_before: Collection[str]
) -> pulumi.Output[None]:
    """Fail the program with ChiefFailedError when the chief's Job ``job`` (``namespace``/``name``,
    awaited with WAIT_FOR_END) has failed; warn instead in a preview (`pulumi up` will fail) and
    when its uid is among ``failed_before`` (an earlier up failed on it).

    Returns:
        The check's Output: the SDK awaits it before the program ends, and its error fails the
        program. A preview of a new Job leaves its status unknown, and the check does not run.
    """

    def verdict(values: list[Any]) -> None:
        metadata, status = values
        condition = failure(status)
        if condition is None:
            return
        message = failure_message(name, namespace, condition, (metadata or {}).get("annotations"), log_dir)
        if (metadata or {}).get("uid") in failed_before:
            pulumi.log.warn(
                f"{message}\nAn earlier `pulumi up` failed on this Job; this one leaves it as it is.",
                resource=job,
            )
        elif pulumi.runtime.is_dry_run():
            pulumi.log.warn(f"{message}\n`pulumi up` will fail on it.", resource=job)
        else:
            raise ChiefFailedError(message)

    return pulumi.Output.all(job.metadata, job.status).apply(verdict)
