"""What ``infra.status`` knows about a run: its task rows, why a task does not run, the run
monitor's verdict and the newest warnings, read from the objects ``kubectl get`` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from infra import trainer_status as trainer
from infra.run_monitor import ENDED_BECAUSE
from infra.status.cost import run_cost_of
from infra.status.kubectl import Cluster, StatusError
from trainer.contract.progress import ParsedLog, parse_log

EXIT_FINISHED, EXIT_FAILED, EXIT_RUNNING, EXIT_UNREADABLE = 0, 1, 3, 4
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
TASK_TYPE_LABEL = "tf-replica-type"
TASK_INDEX_LABEL = "tf-replica-index"
TASK_ORDER = {"chief": 0, "worker": 1, "ps": 2}
#: Waiting reasons of a container that is merely on its way (not a reason it cannot start).
STARTING = frozenset({"ContainerCreating", "PodInitializing"})
#: The staging Job's component label (infra/components/training.py) and the run's states
#: before any task Job exists: its Job pending (no pod running yet), running, failed.
STAGE_COMPONENT = "stage-data"
STAGING_PENDING, STAGING_RUNNING, STAGING_FAILED = "Staging pending", "Staging running", "Staging failed"
#: How many of the newest Warning events the view shows.
NEWEST_EVENTS = 5


@dataclass
class TaskRow:
    """One task: its Job and newest pod, and why it is not running where that is known."""

    task: str
    job: str
    state: str  # Complete, Failed, Running, Pending
    phase: str  # the newest pod's phase, or "-"
    restarts: int
    node: str
    age_s: float | None
    #: Why the task is not (or no longer) running: waiting reasons with the image, the
    #: scheduler's message, an unbound claim, the exit of a failed container, the Job's failure.
    why: list[str] = field(default_factory=list)
    #: The run monitor's reason for ending this task's Job (its ended-because annotation).
    ended_because: str | None = None


@dataclass
class EventRow:
    """One Warning event about an object of the run (``kubectl get events``)."""

    object: str  # kind/name
    reason: str
    message: str
    count: int
    age_s: float | None


@dataclass
class RunStatus:
    """Everything the view prints."""

    prefix: str
    namespace: str
    state: str  # Finished, Failed, Finishing, Running, Pending
    tasks: list[TaskRow]
    progress: ParsedLog
    log_dir: str | None
    chief_pod: str | None
    tensorboard: str
    run_id: str | None = None
    notes: list[str] = field(default_factory=list)
    #: The run monitor Job's state (Complete, Failed, Running, Pending), None without one.
    monitor: str | None = None
    #: Why a Failed monitor Job failed: its newest pod's exit and the script's last line (an
    #: API server it never reached, by address and port), else the Job's own failure.
    monitor_why: list[str] = field(default_factory=list)
    #: Claim name -> its phase, for every claim of the run (its instance label).
    claims: dict[str, str] = field(default_factory=dict)
    #: The newest Warning events about the run's pods, Jobs and claims, newest first.
    warnings: list[EventRow] = field(default_factory=list)
    #: The data staging Job (task ``stage-data``), None without one.
    staging: TaskRow | None = None
    #: The chief's progress under Kubeflow Trainer v2's names (infra/trainer_status.py:
    #: progressPercentage, estimatedRemainingSeconds, metrics, lastUpdatedTime): the run
    #: monitor's annotation on the chief's Job when present, else made here from the chief's
    #: log (its lastUpdatedTime the time of this view); None before any progress line.
    trainer_status: dict[str, Any] | None = None
    #: Where trainer_status comes from: "annotation", "log", or None.
    trainer_status_source: str | None = None
    #: The run's cost estimate (infra/status/cost.py's run_cost_of), None before a task pod started.
    cost: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """0 Finished, 1 Failed or Staging failed (the run cannot start), 3 anything else."""
        return {"Finished": EXIT_FINISHED, "Failed": EXIT_FAILED, STAGING_FAILED: EXIT_FAILED}.get(
            self.state, EXIT_RUNNING
        )


def _time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    return datetime.strptime(stamp[:19] + "Z", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _condition(obj: dict, kind: str) -> dict | None:
    return next(
        (
            c
            for c in obj.get("status", {}).get("conditions") or []
            if c.get("type") == kind and c.get("status") == "True"
        ),
        None,
    )


def job_state(job: dict) -> str:
    """Complete, Failed, Running (a pod active) or Pending."""
    if _condition(job, "Complete"):
        return "Complete"
    if _condition(job, "Failed"):
        return "Failed"
    if job.get("status", {}).get("active"):
        return "Running"
    return "Pending"


def pod_why(pod: dict, claims: dict[str, str]) -> list[str]:
    """Why ``pod`` does not run, in the API's words: each container's waiting reason (with the
    image) or failed exit, the scheduler's PodScheduled=False message, a claim not Bound."""
    found = []
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            found.append(f"{cond.get('reason') or 'NotScheduled'}: {cond.get('message') or 'no message'}")
    images = {c["name"]: c.get("image", "?") for c in pod.get("spec", {}).get("containers") or []}
    for status in pod.get("status", {}).get("containerStatuses") or []:
        image = images.get(status.get("name"), status.get("image", "?"))
        waiting = (status.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in STARTING:
            message = f": {waiting['message']}" if waiting.get("message") else ""
            found.append(f"{waiting.get('reason')} (image {image}){message}")
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode"):
            # The termination message's last line: the stager's error (FallbackToLogsOnError).
            lines = (terminated.get("message") or "").strip().splitlines()
            found.append(
                f"exited {terminated['exitCode']} ({terminated.get('reason') or 'Error'})"
                + (f": {lines[-1]}" if lines else "")
            )
    for volume in pod.get("spec", {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and claims.get(claim, "missing") != "Bound":
            found.append(f"claim {claim} is {claims.get(claim, 'missing')}, not Bound")
    return found


def _task_row(name: str, job: dict, mine: list[dict], claims: dict[str, str], now: datetime) -> TaskRow:
    labels = job["metadata"]["labels"]
    task = (
        f"{labels[TASK_TYPE_LABEL]}-{labels.get(TASK_INDEX_LABEL, '0')}"
        if TASK_TYPE_LABEL in labels
        else STAGE_COMPONENT
    )
    newest = mine[-1] if mine else None
    restarts = int(job.get("status", {}).get("failed") or 0) + sum(
        int(c.get("restartCount") or 0)
        for p in mine
        for c in p.get("status", {}).get("containerStatuses") or []
    )
    started = _time(job.get("status", {}).get("startTime") or job["metadata"].get("creationTimestamp"))
    why = pod_why(newest, claims) if newest else []
    failed = _condition(job, "Failed")
    if failed:
        why.append(f"Job failed: {failed.get('reason') or 'Failed'}: {failed.get('message') or 'no message'}")
    return TaskRow(
        task=task,
        job=name,
        state=job_state(job),
        phase=newest["status"].get("phase", "-") if newest else "-",
        restarts=restarts,
        node=(newest or {}).get("spec", {}).get("nodeName") or "-",
        age_s=(now - started).total_seconds() if started else None,
        why=why,
        ended_because=(job["metadata"].get("annotations") or {}).get(ENDED_BECAUSE),
    )


def warnings_about(
    events: list[dict], names: set[str], now: datetime, pods_of: str | None = None
) -> list[EventRow]:
    """The NEWEST_EVENTS newest Warning events whose object is one of ``names`` or, with
    ``pods_of`` (a Job's name), a pod of that Job gone since (``<job>-<suffix>``), newest first."""

    def when(event: dict) -> str:
        return (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or event.get("metadata", {}).get("creationTimestamp")
            or ""
        )

    def about(involved: dict) -> bool:
        name = involved.get("name") or ""
        return name in names or bool(
            pods_of and involved.get("kind") == "Pod" and name.startswith(f"{pods_of}-")
        )

    mine = sorted(
        (e for e in events if e.get("type", "Warning") == "Warning" and about(e.get("involvedObject", {}))),
        key=when,
        reverse=True,
    )
    out = []
    for event in mine[:NEWEST_EVENTS]:
        at = _time(when(event))
        involved = event["involvedObject"]
        out.append(
            EventRow(
                object=f"{involved.get('kind', '?').lower()}/{involved['name']}",
                reason=event.get("reason") or "-",
                message=(event.get("message") or "").strip(),
                count=int(event.get("count") or 1),
                age_s=(now - at).total_seconds() if at else None,
            )
        )
    return out


def collect(
    cluster: Cluster,
    prefix: str,
    namespace: str,
    now: datetime,
    tensorboard_url: str | None = None,
    run_id: str | None = None,
    prices: Mapping[str, Any] | None = None,
    outputs_read: bool = False,
) -> RunStatus:
    """Read the run of ``prefix`` through ``cluster``; ``prices`` and ``outputs_read`` price the
    run's nodes (infra/status/cost.py ``run_cost_of``).

    Before the task Jobs exist (staging runs first, and they wait for it), the run's state is
    its staging Job's (``_staging_state``): Staging pending, running or failed, with the staging
    pod's reasons (``pod_why``: the scheduler's message, a waiting container, the stager's
    error) and the Warning events of its pods, gone ones included.

    Raises:
        StatusError: no task or staging Job carries the prefix's instance label.
    """
    objects = cluster.get("jobs,pods,pvc", f"{INSTANCE_LABEL}={prefix}")
    all_jobs = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Job"}
    jobs = {n: o for n, o in all_jobs.items() if TASK_TYPE_LABEL in o["metadata"].get("labels", {})}
    staging_job = _component_job(all_jobs, STAGE_COMPONENT)
    if not jobs and staging_job is None:
        raise StatusError(
            f"no task or staging Jobs labelled {INSTANCE_LABEL}={prefix} in namespace "
            f"{namespace}: check --prefix, --namespace and --kubeconfig (or "
            "whether `pulumi up` has run)"
        )
    claims = {
        o["metadata"]["name"]: o.get("status", {}).get("phase", "Pending")
        for o in objects
        if o.get("kind") == "PersistentVolumeClaim"
    }
    pods = _pods_by_job(objects)
    rows = [_task_row(name, job, pods.get(name, []), claims, now) for name, job in jobs.items()]
    chief_pod, log_dir, chief_run_id = _chief(jobs, pods)
    run_id = chief_run_id if run_id is None else run_id
    rows.sort(key=lambda r: (TASK_ORDER.get(r.task.split("-")[0], 9), int(r.task.rsplit("-", 1)[1])))
    progress = parse_log(cluster.logs(chief_pod)) if chief_pod else ParsedLog(steps=[])
    monitor_job = _component_job(all_jobs, "monitor")
    monitor = job_state(monitor_job) if monitor_job is not None else None
    monitor_why = _monitor_why(monitor_job, pods, claims) if monitor == "Failed" else []
    names = set(all_jobs) | set(claims) | {p["metadata"]["name"] for ps in pods.values() for p in ps}
    tensorboard = tensorboard_url or (
        f"kubectl --namespace {namespace} port-forward "
        f"service/{prefix}-tensorboard 6006:80, then http://127.0.0.1:6006/"
    )
    staging = _staging_row(staging_job, pods, claims, now)
    trainer_status, source = _trainer_status(jobs, progress, now)
    cost = _cost(cluster, objects, jobs, now, prices, outputs_read)
    return RunStatus(
        prefix=prefix,
        namespace=namespace,
        state=_run_state(rows) if rows else _staging_state(staging),
        tasks=rows,
        progress=progress,
        log_dir=log_dir,
        chief_pod=chief_pod,
        tensorboard=tensorboard,
        run_id=run_id,
        monitor=monitor,
        monitor_why=monitor_why,
        claims=dict(sorted(claims.items())),
        warnings=warnings_about(
            cluster.events(), names, now, staging.job if staging and staging.state != "Complete" else None
        ),
        staging=staging,
        trainer_status=trainer_status,
        trainer_status_source=source,
        cost=cost,
    )


def _cost(
    cluster: Cluster,
    objects: list[dict],
    jobs: dict[str, dict],
    now: datetime,
    prices: Mapping[str, Any] | None,
    outputs_read: bool,
) -> dict[str, Any] | None:
    """The run's cost estimate (``run_cost_of``) of its task ``jobs`` and the pods in ``objects``,
    with the cluster's nodes (listed only once there are task Jobs)."""
    chief = next((j for j in jobs.values() if j["metadata"]["labels"][TASK_TYPE_LABEL] == "chief"), None)
    pods = [o for o in objects if o.get("kind") == "Pod"]
    nodes = cluster.nodes() if jobs else []
    return run_cost_of(chief, list(jobs.values()), pods, nodes, now.timestamp(), prices, outputs_read)


def _trainer_status(
    jobs: dict[str, dict], progress: ParsedLog, now: datetime
) -> tuple[dict[str, Any] | None, str | None]:
    """(the chief's trainer status, where it comes from): its Job's annotation
    (trainer_status.ANNOTATION, written by the run monitor) when present; else made from
    ``progress``, the chief's log (100 % once its Job completed); (None, None) before either."""
    chief = next((j for j in jobs.values() if j["metadata"]["labels"][TASK_TYPE_LABEL] == "chief"), None)
    if chief is None:
        return None, None
    written = trainer.read(chief)
    if written is not None:
        return written, "annotation"
    made = trainer.trainer_status(
        progress,
        now.timestamp(),
        epochs=trainer.job_epochs(chief),
        finished=job_state(chief) == "Complete",
    )
    return (made, "log") if made is not None else (None, None)


def _monitor_why(job: dict | None, pods: dict[str | None, list[dict]], claims: dict[str, str]) -> list[str]:
    """Why the failed monitor Job ``job`` failed: its newest pod's reasons (``pod_why``), else
    the Job's Failed condition."""
    assert job is not None
    mine = pods.get(job["metadata"]["name"]) or []
    found = pod_why(mine[-1], claims) if mine else []
    failed = _condition(job, "Failed") or {}
    return found or [
        f"Job failed: {failed.get('reason') or 'Failed'}: {failed.get('message') or 'no message'}"
    ]


def _component_job(jobs: dict[str, dict], component: str) -> dict | None:
    """The first of ``jobs`` whose component label is ``component`` (the staging Job, the run
    monitor's), None without one."""
    return next(
        (job for job in jobs.values() if job["metadata"].get("labels", {}).get(COMPONENT_LABEL) == component),
        None,
    )


def _pods_by_job(objects: list[dict]) -> dict[str | None, list[dict]]:
    """The pods among ``objects`` by their Job's name (label job-name), oldest first."""
    pods: dict[str | None, list[dict]] = {}
    for obj in objects:
        if obj.get("kind") == "Pod":
            pods.setdefault(obj["metadata"].get("labels", {}).get("job-name"), []).append(obj)
    for mine in pods.values():
        mine.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return pods


def _chief(
    jobs: dict[str, dict], pods: dict[str | None, list[dict]]
) -> tuple[str | None, str | None, str | None]:
    """The chief's newest pod, and the ``--log_dir`` and ``--run_id`` of its Job's container;
    None for each one missing."""
    chief_pod = log_dir = run_id = None
    for name, job in jobs.items():
        if job["metadata"]["labels"][TASK_TYPE_LABEL] == "chief":
            chief_pod = pods[name][-1]["metadata"]["name"] if pods.get(name) else None
            args = job["spec"]["template"]["spec"]["containers"][0].get("args") or []
            if "--log_dir" in args[:-1]:
                log_dir = args[args.index("--log_dir") + 1]
            if run_id is None and "--run_id" in args[:-1]:
                run_id = args[args.index("--run_id") + 1]
    return chief_pod, log_dir, run_id


def _staging_row(
    staging_job: dict | None, pods: dict[str | None, list[dict]], claims: dict[str, str], now: datetime
) -> TaskRow | None:
    """The staging Job's row, None without the Job. Its state is Pending, not Running, while
    its pod waits: the Job counts a waiting pod as active."""
    if staging_job is None:
        return None
    name = staging_job["metadata"]["name"]
    staging = _task_row(name, staging_job, pods.get(name, []), claims, now)
    if staging.state == "Running" and staging.phase != "Running":
        staging.state = "Pending"
    return staging


def _staging_state(staging: TaskRow | None) -> str:
    """The run's state before any task Job exists, from its staging row (whose state is Running
    only while its pod runs): failed, running, pending; Pending once it completed (the task
    Jobs are about to be created)."""
    if staging is None or staging.state == "Complete":
        return "Pending"
    return {"Failed": STAGING_FAILED, "Running": STAGING_RUNNING}.get(staging.state, STAGING_PENDING)


def _run_state(rows: list[TaskRow]) -> str:
    """Failed (a task Job failed), Finished (every task Job completed), Finishing (the chief's
    completed, a ps or worker has yet to see its done marker: they end within a poll of it, see
    trainer/servers.py), Running or Pending.

    Only Finished and Failed are ends: ``--watch`` keeps refreshing through Finishing, so that
    when it returns 0 no task pod of the run is left running.
    """
    chief = next((r for r in rows if r.task.startswith("chief-")), None)
    if any(r.state == "Failed" for r in rows):
        return "Failed"
    if chief is not None and chief.state == "Complete":
        return "Finished" if all(r.state == "Complete" for r in rows) else "Finishing"
    if any(r.state == "Running" for r in rows):
        return "Running"
    return "Pending"
