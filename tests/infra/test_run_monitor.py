"""The run monitor's decisions (infra/run_monitor.py) over recorded API objects, and its loop
against a recorded API: what it ends, with which reason, and when it exits."""

from __future__ import annotations

import copy
import http.server

import pytest

from infra import run_monitor as rm
from tests.loopback_http import serving

RUN_ID = "r1-0123"
#: 2026-01-02T12:00:00Z
NOW = 1767355200.0
UNSCHEDULABLE = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
    "available: 1 No preemption victims found for incoming pod."
)


def job(
    task_type: str,
    index: int = 0,
    *,
    condition: str | None = None,
    reason: str = "",
    message: str = "",
    run_id: str = RUN_ID,
    annotations: dict | None = None,
) -> dict:
    conditions = (
        [{"type": condition, "status": "True", "reason": reason, "message": message}] if condition else []
    )
    return {
        "metadata": {
            "name": f"mnist-{task_type}-{index}",
            "annotations": annotations or {},
            "labels": {"app.kubernetes.io/instance": "mnist", "tf-replica-type": task_type},
        },
        "spec": {
            "template": {"spec": {"containers": [{"args": ["--log_dir", "/data/x", "--run_id", run_id]}]}}
        },
        "status": {"conditions": conditions},
    }


def pending_pod(
    task_type: str, index: int = 0, *, since: str = "2026-01-02T11:55:00Z", reason: str = "Unschedulable"
) -> dict:
    return {
        "metadata": {
            "name": f"mnist-{task_type}-{index}-x1",
            "creationTimestamp": "2026-01-02T11:54:59Z",
            "labels": {"job-name": f"mnist-{task_type}-{index}", "tf-replica-type": task_type},
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": UNSCHEDULABLE,
                    "lastTransitionTime": since,
                }
            ],
        },
    }


def run_of(*, chief: dict | None = None) -> list[dict]:
    return [
        chief or job("chief"),
        job("worker", 0),
        job("worker", 1),
        job("ps", 0),
        {
            "metadata": {"name": "mnist-stage-data", "labels": {"app.kubernetes.io/instance": "mnist"}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]},
        },
    ]


def test_a_failed_chief_ends_every_other_running_task_with_its_condition():
    jobs = run_of(
        chief=job(
            "chief",
            condition="Failed",
            reason="BackoffLimitExceeded",
            message="Job has reached the specified backoff limit",
        )
    )
    jobs[3] = job("ps", 0, condition="Complete")  # an ended task is left alone
    decision = rm.decide(jobs, [], RUN_ID, NOW, 1800)
    reason = (
        "the chief's Job mnist-chief-0 failed: BackoffLimitExceeded: Job has reached the specified "
        "backoff limit"
    )
    assert decision.end == {"mnist-worker-0": reason, "mnist-worker-1": reason}
    assert not decision.done


def test_jobs_already_ended_by_the_monitor_are_not_patched_again_and_then_it_exits():
    failed = job("chief", condition="Failed", reason="DeadlineExceeded", message="Job was active longer")
    jobs = run_of(chief=failed)
    for i in (1, 2, 3):
        jobs[i]["metadata"]["annotations"] = {rm.ENDED_BECAUSE: "the chief's Job mnist-chief-0 failed: ..."}
    assert rm.decide(jobs, [], RUN_ID, NOW, 1800).end == {}
    for i in (1, 2, 3):
        jobs[i]["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]
    decision = rm.decide(jobs, [], RUN_ID, NOW, 1800)
    assert decision.done and decision.end == {} and decision.why == "every task Job has ended"


def test_a_completed_chief_means_done_even_while_the_others_finish():
    decision = rm.decide(run_of(chief=job("chief", condition="Complete")), [], RUN_ID, NOW, 1800)
    assert decision.done and decision.end == {}
    assert decision.why == "the chief's Job mnist-chief-0 completed"


def test_a_pod_unschedulable_past_the_timeout_ends_every_task_with_the_schedulers_message():
    pods = [pending_pod("worker", 1, since="2026-01-02T11:59:00Z")]
    # 60 s unschedulable: not yet at 61 s, at once at 60 s.
    waiting = rm.decide(run_of(), pods, RUN_ID, NOW, 61)
    assert waiting.end == {} and not waiting.done
    assert waiting.why == f"pod mnist-worker-1-x1 unschedulable for 60 s: {UNSCHEDULABLE}"
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 60)
    reason = (
        "pod mnist-worker-1-x1 of Job mnist-worker-1 could not be scheduled for 60 s "
        f"(job.scheduleTimeoutSeconds 60): {UNSCHEDULABLE}"
    )
    assert decision.end == {
        n: reason for n in ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0")
    }


def test_the_chief_ended_for_a_stuck_pod_passes_that_reason_on():
    reason = "pod mnist-worker-1-x1 of Job mnist-worker-1 could not be scheduled for 60 s: ..."
    chief = job(
        "chief", condition="Failed", reason="DeadlineExceeded", annotations={rm.ENDED_BECAUSE: reason}
    )
    jobs = run_of(chief=chief)
    jobs[2]["metadata"]["annotations"] = {rm.ENDED_BECAUSE: reason}
    assert rm.decide(jobs, [], RUN_ID, NOW, 60).end == {"mnist-worker-0": reason, "mnist-ps-0": reason}


def test_no_timeout_when_zero_and_other_pending_reasons_do_not_count():
    pods = [pending_pod("worker", 1, since="2026-01-01T00:00:00Z")]
    assert rm.decide(run_of(), pods, RUN_ID, NOW, 0).end == {}
    pods = [pending_pod("worker", 1, since="2026-01-01T00:00:00Z", reason="SchedulingGated")]
    assert rm.decide(run_of(), pods, RUN_ID, NOW, 60).end == {}
    scheduled = pending_pod("worker", 1, since="2026-01-01T00:00:00Z")
    scheduled["status"]["conditions"][0].update(status="True", reason="")
    assert rm.decide(run_of(), [scheduled], RUN_ID, NOW, 60).end == {}


def test_only_this_runs_jobs_count():
    # The Jobs of another run id (an earlier run's, being replaced) are neither read nor ended.
    old_chief = job("chief", condition="Failed", reason="BackoffLimitExceeded", run_id="r0-old")
    decision = rm.decide([old_chief, job("worker", 0), job("ps", 0)], [], RUN_ID, NOW, 1800)
    assert decision.end == {} and not decision.done
    assert (
        rm.decide([job("worker", 0, run_id="r0-old")], [], RUN_ID, NOW, 1800).why
        == f"no task Jobs of run {RUN_ID} yet"
    )


PULL_IMAGE = "registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu"


def unstarted_pod(
    task_type: str,
    index: int = 0,
    *,
    scheduled: str = "2026-01-02T11:58:20Z",
    waiting: dict | None = None,
    phase: str = "Pending",
) -> dict:
    """A scheduled pod whose container waits (``waiting``: the state's waiting object; None: no
    container status yet)."""
    statuses = (
        []
        if waiting is None
        else [{"name": "tensorflow", "image": PULL_IMAGE, "state": {"waiting": waiting}}]
    )
    return {
        "metadata": {
            "name": f"mnist-{task_type}-{index}-x1",
            "creationTimestamp": "2026-01-02T11:58:19Z",
            "labels": {"job-name": f"mnist-{task_type}-{index}", "tf-replica-type": task_type},
        },
        "status": {
            "phase": phase,
            "containerStatuses": statuses,
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}],
        },
    }


BACK_OFF = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{PULL_IMAGE}"'}


def test_a_pull_stuck_past_the_start_timeout_ends_every_task_with_the_containers_reason():
    # Scheduled at 11:58:20, now 12:00:00: 100 s.
    pods = [unstarted_pod("worker", 1, waiting=BACK_OFF)]
    reason = (
        f"pod mnist-worker-1-x1 of Job mnist-worker-1 did not start for 100 s (job.startTimeoutSeconds 90): "
        f'ImagePullBackOff (image {PULL_IMAGE}): Back-off pulling image "{PULL_IMAGE}"'
    )
    decision = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=90)
    assert decision.end == {
        n: reason for n in ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0")
    }
    short = rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=120)
    assert short.end == {} and short.why == (
        f"pod mnist-worker-1-x1 not started for 100 s: ImagePullBackOff (image {PULL_IMAGE}): Back-off pulling "
        f'image "{PULL_IMAGE}"'
    )
    assert rm.decide(run_of(), pods, RUN_ID, NOW, 1800, start_timeout_s=0).end == {}


def test_a_pod_without_container_statuses_waits_in_container_creating_and_running_pods_do_not_count():
    creating = [unstarted_pod("ps", 0, scheduled="2026-01-02T11:40:00Z")]  # a volume that does not mount
    decision = rm.decide(run_of(), creating, RUN_ID, NOW, 1800, start_timeout_s=900)
    assert decision.end["mnist-chief-0"] == (
        "pod mnist-ps-0-x1 of Job mnist-ps-0 did not start for 1200 s (job.startTimeoutSeconds 900): ContainerCreating"
    )
    running = [unstarted_pod("ps", 0, scheduled="2026-01-02T11:40:00Z", waiting=None, phase="Running")]
    assert rm.decide(run_of(), running, RUN_ID, NOW, 1800, start_timeout_s=900).end == {}
    config = [
        unstarted_pod(
            "worker",
            0,
            scheduled="2026-01-02T11:40:00Z",
            waiting={"reason": "CreateContainerConfigError", "message": 'secret "acr-pull" not found'},
        )
    ]
    assert rm.decide(run_of(), config, RUN_ID, NOW, 1800, start_timeout_s=900).why.endswith(
        f'CreateContainerConfigError (image {PULL_IMAGE}): secret "acr-pull" not found'
    )


class RecordedApi:
    """The Api's calls answered from lists of objects; patches change the recorded Jobs. ``logs``:
    pod name -> its log text (or the ApiError reading it raises); ``annotated`` records
    annotate_job's calls."""

    def __init__(
        self,
        jobs: list[dict],
        pods: list[dict],
        fail_first: int = 0,
        events: list[dict] | rm.ApiError = (),
        logs: dict[str, str | rm.ApiError] | None = None,
    ) -> None:
        self.jobs, self.pods, self.fail_first, self.patched = jobs, pods, fail_first, []
        self.events, self.event_lists = events, 0
        self.logs, self.log_reads, self.annotated = logs or {}, [], []

    def pod_log(self, namespace: str, name: str, tail_lines: int, container: str | None = None) -> str:
        self.log_reads.append((namespace, name, tail_lines, container))
        found = self.logs.get(name, rm.ApiError(f"GET pods/{name}/log: HTTP 404: not found"))
        if isinstance(found, rm.ApiError):
            raise found
        return "\n".join(found.splitlines()[-tail_lines:]) + "\n"

    def annotate_job(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.annotated.append((namespace, name, dict(annotations)))
        found = next(j for j in self.jobs if j["metadata"]["name"] == name)
        found["metadata"].setdefault("annotations", {}).update(annotations)

    def pod_events(self, namespace: str) -> list[dict]:
        self.event_lists += 1
        if isinstance(self.events, rm.ApiError):
            raise self.events
        return copy.deepcopy(list(self.events))

    def items(self, path: str, selector: str) -> list[dict]:
        if self.fail_first:
            self.fail_first -= 1
            raise rm.ApiError("GET: connection refused")
        assert selector.startswith("app.kubernetes.io/instance=mnist"), selector
        return copy.deepcopy(self.jobs if path.endswith("/jobs") else self.pods)

    def end_job(self, namespace: str, name: str, reason: str) -> None:
        self.patched.append((namespace, name, reason))
        found = next(j for j in self.jobs if j["metadata"]["name"] == name)
        found["metadata"]["annotations"] = {rm.ENDED_BECAUSE: reason}
        found["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]


ENV = {
    "MONITOR_NAMESPACE": "training",
    "MONITOR_PREFIX": "mnist",
    "MONITOR_RUN_ID": RUN_ID,
    "MONITOR_SCHEDULE_TIMEOUT_S": "1800",
    "MONITOR_POLL_S": "2",
}


def test_the_loop_ends_the_run_once_and_exits_0(capsys):
    api = RecordedApi(
        run_of(chief=job("chief", condition="Failed", reason="BackoffLimitExceeded", message="m")),
        [],
        fail_first=1,
    )
    sleeps: list[float] = []
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=sleeps.append) == 0
    reason = "the chief's Job mnist-chief-0 failed: BackoffLimitExceeded: m"
    assert api.patched == [
        ("training", n, reason) for n in ("mnist-worker-0", "mnist-worker-1", "mnist-ps-0")
    ]
    # One failed poll, one that ended the run, one that saw it over.
    assert sleeps == [2.0, 2.0]
    out = capsys.readouterr().out
    assert "cannot read the run (1 of 60): GET: connection refused" in out
    assert "ended Job mnist-ps-0: " + reason in out and out.rstrip().endswith("every task Job has ended")


def test_a_poll_that_cannot_understand_an_answer_is_tried_again(capsys):
    # A watcher that dies on one odd object leaves the run unwatched: the poll is retried.
    jobs = run_of(chief=job("chief", condition="Complete"))
    api = RecordedApi(jobs, [])
    nameless = job("chief")
    del nameless["metadata"]["name"]
    answers = iter([[nameless], jobs])  # a Job without a name, then the real list
    recorded_items = api.items
    api.items = lambda path, selector: (
        next(answers) if path.endswith("/jobs") else recorded_items(path, selector)
    )
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=lambda s: None) == 0
    out = capsys.readouterr().out
    assert "cannot read the run (1 of 60): KeyError: 'name'" in out
    assert out.rstrip().endswith("the chief's Job mnist-chief-0 completed")


def test_the_loop_gives_up_after_max_failures_and_refuses_a_bad_environment(capsys):
    api = RecordedApi([], [], fail_first=10**6)
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=lambda s: None) == 1
    assert "giving up after 60 failed polls" in capsys.readouterr().err
    assert rm.main({**ENV, "MONITOR_SCHEDULE_TIMEOUT_S": "soon"}, api=api) == rm.EXIT_BAD_ENVIRONMENT == 2
    assert rm.main({**ENV, "MONITOR_START_TIMEOUT_S": "soon"}, api=api) == 2


def test_the_api_address_is_the_setting_or_the_in_cluster_service():
    assert rm.api_server({"MONITOR_API_SERVER": "https://10.244.0.1:6443"}) == "https://10.244.0.1:6443"
    assert (
        rm.api_server({"KUBERNETES_SERVICE_HOST": "172.21.0.1", "KUBERNETES_SERVICE_PORT": "443"})
        == "https://172.21.0.1:443"
    )
    assert rm.api_server({"KUBERNETES_SERVICE_HOST": "fd00::1"}) == "https://[fd00::1]:443"
    assert rm.api_server({}) == "https://kubernetes.default.svc"


@pytest.mark.parametrize(
    "module",
    [rm, rm.progress, rm.kube, rm.reports, rm.contract],
    ids=["run_monitor", "pod_progress", "monitor_api", "trainer_status", "trainer_contract_progress"],
)
def test_the_script_is_standard_library_only(module):
    # It runs from a ConfigMap with the image's Python: no package of this repository. Imports
    # under ``if TYPE_CHECKING:`` are the type checker's only: they never run.
    import ast

    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        )
    ]
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    import sys

    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


class UnreachedApi(RecordedApi):
    """A RecordedApi whose first ``unreached`` list calls fail as a connection that is refused or
    times out does (no answer), then ``answered`` as an answer (HTTP 503) does."""

    def __init__(self, unreached: int, answered: int = 0) -> None:
        super().__init__(run_of(chief=job("chief", condition="Complete")), [])
        self.unreached, self.answered = unreached, answered

    def items(self, path: str, selector: str) -> list[dict]:
        if self.unreached:
            self.unreached -= 1
            raise rm.ApiError("GET https://10.96.0.1:443/apis/batch/v1/...: timed out", reached=False)
        if self.answered:
            self.answered -= 1
            raise rm.ApiError("GET /apis/batch/v1/...: HTTP 503: unavailable")
        return super().items(path, selector)


IN_CLUSTER = {
    **ENV,
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "MONITOR_EGRESS_PORTS": "443,6443",
}


def test_an_api_server_never_reached_fails_loudly_after_a_few_tries_naming_its_address(capsys):
    # A closed port (a NetworkPolicy that drops it, a wrong monitor.apiServer) never answers:
    # the monitor exits 3 within UNREACHED_FAILURES polls, not MAX_FAILURES, saying where it called.
    now = [NOW]

    def wait(seconds: float) -> None:  # the poll's sleep, after a try that timed out at 20 s
        now[0] += seconds + 20

    api = UnreachedApi(unreached=10**6)
    assert rm.main(IN_CLUSTER, api=api, clock=lambda: now[0], sleep=wait) == 3
    assert rm.EXIT_UNREACHABLE == 3 and rm.UNREACHED_FAILURES == 6
    out, err = capsys.readouterr()
    assert "through the API server at https://10.96.0.1:443 " in out
    assert "cannot read the run (6 of 6)" in out and "(7 of" not in out
    assert err == (
        "run monitor: cannot reach the API server at https://10.96.0.1:443 (TCP port 443): 6 tries in "
        "110 s, the last: GET https://10.96.0.1:443/apis/batch/v1/...: timed out. The run is NOT watched. "
        "NetworkPolicy mnist-monitor opens TCP 443 and 6443 to it, which must be the port the address "
        "reaches after the Service's translation (the kubernetes Service's endpoints'): set "
        "monitor.apiServerPort to that port, or monitor.apiServer to an address pods can reach; `pulumi up` "
        "then starts a new monitor.\n"
    )
    # Without a policy of the stack, the message says so.
    no_policy = {k: v for k, v in IN_CLUSTER.items() if k != "MONITOR_EGRESS_PORTS"}
    assert rm.main(no_policy, api=UnreachedApi(unreached=10**6), clock=lambda: NOW, sleep=lambda s: None) == 3
    assert "No NetworkPolicy of the stack limits it (networkPolicy.enabled false)" in capsys.readouterr().err


@pytest.mark.parametrize("answered", [0, 1], ids=["reached-first", "answered-first"])
def test_once_reached_or_answered_the_api_server_gets_max_failures(capsys, answered):
    # A monitor that has reached the API server once (or been answered, even with an error)
    # rides out a restart: only MAX_FAILURES failed polls in a row end it.
    api = UnreachedApi(unreached=0, answered=answered)
    assert (
        rm.main({**ENV, "MONITOR_API_SERVER": "https://10.244.0.1:16443"}, api=api, sleep=lambda s: None) == 0
    )
    out = capsys.readouterr().out
    assert out.count("reached the API server at https://10.244.0.1:16443") == 1
    assert ("cannot read the run (1 of 60): GET /apis/batch/v1/...: HTTP 503" in out) == bool(answered)
    api = RecordedApi(run_of(), [])  # a run that goes on
    calls = iter(range(10**6))
    recorded = api.items

    def one_poll_then_out_of_reach(path: str, selector: str) -> list[dict]:
        if next(calls) >= 2:  # the first poll lists the Jobs and the pods
            raise rm.ApiError("GET: timed out", reached=False)
        return recorded(path, selector)

    api.items = one_poll_then_out_of_reach
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=lambda s: None) == 1
    out, err = capsys.readouterr()
    assert "cannot read the run (60 of 60): GET: timed out" in out
    assert err.startswith("run monitor: giving up after 60 failed polls")


def test_the_api_tells_a_connection_that_failed_from_an_answer(tmp_path):
    token = tmp_path / "token"
    token.write_text("t-1\n")
    with pytest.raises(rm.ApiError) as refused:
        rm.Api("http://127.0.0.1:1", str(token), None, timeout_s=5).items("/api/v1/pods", "a=b")
    assert refused.value.reached is False and "http://127.0.0.1:1/api/v1/pods" in str(refused.value)

    class Forbidden(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            self.send_error(403, "Forbidden")

        def log_message(self, *args) -> None:
            pass

    with serving(Forbidden) as url, pytest.raises(rm.ApiError) as forbidden:
        rm.Api(url, str(token), None, timeout_s=5).items("/api/v1/pods", "a=b")
    assert forbidden.value.reached is True and "HTTP 403" in str(forbidden.value)


def test_the_last_word_is_the_termination_message_without_control_characters(tmp_path, capsys):
    # With FallbackToLogsOnError an empty file would make the message the log's tail, whose
    # stderr and stdout lines may come in either order.
    log = tmp_path / "termination-log"
    rm.give_up("run monitor: giving up \x1b[2J after 60 failed polls", termination_log=str(log))
    assert log.read_text() == "run monitor: giving up \\x1b[2J after 60 failed polls\n"
    assert capsys.readouterr().err == "run monitor: giving up \\x1b[2J after 60 failed polls\n"
    rm.give_up("no such directory", termination_log=str(tmp_path / "missing" / "log"))  # no raise
