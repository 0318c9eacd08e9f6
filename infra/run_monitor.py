"""The run monitor: ends a training run that cannot go on, from inside the cluster.

Standard library only: the stack delivers this file's text in a ConfigMap and the
``<prefix>-monitor`` Job runs it with the CPU trainer image's Python
(infra/components/monitor.py), so a change here needs no image rebuild. Tests import
``decide``, the pure decision over the API objects.

Every ``MONITOR_POLL_S`` seconds it lists the run's Jobs and task pods (label
``app.kubernetes.io/instance=<prefix>``; task objects also carry ``tf-replica-type``) and:

* the chief's Job has the condition Failed (backoffLimit reached, a permanent exit code, its
  deadline, a person): every other task Job of the run is ended at once. The trainer itself
  ends the others only for a chief that exits with a permanent code (its ``failed`` marker);
  a chief that crashed or was killed writes none, and the ps and workers would wait
  ``--peer_timeout`` for it, holding their nodes (and GPUs);
* a task pod has been unschedulable (PodScheduled False, reason Unschedulable) for longer
  than ``MONITOR_SCHEDULE_TIMEOUT_S`` (0 = never): every task Job is ended, the scheduler's
  message in the reason;
* a scheduled task pod has not started (its container waiting: ImagePullBackOff,
  CreateContainerConfigError, ContainerCreating on a volume that does not mount...) and made no
  progress for longer than ``MONITOR_START_TIMEOUT_S`` (0 = never), that is since its last step
  (its scheduling, a pull begun or ended, a container created: the kubelet's Events on the pod,
  infra/pod_progress.py); or one image pull of it has been in flight PULL_TIMEOUTS (4) times as
  long: every task Job is ended, the container's waiting reason, image and message (or the
  image being pulled) in the reason. A slow pull of a large image is progress, not a stuck pod;
  without the pod's Events (the list refused) the last step is its scheduling;
* the chief's Job completed, or every task Job has ended: exit 0.

Each poll it also writes the chief's progress under Kubeflow Trainer v2's names (progress,
time left, metrics) in an annotation of the chief's Job, read from the tail of the chief pod's
log, and a last time at 100 % once that Job completed, before it exits
(infra/trainer_status.py), and the task pods' spans on their nodes, for the cost (infra/run_cost.py).

It also watches the run's data staging Job (``MONITOR_STAGING_JOB``), which the stack creates
with a short ``activeDeadlineSeconds`` (data.startTimeoutSeconds), so that a staging pod that never
starts fails it: once a pod of that Job runs, the monitor raises the deadline to
``MONITOR_STAGING_DEADLINE_S`` (``staging_deadline``), the bound of the whole staging, so a long
download is not cut. Before that, while the pod progresses toward starting (a slow pull of its
image), the deadline follows it: ``MONITOR_WATCHED_START_TIMEOUT_S`` (data.startTimeoutSeconds)
past its last step, as the task pods' start timeout counts. A monitor that cannot run leaves
the short deadline in force. The setup
Job of a stack without images of its own (``MONITOR_SETUP_JOB``, infra/components/setup.py) is
watched the same way, its pod's deadline raised to ``MONITOR_SETUP_DEADLINE_S``.

A Job is ended by setting ``spec.activeDeadlineSeconds`` to 1 (a field Kubernetes lets change
on a running Job): the Job controller then fails it (reason DeadlineExceeded) and deletes
its pods. The Job is annotated ``ENDED_BECAUSE`` with the reason, which ``python -m
infra.status`` shows. Only the Jobs of this run count (their ``--run_id`` is
``MONITOR_RUN_ID``), so a monitor never ends a later run's Jobs.

Environment: MONITOR_NAMESPACE, MONITOR_PREFIX, MONITOR_RUN_ID, MONITOR_SCHEDULE_TIMEOUT_S,
MONITOR_START_TIMEOUT_S, MONITOR_STAGING_JOB and MONITOR_STAGING_DEADLINE_S (unset: staging is not
watched), MONITOR_SETUP_JOB and MONITOR_SETUP_DEADLINE_S (likewise for the setup Job),
MONITOR_WATCHED_START_TIMEOUT_S (both Jobs' start timeout; 0 or unset: only a running pod raises
their deadline), MONITOR_POLL_S (default 5), MONITOR_API_SERVER (an https URL; default the in-cluster address
``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``), MONITOR_EGRESS_PORTS (the ports
its NetworkPolicy opens, comma-separated, named when it cannot reach the server; unset: no
policy). It authenticates with the pod's service-account token and trusts the service-account CA.

Exit status: 0 the run is over; 1 the API server could not be read (or what it answered could
not be understood) MAX_FAILURES times in a row (the message says why); 2 bad environment
(EXIT_BAD_ENVIRONMENT); 3 (EXIT_UNREACHABLE) the API server never answered, UNREACHED_FAILURES
tries in a row from the start: the message names its address and port, and what opens them (a
NetworkPolicy that drops the port loses the monitor as silently as a wrong address). A poll
that fails, for any reason, is tried again: the monitor keeps no state between polls, so a new
pod (after a kill) takes over where the last one stopped.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.monitor_api import Calls


def _sibling(name: str, package: str | None = None) -> ModuleType:
    """<package>/<name>.py (default infra/): imported as a module of its package (the program,
    the tests), or, run as the monitor pod's script, from the file ``<name>.py`` beside this
    one that its ConfigMap also holds (by path: a safe-path Python puts no script directory on
    sys.path)."""
    if __package__:
        return importlib.import_module(f"{package or __package__}.{name}")
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None, f"{name}.py beside the script"
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


progress = _sibling("pod_progress")
kube = _sibling("monitor_api")
reports = _sibling("trainer_status")
usage = _sibling("run_cost")
contract = _sibling("progress", "trainer.contract")
# The names the program, infra.status and the tests know this module by.
Api, ApiError, api_server = kube.Api, kube.ApiError, kube.api_server
unreachable, give_up = kube.unreachable, kube.give_up
ENDED_BECAUSE, SERVICE_ACCOUNT_DIR, printable = kube.ENDED_BECAUSE, kube.SERVICE_ACCOUNT_DIR, kube.printable

INSTANCE_LABEL = "app.kubernetes.io/instance"
TASK_TYPE_LABEL = "tf-replica-type"
#: Consecutive failed polls before the monitor gives up: 5 minutes at the default 5 s poll,
#: longer than an API server restart or a control-plane upgrade's blip.
MAX_FAILURES = 60
#: Failed polls, none of them answered, before a monitor that has never reached the API server
#: gives up: about 30 s when each connection is refused at once, 2.5 min when each times out
#: (20 s). An address or port that never answered is a setting to fix, not a blip; the Job's
#: new pods (backoffLimit) try again.
UNREACHED_FAILURES = 6
DEFAULT_POLL_S = 5.0
EXIT_BAD_ENVIRONMENT = 2
EXIT_UNREACHABLE = 3


@dataclass
class Decision:
    """What one poll decided.

    Attributes:
        end: Job name -> the reason to end it with (patch and annotate now).
        done: the run is over: the monitor exits 0.
        why: one line on the run's state, for the monitor's log.
    """

    end: dict[str, str] = field(default_factory=dict)
    done: bool = False
    why: str = ""


def _labels(obj: Mapping) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _condition(obj: Mapping, kind: str) -> Mapping | None:
    """The condition ``kind`` of ``obj`` when its status is True, else None."""
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def job_run_id(job: Mapping) -> str | None:
    """The ``--run_id`` in the Job's first container's args, or None."""
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    args = containers[0].get("args") or []
    return args[args.index("--run_id") + 1] if "--run_id" in args[:-1] else None


def chief_job(jobs: Sequence[Mapping], run_id: str | None) -> Mapping | None:
    """The run's chief Job (tf-replica-type chief, ``--run_id`` ``run_id``; None: any), or None."""
    found = (
        j for j in jobs if _labels(j).get(TASK_TYPE_LABEL) == "chief" and run_id in (None, job_run_id(j))
    )
    return next(found, None)


def ended(job: Mapping) -> bool:
    """Whether the Job has finished: condition Complete or Failed."""
    return _condition(job, "Complete") is not None or _condition(job, "Failed") is not None


@dataclass(frozen=True)
class StartLimit:
    """How long a task pod may fail ``test`` (a function of the pod and its Events that returns
    (since when, why) or None), and how the verdict says it: ``pod P of Job J <verb> for N s
    (<key> T): why``, short of the limit ``pod P <note> for N s: why``. ``timeout_s`` is
    ``times`` the key's value T (then ``(<times> x <key> T)``). A timeout of 0: for ever."""

    test: Callable[[Mapping, Sequence[Mapping]], tuple[float, str] | None]
    timeout_s: float
    verb: str
    note: str
    key: str
    times: int = 1

    def bound(self) -> str:
        """The limit as the verdict names it: ``job.startTimeoutSeconds 900``."""
        value = f"{self.key} {self.timeout_s / self.times:g}"
        return value if self.times == 1 else f"{self.times} x {value}"


def _stuck(
    tasks: Mapping[str, Mapping],
    pods: Sequence[Mapping],
    events: Sequence[Mapping],
    now: float,
    limits: list[StartLimit],
) -> Decision | None:
    """The run's verdict on pods that cannot start: for each limit, the pod of a going task Job
    that has failed its test the longest; past the limit every going task Job is ended; short
    of it, a note (the first limit's); None when no pod fails a test."""
    notes = []
    for limit in limits:
        if limit.timeout_s <= 0:
            continue
        stuck = []
        for pod in pods:
            job = _labels(pod).get("job-name")
            going = job is not None and job in tasks and not ended(tasks[job])
            found = limit.test(pod, progress.events_of(pod, events)) if going else None
            if found is not None:
                stuck.append((found[0], pod["metadata"]["name"], job, found[1]))
        if not stuck:
            continue
        since, pod_name, job, message = min(stuck)
        if now - since >= limit.timeout_s:
            reason = (
                f"pod {pod_name} of Job {job} {limit.verb} for {now - since:.0f} s ({limit.bound()}): "
                f"{message}"
            )
            return Decision(
                end={
                    n: reason
                    for n, j in tasks.items()
                    if not ended(j) and ENDED_BECAUSE not in (j["metadata"].get("annotations") or {})
                },
                why=reason,
            )
        notes.append(f"pod {pod_name} {limit.note} for {now - since:.0f} s: {message}")
    return Decision(why=notes[0]) if notes else None


def _limits(schedule_timeout_s: float, start_timeout_s: float) -> list[StartLimit]:
    """What a task pod may not stay for long, in the order verdicts are given: unschedulable;
    not started without progress; one image pull in flight (pod_progress.PULL_TIMEOUTS times)."""
    return [
        StartLimit(
            progress.unschedulable_since,
            schedule_timeout_s,
            "could not be scheduled",
            "unschedulable",
            "job.scheduleTimeoutSeconds",
        ),
        StartLimit(
            progress.not_started_since,
            start_timeout_s,
            "did not start",
            "not started",
            "job.startTimeoutSeconds",
        ),
        StartLimit(
            progress.pulling_since,
            start_timeout_s * progress.PULL_TIMEOUTS,
            "did not start, pulling",
            "pulling",
            "job.startTimeoutSeconds",
            progress.PULL_TIMEOUTS,
        ),
    ]


def decide(
    jobs: Sequence[Mapping],
    pods: Sequence[Mapping],
    run_id: str | None,
    now: float,
    schedule_timeout_s: float,
    start_timeout_s: float = 0,
    events: Sequence[Mapping] = (),
) -> Decision:
    """What to do about the run, from its Jobs and pods as the API server lists them.

    Args:
        jobs: the Jobs labelled with the run's instance (the staging Job and the monitor's
            own are ignored: only Jobs with tf-replica-type are tasks).
        pods: the run's pods (only pods of this run's task Jobs count).
        run_id: the run's id; only task Jobs with that ``--run_id`` count (None: all).
        now: seconds since the epoch.
        schedule_timeout_s: how long a task pod may stay unschedulable; 0 = for ever.
        start_timeout_s: how long a scheduled task pod may stay unstarted without progress (its
            last step, pod_progress.last_step); one image pull in flight may take pod_progress.PULL_TIMEOUTS
            times as long; 0 = for ever.
        events: the namespace's Events about pods (only those of the run's task pods count);
            none: the pods' status alone (the last step is then the scheduling).

    Returns:
        The Jobs to end (each with its reason) and whether the run is over. A Job already
        annotated ENDED_BECAUSE is not ended again; the run is over once every task Job has
        ended or the chief's Job has completed.
    """
    tasks = {
        j["metadata"]["name"]: j
        for j in jobs
        if TASK_TYPE_LABEL in _labels(j) and (run_id is None or job_run_id(j) == run_id)
    }
    if not tasks:
        return Decision(why=f"no task Jobs of run {run_id} yet")
    chief = chief_job(list(tasks.values()), run_id)
    if chief is not None and _condition(chief, "Complete") is not None:
        return Decision(done=True, why=f"the chief's Job {chief['metadata']['name']} completed")
    if all(ended(j) for j in tasks.values()):
        return Decision(done=True, why="every task Job has ended")
    to_end = [
        name
        for name, j in tasks.items()
        if not ended(j) and ENDED_BECAUSE not in (j["metadata"].get("annotations") or {})
    ]
    failed = _condition(chief, "Failed") if chief is not None else None
    if chief is not None and failed is not None:
        name = chief["metadata"]["name"]
        reason = (chief["metadata"].get("annotations") or {}).get(ENDED_BECAUSE) or (
            f"the chief's Job {name} failed: {failed.get('reason') or 'Failed'}: "
            f"{failed.get('message') or 'no message'}"
        )
        return Decision(end={n: reason for n in to_end if n != name}, why=reason)
    stuck = _stuck(tasks, pods, events, now, _limits(schedule_timeout_s, start_timeout_s))
    if stuck is not None:
        return stuck
    return Decision(why=f"{sum(not ended(j) for j in tasks.values())} of {len(tasks)} task Jobs going")


def staging_deadline(
    jobs: Sequence[Mapping],
    pods: Sequence[Mapping],
    name: str | None,
    deadline_s: int,
    *,
    start_timeout_s: float = 0,
    events: Sequence[Mapping] = (),
) -> dict[str, int]:
    """{the watched Job's name: its new ``activeDeadlineSeconds``} when that Job (the data
    staging or the setup Job, created with the short deadline data.startTimeoutSeconds) has not
    ended and its deadline should rise; else {} (nothing to patch). It rises

    * to ``deadline_s``, the bound of the whole Job, once a pod of it runs (phase Running: its
      container started, so it is past scheduling, the image pull and the volume's mount);
    * while its pod progresses toward starting (``start_timeout_s`` > 0 and the Job has a
      start time), to ``start_timeout_s`` past the pod's last step (pod_progress.last_step: a
      pull begun or ended, a container created...), or PULL_TIMEOUTS times ``start_timeout_s``
      past the start of a first pull still in flight (pod_progress.pull_in_flight): the same
      clock as the task pods' start timeout (``decide``), so a slow pull of a large image is not
      cut while a pod that stopped progressing, or was never scheduled, still ends at its
      short deadline. Never above ``deadline_s``; never lowered.

    Args:
        jobs: the run's Jobs, as listed.
        pods: the run's pods, as listed (a pod's Job is its ``job-name`` label).
        name: the watched Job's name; None: not watched.
        deadline_s: the deadline of a pod that runs (seconds from the Job's start).
        start_timeout_s: data.startTimeoutSeconds, the Job's deadline as created; 0: only a
            running pod raises it.
        events: the namespace's pod Events (none: a pod's last step is its scheduling).
    """
    job = next((j for j in jobs if j["metadata"]["name"] == name), None)
    if name is None or job is None or ended(job) or deadline_s <= 0:
        return {}
    current = job.get("spec", {}).get("activeDeadlineSeconds") or deadline_s
    if current >= deadline_s:
        return {}
    mine = [p for p in pods if _labels(p).get("job-name") == name]
    if any(p.get("status", {}).get("phase") == "Running" for p in mine):
        return {name: deadline_s}
    started = progress.parse_time(job.get("status", {}).get("startTime"))
    if start_timeout_s <= 0 or started is None:
        return {}
    until = []
    for pod in mine:
        if pod.get("status", {}).get("phase") != "Pending":
            continue
        about = progress.events_of(pod, events)
        step = progress.last_step(pod, about)
        if step is not None:
            until.append(step[0] + start_timeout_s)
        flight = progress.pull_in_flight(pod, about)
        if flight is not None:
            until.append(flight[0] + progress.PULL_TIMEOUTS * start_timeout_s)
    wanted = min(deadline_s, math.ceil(max(until) - started)) if until else 0
    return {name: wanted} if wanted > current else {}


def _events(api: Calls, namespace: str, pods: Sequence[Mapping]) -> list[dict]:
    """The namespace's pod Events while a pod waits to start (none else: nothing to judge); a
    refused list is logged and judged without them (as before the Role granted it)."""
    if not any(progress.scheduled_at(p) and p.get("status", {}).get("phase") == "Pending" for p in pods):
        return []
    try:
        return api.pod_events(namespace)
    except ApiError as err:
        log(f"cannot list the pods' Events ({err}): judging by the pods' status alone")
        return []


def log(message: str) -> None:
    print(f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {printable(message)}", flush=True)


def raise_deadlines(
    api: Calls,
    namespace: str,
    jobs: Sequence[Mapping],
    pods: Sequence[Mapping],
    watched: Sequence[tuple[str | None, int]],
    start_timeout_s: float,
    events: Sequence[Mapping],
) -> None:
    """Patch each watched Job's deadline that ``staging_deadline`` raises, and log it."""
    for job, deadline in watched:
        for name, seconds in staging_deadline(
            jobs, pods, job, deadline, start_timeout_s=start_timeout_s, events=events
        ).items():
            api.set_deadline(namespace, name, seconds)
            runs = any(
                _labels(p).get("job-name") == name and p.get("status", {}).get("phase") == "Running"
                for p in pods
            )
            log(
                f"the pod of Job {name} {'runs' if runs else 'progresses toward starting'}: "
                f"its activeDeadlineSeconds is now {seconds}"
            )


def main(
    env: Mapping[str, str] = os.environ,
    api: Calls | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Poll until the run is over (see the module docstring); returns the exit status."""
    try:
        namespace, prefix = env["MONITOR_NAMESPACE"], env["MONITOR_PREFIX"]
        run_id = env.get("MONITOR_RUN_ID") or None
        timeout_s = float(env.get("MONITOR_SCHEDULE_TIMEOUT_S") or 0)
        start_timeout_s = float(env.get("MONITOR_START_TIMEOUT_S") or 0)
        watched_start_timeout_s = float(env.get("MONITOR_WATCHED_START_TIMEOUT_S") or 0)
        poll_s = float(env.get("MONITOR_POLL_S") or DEFAULT_POLL_S)
        watched = [
            (env.get(f"MONITOR_{job}_JOB") or None, int(env.get(f"MONITOR_{job}_DEADLINE_S") or 0))
            for job in ("STAGING", "SETUP")
        ]
    except (KeyError, ValueError) as err:
        give_up(f"run monitor: bad environment: {err!r}")
        return EXIT_BAD_ENVIRONMENT
    server = api_server(env)
    api = api or Api(server, f"{SERVICE_ACCOUNT_DIR}/token", f"{SERVICE_ACCOUNT_DIR}/ca.crt")
    selector = f"{INSTANCE_LABEL}={prefix}"
    reporter = reports.Reporter(api, namespace, contract.parse_log, log)
    recorder = usage.Recorder(api, namespace, log)
    log(
        f"watching run {run_id} of {prefix} in namespace {namespace} through the API server at {server} "
        f"(schedule timeout {timeout_s:g} s, start timeout {start_timeout_s:g} s)"
    )
    # answered: the API server has answered once (a poll, or an error it sent): its failures
    # from then on are blips, given MAX_FAILURES; before, UNREACHED_FAILURES.
    failures, last_why, answered, polled, started = 0, "", False, False, clock()
    while True:
        try:
            jobs = api.items(f"/apis/batch/v1/namespaces/{namespace}/jobs", selector)
            pods = api.items(f"/api/v1/namespaces/{namespace}/pods", selector)
            events = (
                _events(api, namespace, pods) if max(start_timeout_s, watched_start_timeout_s) > 0 else []
            )
            raise_deadlines(api, namespace, jobs, pods, watched, watched_start_timeout_s, events)
            decision = decide(jobs, pods, run_id, clock(), timeout_s, start_timeout_s, events)
            for name, reason in decision.end.items():
                api.end_job(namespace, name, reason)
                log(f"ended Job {name}: {reason}")
            reporter.poll(chief_job(jobs, run_id), pods, clock())
            recorder.poll(chief_job(jobs, run_id), jobs, pods, clock())
            failures = 0
        except Exception as err:  # noqa: BLE001 - any failed poll is tried again, up to MAX_FAILURES
            # ApiError (the API server refused or was out of reach), or an answer this script
            # could not understand: either may pass; a watcher that dies leaves the run unwatched.
            err = err if isinstance(err, ApiError) else ApiError(f"{type(err).__name__}: {err}")
            failures, answered = failures + 1, answered or err.reached
            limit = MAX_FAILURES if answered else UNREACHED_FAILURES
            log(f"cannot read the run ({failures} of {limit}): {err}")
            if failures >= limit and not answered:
                egress = env.get("MONITOR_EGRESS_PORTS", "")
                give_up(unreachable(server, prefix, egress, failures, clock() - started, err))
                return EXIT_UNREACHABLE
            if failures >= limit:
                give_up(f"run monitor: giving up after {failures} failed polls: {err}")
                return 1
        else:
            if not polled:
                log(f"reached the API server at {server}")
            answered = polled = True
            if decision.why != last_why:
                log(decision.why)
                last_why = decision.why
            if decision.done:
                return 0
        sleep(poll_s)


if __name__ == "__main__":
    sys.exit(main())
