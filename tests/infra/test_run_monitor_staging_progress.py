"""The watched Jobs' short deadline follows their pod's progress (infra/run_monitor.py
``staging_deadline`` with ``start_timeout_s``): a slow first pull of the staging pod's image is
not cut at data.startTimeoutSeconds, while a pod that stops progressing, or is never scheduled,
still ends there. Jobs, pods and Events as the API lists them."""

from __future__ import annotations

import copy

from test_run_monitor import ENV, NOW, PULL_IMAGE, job
from test_run_monitor_progress import event
from test_run_monitor_staging import LONG, STAGING, StagingApi, staging_job

from infra import run_monitor as rm

#: data.startTimeoutSeconds: the Job's deadline as created.
START = 600
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
POD = f"{STAGING}-x7k2p"


def started_job(deadline: int = START) -> dict:
    """The staging Job, started at 11:00:00 with ``deadline``."""
    made = staging_job(deadline=deadline)
    made["status"]["startTime"] = "2026-01-02T11:00:00Z"
    return made


def pending_pod(scheduled: str | None = "2026-01-02T11:00:05Z", waiting: str = "ContainerCreating") -> dict:
    """The staging Job's pod, Pending: scheduled at ``scheduled`` (None: not scheduled)."""
    conditions = (
        [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
        if scheduled
        else [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    )
    return {
        "metadata": {"name": POD, "uid": UID, "labels": {"job-name": STAGING}},
        "status": {
            "phase": "Pending",
            "conditions": conditions,
            "containerStatuses": [
                {"name": "stage", "image": PULL_IMAGE, "state": {"waiting": {"reason": waiting}}}
            ],
        },
    }


def staging_event(
    reason: str, first: str, last: str | None = None, *, count: int = 1, kind: str = "Normal"
) -> dict:
    message = {
        "Pulling": f'Pulling image "{PULL_IMAGE}"',
        "Pulled": f'Successfully pulled image "{PULL_IMAGE}"',
    }
    text = message.get(reason, f'Failed to pull image "{PULL_IMAGE}": not found')
    return event(reason, text, first, last, count=count, kind=kind, pod=POD, uid=UID)


def deadline(job: dict, pods: list[dict], events: list[dict]) -> dict[str, int]:
    return rm.staging_deadline([job], pods, STAGING, LONG, start_timeout_s=START, events=events)


def test_a_first_pull_in_flight_lifts_the_deadline_up_to_the_whole_staging_bound():
    pulling = [staging_event("Pulling", "2026-01-02T11:00:06Z")]
    # In flight since 11:00:06: up to 4 start timeouts (2,406 s from the Job's start), capped
    # at the staging's bound.
    assert deadline(started_job(), [pending_pod()], pulling) == {STAGING: LONG}


def test_a_finished_pull_gives_the_pod_a_start_timeout_past_it():
    pulled = [
        staging_event("Pulling", "2026-01-02T11:00:06Z"),
        staging_event("Pulled", "2026-01-02T11:05:00Z"),
    ]
    # The last step at 11:05:00, 300 s after the Job's start: 300 + 600.
    assert deadline(started_job(), [pending_pod()], pulled) == {STAGING: 900}
    # Raised once: the next poll, with the same Events, patches nothing.
    assert deadline(started_job(900), [pending_pod()], pulled) == {}


def test_a_pull_that_keeps_failing_is_no_progress_and_keeps_about_the_short_deadline():
    failing = [
        staging_event("Pulling", "2026-01-02T11:00:06Z", "2026-01-02T11:09:00Z", count=6),
        staging_event("Failed", "2026-01-02T11:00:07Z", "2026-01-02T11:09:01Z", count=6, kind="Warning"),
        staging_event("BackOff", "2026-01-02T11:00:08Z", "2026-01-02T11:09:30Z", count=20),
    ]
    # Its one step is the first pull's begin (11:00:06): 606 s, a few seconds past the 600 it had.
    assert deadline(started_job(), [pending_pod(waiting="ImagePullBackOff")], failing) == {STAGING: 606}
    assert deadline(started_job(606), [pending_pod(waiting="ImagePullBackOff")], failing) == {}


def test_an_unscheduled_pod_a_job_not_started_or_no_start_timeout_keep_the_deadline():
    pulling = [staging_event("Pulling", "2026-01-02T11:00:06Z")]
    assert deadline(started_job(), [pending_pod(scheduled=None)], []) == {}
    assert deadline(staging_job(deadline=START), [pending_pod()], pulling) == {}
    assert rm.staging_deadline([started_job()], [pending_pod()], STAGING, LONG, events=pulling) == {}


def test_the_loop_lists_events_for_the_watched_job_and_says_what_it_raised(capsys):
    pod = pending_pod()
    api = StagingApi([started_job()], [pod])
    api.events = [staging_event("Pulling", "2026-01-02T11:00:06Z")]
    polls = iter(range(2))

    def sleep(_: float) -> None:
        if next(polls) == 1:
            api.jobs += [copy.deepcopy(job("chief", condition="Complete"))]

    env = {
        **ENV,
        "MONITOR_START_TIMEOUT_S": "0",
        "MONITOR_STAGING_JOB": STAGING,
        "MONITOR_STAGING_DEADLINE_S": str(LONG),
        "MONITOR_WATCHED_START_TIMEOUT_S": str(START),
    }
    assert rm.main(env, api=api, clock=lambda: NOW, sleep=sleep) == 0
    assert api.deadlines == [("training", STAGING, LONG)]
    out = capsys.readouterr().out
    assert (
        f"the pod of Job {STAGING} progresses toward starting: its activeDeadlineSeconds is now {LONG}" in out
    )
