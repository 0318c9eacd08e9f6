"""The run monitor and the data staging Job (infra/run_monitor.py ``staging_deadline``): the Job is
created with the short deadline data.startTimeoutSeconds, and the monitor raises it to the whole
staging's bound once the staging pod runs, so a long download is not cut."""

from __future__ import annotations

import copy

from test_run_monitor import ENV, NOW, RUN_ID, RecordedApi, job

from infra import run_monitor as rm

STAGING = "mnist-stage-data"
LONG = 1200


def staging_job(*, deadline: int | None = 600, condition: str | None = None) -> dict:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    spec = {"activeDeadlineSeconds": deadline} if deadline is not None else {}
    return {
        "metadata": {
            "name": STAGING,
            "labels": {"app.kubernetes.io/instance": "mnist", "app.kubernetes.io/component": "stage-data"},
        },
        "spec": spec,
        "status": {"conditions": conditions},
    }


def staging_pod(phase: str) -> dict:
    return {
        "metadata": {"name": f"{STAGING}-x7k2p", "labels": {"job-name": STAGING}},
        "status": {"phase": phase},
    }


def test_a_running_staging_pod_gets_the_long_deadline():
    assert rm.staging_deadline([staging_job()], [staging_pod("Running")], STAGING, LONG) == {STAGING: LONG}


def test_a_pod_that_has_not_started_keeps_the_short_deadline():
    for pods in (
        [],
        [staging_pod("Pending")],
        [
            {
                **staging_pod("Running"),
                "metadata": {"name": "mnist-chief-0-a", "labels": {"job-name": "mnist-chief-0"}},
            }
        ],
    ):
        assert rm.staging_deadline([staging_job()], pods, STAGING, LONG) == {}, pods


def test_nothing_to_do_once_raised_ended_or_unwatched():
    running = [staging_pod("Running")]
    assert rm.staging_deadline([staging_job(deadline=LONG)], running, STAGING, LONG) == {}
    assert rm.staging_deadline([staging_job(deadline=None)], running, STAGING, LONG) == {}
    assert rm.staging_deadline([staging_job(condition="Failed")], running, STAGING, LONG) == {}
    assert rm.staging_deadline([staging_job(condition="Complete")], running, STAGING, LONG) == {}
    assert rm.staging_deadline([staging_job()], running, None, LONG) == {}
    assert rm.staging_deadline([], running, STAGING, LONG) == {}


class StagingApi(RecordedApi):
    """RecordedApi that also records deadline patches, and stops the loop once staging is done."""

    def __init__(self, jobs: list[dict], pods: list[dict]) -> None:
        super().__init__(jobs, pods)
        self.deadlines: list[tuple[str, str, int]] = []

    def set_deadline(self, namespace: str, name: str, seconds: int) -> None:
        self.deadlines.append((namespace, name, seconds))
        next(j for j in self.jobs if j["metadata"]["name"] == name)["spec"]["activeDeadlineSeconds"] = seconds


def test_the_loop_raises_the_deadline_once_and_goes_on_watching(capsys):
    api = StagingApi([staging_job()], [staging_pod("Running")])
    polls = iter(range(3))

    def sleep(_: float) -> None:
        if next(polls) == 2:  # the third poll: the task Jobs exist and the chief completed
            api.jobs += [copy.deepcopy(job("chief", condition="Complete"))]

    env = {**ENV, "MONITOR_STAGING_JOB": STAGING, "MONITOR_STAGING_DEADLINE_S": str(LONG)}
    assert rm.main(env, api=api, clock=lambda: NOW, sleep=sleep) == 0
    assert api.deadlines == [("training", STAGING, LONG)]
    out = capsys.readouterr().out
    assert f"the pod of Job {STAGING} runs: its activeDeadlineSeconds is now {LONG}" in out
    assert f"no task Jobs of run {RUN_ID} yet" in out


def test_without_the_staging_variables_staging_is_not_touched():
    api = StagingApi([staging_job(), job("chief", condition="Complete")], [staging_pod("Running")])
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=lambda s: None) == 0
    assert api.deadlines == []


def test_the_setup_job_is_watched_the_same_way_with_its_own_deadline(capsys):
    setup, setup_long = "mnist-setup", 3600
    setup_job = copy.deepcopy(staging_job())
    setup_job["metadata"]["name"] = setup
    setup_pod = {
        "metadata": {"name": f"{setup}-q9w", "labels": {"job-name": setup}},
        "status": {"phase": "Running"},
    }
    api = StagingApi([setup_job, staging_job()], [setup_pod, staging_pod("Pending")])
    polls = iter(range(2))

    def sleep(_: float) -> None:
        if next(polls) == 1:
            api.jobs += [copy.deepcopy(job("chief", condition="Complete"))]

    env = {
        **ENV,
        "MONITOR_STAGING_JOB": STAGING,
        "MONITOR_STAGING_DEADLINE_S": str(LONG),
        "MONITOR_SETUP_JOB": setup,
        "MONITOR_SETUP_DEADLINE_S": str(setup_long),
    }
    assert rm.main(env, api=api, clock=lambda: NOW, sleep=sleep) == 0
    # Only the setup pod runs: its Job's deadline is raised, staging's stays short.
    assert api.deadlines == [("training", setup, setup_long)]
    assert (
        f"the pod of Job {setup} runs: its activeDeadlineSeconds is now {setup_long}"
        in capsys.readouterr().out
    )
