"""The chief's progress under Kubeflow Trainer v2's names (infra/trainer_status.py): made from the
chief's log lines, written by the run monitor's loop on the chief's Job (only when it changed,
final at 100 % once the Job completed) against a recorded API, and the Api's two calls over
HTTP."""

from __future__ import annotations

import http.server
import json

import pytest
from test_run_monitor import ENV, NOW, RUN_ID, RecordedApi, job, run_of

from infra import run_monitor as rm
from infra import trainer_status as ts
from tests.loopback_http import serving
from trainer.contract.progress import parse_log

ANNOTATION = "tf-mnist.io/trainer-status"
CHIEF_POD = "mnist-chief-0-7xk2p"
TRAINING = (
    "Training convnet on 10000 examples from /data/mnist (idx); strategy parameter_server; "
    "3 epochs of 78 batches of 128; adam lr 0.001"
)
STEP_1 = "Step: 40,  Epoch: 1,  Batch: 40 of 78,  Cost: 0.6120,  AvgTime: 50.00ms"
EPOCH_1 = (
    "Epoch 1 of 3 done: cost 0.4710, train accuracy 0.8650, test accuracy 0.9420, test cost 0.1930, "
    "3.9s, 2560 examples/s; checkpoint /data/runs/mnist/checkpoints/ckpt-1"
)
STEP_2 = "Step: 117,  Epoch: 2,  Batch: 39 of 78,  Cost: 0.2030,  AvgTime: 48.00ms"
EPOCH_3 = (
    "Epoch 3 of 3 done: cost 0.1210, train accuracy 0.9640, test accuracy 0.9730, test cost 0.0880, "
    "4.1s, 2440 examples/s; checkpoint /data/runs/mnist/checkpoints/ckpt-3"
)
#: The closing lines: a test accuracy with a trailing zero, which a float would not keep.
CLOSING = ["Test-Accuracy: 0.9730", "Total Time: 25.10s", "Final Cost: 0.1210", "done"]


def chief_job(*, condition: str | None = None, epochs: str = "3", annotation: dict | None = None) -> dict:
    """The chief's Job as the API lists it: its trainer's args carry --epochs and --run_id."""
    found = job("chief", condition=condition)
    found["spec"]["template"]["spec"]["containers"][0] = {
        "name": "tensorflow",
        "args": ["--log_dir", "/data/x", "--epochs", epochs, "--run_id", RUN_ID],
    }
    if annotation is not None:
        found["metadata"]["annotations"][ANNOTATION] = json.dumps(annotation)
    return found


def chief_pod(phase: str = "Running", name: str = CHIEF_POD, created: str = "2026-01-02T11:50:00Z") -> dict:
    """The chief's pod as the API lists it (its Job's label, its one container)."""
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"job-name": "mnist-chief-0", "tf-replica-type": "chief"},
        },
        "spec": {"containers": [{"name": "tensorflow", "image": "trainer:cpu"}]},
        "status": {"phase": phase},
    }


def written(api: RecordedApi) -> list[dict]:
    """The objects the loop wrote, in order (each annotate_job call's ANNOTATION, as JSON)."""
    assert all(name == "mnist-chief-0" and ns == "training" for ns, name, _ in api.annotated), api.annotated
    return [json.loads(values[ANNOTATION]) for _, _, values in api.annotated]


def test_a_run_going_is_its_epochs_and_batches_done_with_the_values_as_the_chief_printed_them():
    status = ts.trainer_status(parse_log("\n".join([TRAINING, STEP_1, EPOCH_1, STEP_2])), NOW)
    # 1 epoch and 39 of 78 batches of 3: 50 %; 1.5 epochs left at 3.9 s each.
    assert status == {
        "progressPercentage": 50,
        "estimatedRemainingSeconds": 6,
        "metrics": [
            {"name": "test_accuracy", "value": "0.9420"},
            {"name": "loss", "value": "0.2030"},
            {"name": "train_accuracy", "value": "0.8650"},
            {"name": "test_loss", "value": "0.1930"},
            {"name": "examples_per_second", "value": "2560"},
        ],
        "lastUpdatedTime": "2026-01-02T12:00:00Z",
    }


def test_before_the_first_epoch_the_pace_is_the_step_lines_and_no_line_is_nothing():
    status = ts.trainer_status(parse_log(f"{TRAINING}\n{STEP_1}\n"), NOW)
    assert status is not None
    # 40 of 78 batches of 3 epochs: 17 %; (3 - 40/78) x 78 x 50 ms = 9.7 s.
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (17, 10)
    assert status["metrics"] == [{"name": "loss", "value": "0.6120"}]
    assert ts.trainer_status(parse_log("Loading data...\n"), NOW) is None


def test_a_tail_without_the_training_line_takes_the_epochs_from_the_job():
    # A restarted chief's pod, or a tail past the first line: Step lines of epoch 2 only.
    parsed = parse_log(STEP_2)
    assert ts.trainer_status(parsed, NOW)["progressPercentage"] is None
    assert ts.job_epochs(chief_job(epochs="3")) == 3
    assert ts.trainer_status(parsed, NOW, epochs=3)["progressPercentage"] == 50


def test_the_last_epoch_done_is_99_until_the_chief_is_done_then_100_with_its_own_text():
    going = ts.trainer_status(parse_log("\n".join([TRAINING, EPOCH_3])), NOW)
    assert (going["progressPercentage"], going["estimatedRemainingSeconds"]) == (99, 0)
    done = ts.trainer_status(parse_log("\n".join([TRAINING, EPOCH_3, *CLOSING])), NOW)
    assert (done["progressPercentage"], done["estimatedRemainingSeconds"]) == (100, 0)
    assert done["metrics"][:2] == [
        {"name": "test_accuracy", "value": "0.9730"},
        {"name": "loss", "value": "0.1210"},
    ]


def test_the_loop_writes_on_the_chiefs_job_only_what_changed_and_the_final_status_before_it_exits(capsys):
    jobs = run_of(chief=chief_job())
    lines = [TRAINING, STEP_1]
    api = RecordedApi(jobs, [chief_pod("Failed", "mnist-chief-0-old00", "2026-01-02T11:40:00Z"), chief_pod()])
    api.logs[CHIEF_POD] = "\n".join(lines)
    # Each sleep, the chief logs on: the same lines (nothing new), then epoch 1 and a step of
    # epoch 2, then the last epoch and the closing lines, its Job complete.
    turns = iter(
        [
            [],
            [EPOCH_1, STEP_2],
            [EPOCH_3, *CLOSING],
        ]
    )

    def sleep(seconds: float) -> None:
        more = next(turns)
        lines.extend(more)
        api.logs[CHIEF_POD] = "\n".join(lines)
        if CLOSING[-1] in more:
            jobs[0]["status"]["conditions"] = [{"type": "Complete", "status": "True"}]

    clock = iter(NOW + 5 * i for i in range(100))
    assert rm.main(ENV, api=api, clock=lambda: next(clock), sleep=sleep) == 0
    # The newest started pod's log, its container named, 500 lines at most, every poll.
    assert api.log_reads == [("training", CHIEF_POD, ts.TAIL_LINES, "tensorflow")] * 4
    statuses = written(api)
    assert [(s["progressPercentage"], s["estimatedRemainingSeconds"]) for s in statuses] == [
        (17, 10),
        (50, 6),
        (100, 0),
    ]
    final = statuses[-1]
    assert final["metrics"][0] == {"name": "test_accuracy", "value": "0.9730"}
    assert final["metrics"][0]["value"] == EPOCH_3.split("test accuracy ")[1].split(",")[0]
    assert jobs[0]["metadata"]["annotations"][ANNOTATION] == json.dumps(final, separators=(",", ":"))
    out = capsys.readouterr().out
    assert "final trainer status of Job mnist-chief-0: " in out
    assert out.rstrip().endswith("the chief's Job mnist-chief-0 completed")
    assert api.patched == []  # nothing was ended


def test_a_pending_chief_pod_is_not_read_and_a_refused_log_never_stops_the_watch(capsys):
    api = RecordedApi(run_of(chief=chief_job()), [chief_pod("Pending")])
    polls = iter(range(3))

    def sleep(seconds: float) -> None:
        if next(polls) == 0:  # the pod runs, and its log is refused
            api.pods = [chief_pod()]
            api.logs[CHIEF_POD] = rm.ApiError(f"GET pods/{CHIEF_POD}/log: HTTP 403: forbidden")

    with pytest.raises(StopIteration):
        rm.main(ENV, api=api, clock=lambda: NOW, sleep=sleep)
    assert [name for _, name, _, _ in api.log_reads] == [CHIEF_POD] * 3
    assert api.annotated == []
    out = capsys.readouterr().out
    # Said once, not every poll; no failed poll.
    assert out.count(f"cannot read the log of the chief's pod {CHIEF_POD}: ") == 1
    assert "cannot read the run" not in out


def test_a_refused_write_during_the_run_is_noted_and_the_run_is_still_ended_when_the_chief_fails(capsys):
    jobs = run_of(chief=chief_job())
    api = RecordedApi(jobs, [chief_pod()], logs={CHIEF_POD: f"{TRAINING}\n{STEP_1}\n"})

    def refused(namespace: str, name: str, annotations: dict) -> None:
        raise rm.ApiError(f"PATCH jobs/{name}: HTTP 403: forbidden")

    api.annotate_job = refused

    def sleep(seconds: float) -> None:
        jobs[0]["status"]["conditions"] = [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
        ]

    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=sleep) == 0
    assert [name for _, name, _ in api.patched] == ["mnist-worker-0", "mnist-worker-1", "mnist-ps-0"]
    out = capsys.readouterr().out
    assert "cannot report the chief's progress (PATCH jobs/mnist-chief-0: HTTP 403: forbidden)" in out


def test_the_final_status_is_tried_again_until_written_and_keeps_the_metrics_of_a_log_gone(capsys):
    before = {
        "progressPercentage": 99,
        "estimatedRemainingSeconds": 0,
        "metrics": [{"name": "test_accuracy", "value": "0.9730"}],
        "lastUpdatedTime": "2026-01-02T11:59:00Z",
    }
    jobs = run_of(chief=chief_job(condition="Complete", annotation=before))
    api = RecordedApi(jobs, [])  # the chief's pod is gone: no log to read
    recorded, refusals = api.annotate_job, [rm.ApiError("PATCH jobs/mnist-chief-0: HTTP 503: unavailable")]

    def flaky(namespace: str, name: str, annotations: dict) -> None:
        if refusals:
            raise refusals.pop()
        recorded(namespace, name, annotations)

    api.annotate_job = flaky
    assert rm.main(ENV, api=api, clock=lambda: NOW, sleep=lambda s: None) == 0
    assert written(api) == [
        {
            "progressPercentage": 100,
            "estimatedRemainingSeconds": 0,
            "metrics": [{"name": "test_accuracy", "value": "0.9730"}],
            "lastUpdatedTime": "2026-01-02T12:00:00Z",
        }
    ]
    assert (
        "cannot read the run (1 of 60): PATCH jobs/mnist-chief-0: HTTP 503: unavailable"
        in capsys.readouterr().out
    )


def test_an_annotation_that_holds_no_object_reads_as_none_and_only_a_change_is_one():
    assert ts.read({"metadata": {"annotations": {ANNOTATION: "not json"}}}) is None
    assert ts.read({"metadata": {"annotations": {ANNOTATION: "[1]"}}}) is None
    assert ts.read({"metadata": {}}) is None
    old = {"progressPercentage": 5, "metrics": [], "lastUpdatedTime": "2026-01-02T11:00:00Z"}
    assert not ts.changed({**old, "lastUpdatedTime": "2026-01-02T12:00:00Z"}, old)
    assert ts.changed({**old, "progressPercentage": 6}, old) and ts.changed(old, None)


def test_the_api_reads_a_log_tail_as_text_and_merges_the_annotation(tmp_path):
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    seen: list[tuple[str, str, str, str, bytes]] = []

    class Server(http.server.BaseHTTPRequestHandler):
        def _answer(self, body: bytes, kind: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append(
                (
                    self.command,
                    self.path,
                    self.headers["Accept"],
                    self.headers.get("Content-Type") or "",
                    self.rfile.read(length),
                )
            )
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            self._answer(f"{STEP_1}\n".encode(), "text/plain")

        def do_PATCH(self) -> None:  # noqa: N802 - the base class's name
            self._answer(b'{"kind": "Job"}', "application/json")

        def log_message(self, *args) -> None:
            pass

    with serving(Server) as url:
        api = rm.Api(url, str(token), None, timeout_s=5)
        assert api.pod_log("training", CHIEF_POD, 500, "tensorflow") == f"{STEP_1}\n"
        api.annotate_job("training", "mnist-chief-0", {ANNOTATION: '{"progressPercentage":17}'})
    log_read, patch = seen
    assert log_read[:3] == (
        "GET",
        f"/api/v1/namespaces/training/pods/{CHIEF_POD}/log?tailLines=500&container=tensorflow",
        "text/plain, */*",
    )
    assert patch[:4] == (
        "PATCH",
        "/apis/batch/v1/namespaces/training/jobs/mnist-chief-0?fieldManager=tf-mnist-monitor",
        "application/json",
        "application/merge-patch+json",
    )
    assert json.loads(patch[4]) == {"metadata": {"annotations": {ANNOTATION: '{"progressPercentage":17}'}}}
