"""The start timeout counts time without progress (infra/pod_progress.py): a pod whose kubelet
Events show steps toward starting, or an image pull in flight, is not ended as stuck; one whose
Events only repeat a failure is, with what it waited for. Pods and Events as the API lists them."""

from __future__ import annotations

import copy

from test_run_monitor import ENV, NOW, PULL_IMAGE, RUN_ID, RecordedApi, job, run_of, unstarted_pod

from infra import pod_progress
from infra import run_monitor as rm

UID = "6f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f"
POD = "mnist-worker-1-x1"
TASKS = ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0")
PULLED = (
    f'Successfully pulled image "{PULL_IMAGE}" in 19m54.2s (19m54.2s including waiting). '
    "Image size: 6712345678 bytes."
)


def event(
    reason: str,
    message: str,
    first: str,
    last: str | None = None,
    *,
    count: int = 1,
    kind: str = "Normal",
    pod: str = POD,
    uid: str = UID,
) -> dict:
    """A kubelet Event about ``pod`` as `GET /api/v1/namespaces/tf-mnist/events` lists it."""
    return {
        "metadata": {"name": f"{pod}.18820f3a{count:04x}", "namespace": "tf-mnist"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "tf-mnist",
            "name": pod,
            "uid": uid,
            "apiVersion": "v1",
            "fieldPath": "spec.containers{tensorflow}",
        },
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": "cn-hangzhou.10.0.1.17"},
        "firstTimestamp": first,
        "lastTimestamp": last or first,
        "count": count,
        "type": kind,
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": "cn-hangzhou.10.0.1.17",
    }


def worker_pod(scheduled: str, waiting: dict | None = None) -> dict:
    pod = unstarted_pod("worker", 1, scheduled=scheduled, waiting=waiting)
    pod["metadata"]["uid"] = UID
    return pod


CREATING = {"reason": "ContainerCreating"}


def test_a_slow_pull_of_a_large_image_is_not_ended_and_the_log_says_what_it_waits_for():
    # Scheduled 30 min ago, its first pull of the GPU image began 2 s later and has not ended:
    # twice the start timeout, and still no verdict.
    pods = [worker_pod("2026-01-02T11:30:00Z", CREATING)]
    events = [event("Pulling", f'Pulling image "{PULL_IMAGE}"', "2026-01-02T11:30:02Z")]
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900, events=events)
    assert decision.end == {}
    assert decision.why == (
        f"pod {POD} pulling for 1798 s: image {PULL_IMAGE} since 2026-01-02T11:30:02Z, neither pulled nor failed yet"
    )
    # Judged by its status alone, the same pod has not started for 1800 s and is ended.
    assert set(rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900).end) == set(TASKS)


def test_a_pull_in_flight_for_four_start_timeouts_is_ended_with_the_image_it_waited_for():
    pods = [worker_pod("2026-01-02T10:58:00Z", CREATING)]
    events = [event("Pulling", f'Pulling image "{PULL_IMAGE}"', "2026-01-02T10:59:00Z")]
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900, events=events)
    reason = (
        f"pod {POD} of Job mnist-worker-1 did not start, pulling for 3660 s (4 x job.startTimeoutSeconds 900): "
        f"image {PULL_IMAGE} since 2026-01-02T10:59:00Z, neither pulled nor failed yet"
    )
    assert decision.end == {n: reason for n in TASKS}


def test_a_step_restarts_the_clock_and_the_verdict_names_it():
    # The image arrived 10 min ago after a 20 min pull; the container has not been created since.
    pods = [worker_pod("2026-01-02T11:30:00Z", CREATING)]
    events = [
        event("Pulling", f'Pulling image "{PULL_IMAGE}"', "2026-01-02T11:30:05Z"),
        event("Pulled", PULLED, "2026-01-02T11:50:00Z"),
    ]
    waiting = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900, events=events)
    assert waiting.end == {}
    assert waiting.why == (
        f"pod {POD} not started for 600 s: ContainerCreating (image {PULL_IMAGE}); last step at "
        f"2026-01-02T11:50:00Z: Pulled: {PULLED}"
    )
    ended = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=600, events=events)
    assert ended.end["mnist-chief-0"] == (
        f"pod {POD} of Job mnist-worker-1 did not start for 600 s (job.startTimeoutSeconds 600): ContainerCreating "
        f"(image {PULL_IMAGE}); last step at 2026-01-02T11:50:00Z: Pulled: {PULLED}"
    )


def test_a_pull_that_keeps_failing_makes_no_progress_however_often_its_events_repeat():
    # Retried every few minutes for half an hour: the Pulling Event's count and lastTimestamp
    # keep changing, the BackOff's every 10 s; the clock runs from the first attempt.
    pods = [
        worker_pod(
            "2026-01-02T11:30:00Z",
            {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{PULL_IMAGE}"'},
        )
    ]
    failed = f'Failed to pull image "{PULL_IMAGE}": failed to resolve reference: not found'
    events = [
        event(
            "Pulling",
            f'Pulling image "{PULL_IMAGE}"',
            "2026-01-02T11:30:02Z",
            "2026-01-02T11:58:40Z",
            count=7,
        ),
        event("Failed", failed, "2026-01-02T11:30:04Z", "2026-01-02T11:58:42Z", count=7, kind="Warning"),
        event(
            "Failed",
            "Error: ErrImagePull",
            "2026-01-02T11:30:04Z",
            "2026-01-02T11:58:42Z",
            count=7,
            kind="Warning",
        ),
        event(
            "BackOff",
            f'Back-off pulling image "{PULL_IMAGE}"',
            "2026-01-02T11:30:05Z",
            "2026-01-02T11:59:55Z",
            count=120,
        ),
    ]
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900, events=events)
    assert decision.end["mnist-ps-0"] == (
        f"pod {POD} of Job mnist-worker-1 did not start for 1798 s (job.startTimeoutSeconds 900): ImagePullBackOff "
        f'(image {PULL_IMAGE}): Back-off pulling image "{PULL_IMAGE}"; last step at 2026-01-02T11:30:02Z: '
        f'Pulling: Pulling image "{PULL_IMAGE}"'
    )
    # A retry in flight (the container still says ImagePullBackOff) is no pull in flight either.
    assert pod_progress.pull_in_flight(pods[0], events[:1]) is None


def test_a_volume_that_does_not_mount_is_ended_with_the_kubelets_warning():
    pods = [worker_pod("2026-01-02T11:40:00Z")]  # no container statuses yet
    mount = (
        'MountVolume.SetUp failed for volume "mnist-data-1a2b3c4d" : rpc error: code = Internal desc = '
        "mount failed: exit status 32"
    )
    events = [
        event("FailedMount", mount, "2026-01-02T11:40:10Z", "2026-01-02T11:59:30Z", count=18, kind="Warning"),
        # Another pod's steps, and a former pod of the same name (another uid), count for nothing.
        event("Pulled", PULLED, "2026-01-02T11:59:00Z", pod="mnist-worker-0-x1"),
        event("Pulled", PULLED, "2026-01-02T11:59:00Z", uid="0badc0de-0000-4000-8000-000000000000"),
    ]
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=900, events=events)
    assert decision.end["mnist-chief-0"] == (
        f"pod {POD} of Job mnist-worker-1 did not start for 1200 s (job.startTimeoutSeconds 900): ContainerCreating: "
        f"FailedMount: {mount}"
    )


def test_an_init_container_that_started_is_a_step():
    pod = worker_pod("2026-01-02T11:30:00Z", {"reason": "PodInitializing"})
    pod["status"]["initContainerStatuses"] = [
        {"name": "setup", "image": PULL_IMAGE, "state": {"running": {"startedAt": "2026-01-02T11:52:30Z"}}}
    ]
    decision = rm.decide(run_of(), [pod], RUN_ID, NOW, 1800, start_timeout_s=900)
    assert decision.end == {}
    assert decision.why.startswith(
        f"pod {POD} not started for 450 s: PodInitializing (image {PULL_IMAGE}); last step"
    )
    assert pod_progress.last_step(pod, []) == (
        pod_progress.parse_time("2026-01-02T11:52:30Z"),
        "init container setup started",
    )


def test_a_pull_ended_within_the_second_it_began_is_not_in_flight_and_event_times_parse():
    pod = worker_pod("2026-01-02T11:59:00Z", CREATING)
    both = [
        event("Pulled", f'Container image "{PULL_IMAGE}" already present on machine', "2026-01-02T11:59:01Z"),
        event("Pulling", f'Pulling image "{PULL_IMAGE}"', "2026-01-02T11:59:01Z"),
    ]
    assert pod_progress.pull_in_flight(pod, both) is None
    assert pod_progress.parse_time("2026-01-02T11:59:01.123456Z") == pod_progress.parse_time(
        "2026-01-02T11:59:01Z"
    )
    series = copy.deepcopy(both[1])
    series.update(firstTimestamp=None, lastTimestamp=None, eventTime="2026-01-02T11:58:00.500000Z")
    assert pod_progress.pull_in_flight(pod, [series]) == (NOW - 120, PULL_IMAGE)


def test_the_loop_lists_events_only_while_a_pod_waits_and_goes_on_without_them(capsys):
    pods = [worker_pod("2026-01-02T11:30:00Z", CREATING)]
    pull = [event("Pulling", f'Pulling image "{PULL_IMAGE}"', "2026-01-02T11:30:02Z")]
    env = {**ENV, "MONITOR_START_TIMEOUT_S": "900"}
    api = RecordedApi(run_of(), pods, events=pull)
    polls = iter(range(1))

    def sleep(_: float) -> None:
        if next(polls, None) is None:  # after two polls the chief completes: a third sees it
            api.jobs[0]["status"]["conditions"] = [{"type": "Complete", "status": "True"}]

    assert rm.main(env, api=api, clock=lambda: NOW, sleep=sleep) == 0
    assert api.patched == [] and api.event_lists == 3
    assert f"pod {POD} pulling for 1798 s" in capsys.readouterr().out
    # The Role of a stack from before the Events: the list is refused, the pods' status decides.
    refused = RecordedApi(
        run_of(), copy.deepcopy(pods), events=rm.ApiError("GET events: HTTP 403: forbidden")
    )
    assert rm.main(env, api=refused, clock=lambda: NOW, sleep=lambda s: None) == 0
    out = capsys.readouterr().out
    assert (
        "cannot list the pods' Events (GET events: HTTP 403: forbidden): judging by the pods' status alone"
        in out
    )
    assert {name for _, name, _ in refused.patched} == set(TASKS)
    # Without pods waiting, no list at all.
    idle = RecordedApi(run_of(chief=job("chief", condition="Complete")), [])
    assert rm.main(env, api=idle, clock=lambda: NOW, sleep=lambda s: None) == 0 and idle.event_lists == 0
