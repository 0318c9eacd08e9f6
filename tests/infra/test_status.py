"""infra.status against recorded objects (the shapes ``kubectl get -o json`` returns).

Unit tests only: the acceptance is the status command against the real local cluster
(tests/cluster), which runs it on a real run.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from infra import status
from infra.status import cli
from trainer.contract import progress

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)
CHIEF_LOG_RUNNING = """\
Training convnet on 60000 examples from /data/mnist (idx); strategy parameter_server; 10 epochs of 3000 batches of 20; adam lr 0.001
Step: 100,  Epoch: 1,  Batch: 100 of 3000,  Cost: 0.9000,  AvgTime: 10.00ms
Epoch 1 of 10 done: cost 0.3000, train accuracy 0.9100, test accuracy 0.9600, test cost 0.1300, 30.0s, 2000 examples/s; checkpoint /data/runs/mnist/checkpoints/ckpt-1
Epoch 2 of 10 done: cost 0.1000, train accuracy 0.9700, test accuracy 0.9800, test cost 0.0700, 30.0s, 2000 examples/s; checkpoint /data/runs/mnist/checkpoints/ckpt-2
Step: 6600,  Epoch: 3,  Batch: 600 of 3000,  Cost: 0.0800,  AvgTime: 10.00ms
"""
CHIEF_LOG_DONE = (
    CHIEF_LOG_RUNNING
    + """\
Test-Accuracy: 0.9912
Total Time: 301.50s
Final Cost: 0.0301
done
"""
)


def job(
    task_type: str, index: int, *, active: int = 0, condition: str | None = None, failed: int = 0
) -> dict:
    name = f"mnist-{task_type}-{index}"
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {
        "kind": "Job",
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-01-02T11:50:00Z",
            "labels": {
                "app.kubernetes.io/instance": "mnist",
                "app.kubernetes.io/component": task_type,
                "tf-replica-type": task_type,
                "tf-replica-index": str(index),
            },
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "command": ["python", "-m", "trainer"],
                            "args": [
                                "--data_dir",
                                "/data/mnist",
                                "--log_dir",
                                "/data/runs/mnist",
                                "--run_id",
                                "0123456789ab",
                            ],
                        }
                    ]
                }
            }
        },
        "status": {
            "startTime": "2026-01-02T11:50:00Z",
            "active": active,
            "failed": failed,
            "conditions": conditions,
        },
    }


def pod(
    task_type: str,
    index: int,
    phase: str,
    *,
    restarts: int = 0,
    created: str = "2026-01-02T11:50:05Z",
    suffix: str = "abcde",
) -> dict:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"mnist-{task_type}-{index}-{suffix}",
            "creationTimestamp": created,
            "labels": {"app.kubernetes.io/instance": "mnist", "job-name": f"mnist-{task_type}-{index}"},
        },
        "spec": {"nodeName": "node-1"},
        "status": {"phase": phase, "containerStatuses": [{"name": "tensorflow", "restartCount": restarts}]},
    }


class Recorded:
    """A Cluster answering with recorded objects; records what it was asked."""

    def __init__(
        self,
        objects: list[dict],
        logs: dict[str, str],
        events: list[dict] | None = None,
        nodes: list[dict] | None = None,
    ) -> None:
        self.objects, self.log_texts, self.asked, self.event_list = objects, logs, [], events or []
        self.node_list = nodes or []

    def get(self, kinds: str, selector: str) -> list[dict]:
        self.asked.append((kinds, selector))
        return json.loads(json.dumps(self.objects))

    def logs(self, pod: str) -> str:
        return self.log_texts.get(pod, "")

    def events(self) -> list[dict]:
        return json.loads(json.dumps(self.event_list))

    def nodes(self) -> list[dict]:
        return json.loads(json.dumps(self.node_list))


def running_run() -> Recorded:
    objects = [
        job("chief", 0, active=1),
        job("worker", 1, active=1),
        job("worker", 0, active=1),
        job("ps", 0, active=1, failed=1),
        pod("chief", 0, "Running"),
        pod("worker", 0, "Running"),
        pod("worker", 1, "Running", restarts=0),
        pod("ps", 0, "Failed", created="2026-01-02T11:50:01Z", suffix="old00"),
        pod("ps", 0, "Running", created="2026-01-02T11:55:00Z", suffix="new00"),
    ]
    return Recorded(objects, {"mnist-chief-0-abcde": CHIEF_LOG_RUNNING})


def finished_run() -> Recorded:
    objects = [
        job("chief", 0, condition="Complete"),
        job("worker", 0, condition="Complete"),
        job("ps", 0, condition="Complete"),
        pod("chief", 0, "Succeeded"),
        pod("worker", 0, "Succeeded"),
        pod("ps", 0, "Succeeded"),
    ]
    return Recorded(objects, {"mnist-chief-0-abcde": CHIEF_LOG_DONE})


def test_a_running_run_has_one_row_per_task_the_chiefs_progress_and_exit_3(capsys):
    cluster = running_run()
    code = status.main(
        ["--kubeconfig", "k.yaml", "--namespace", "default", "--prefix", "mnist"],
        cluster=cluster,
        clock=lambda: NOW,
    )
    out = capsys.readouterr().out
    assert code == status.EXIT_RUNNING == 3
    assert cluster.asked == [("jobs,pods,pvc", "app.kubernetes.io/instance=mnist")]
    assert out.splitlines()[0] == "Run mnist (namespace default, run id 0123456789ab): RUNNING"
    rows = [line.split() for line in out.splitlines()[2:7]]
    assert rows[0] == ["TASK", "JOB", "STATUS", "POD", "RESTARTS", "NODE", "AGE"]
    # chief, workers in index order, ps; the ps shows its newest pod and one replaced pod
    assert rows[1:] == [
        ["chief-0", "mnist-chief-0", "Running", "Running", "0", "node-1", "10m"],
        ["worker-0", "mnist-worker-0", "Running", "Running", "0", "node-1", "10m"],
        ["worker-1", "mnist-worker-1", "Running", "Running", "0", "node-1", "10m"],
        ["ps-0", "mnist-ps-0", "Running", "Running", "1", "node-1", "10m"],
    ]
    chief = next(line for line in out.splitlines() if line.startswith("Chief:"))
    # 2 of 10 epochs at 30 s each, 600 of 3000 batches into the third: 7.8 x 30 s = 234 s
    assert chief == (
        "Chief:       epoch 2 of 10 done (epoch 3: batch 600 of 3000), cost 0.0800, "
        "test accuracy 0.9800, 2000 examples/s, about 3m left"
    )
    assert "Logs:        /data/runs/mnist/logs/<task>.log on the shared volume" in out
    assert "kubectl --namespace default logs job/mnist-chief-0" in out
    assert ("TensorBoard: kubectl --namespace default port-forward service/mnist-tensorboard 6006:80") in out


def test_a_finished_run_exits_0_with_the_result():
    cluster = finished_run()
    run = status.collect(cluster, "mnist", "default", NOW, "http://203.0.113.7/")
    assert run.state == "Finished" and run.exit_code == 0
    text = status.render(run)
    assert "Run mnist (namespace default, run id 0123456789ab): FINISHED" in text
    assert "Chief:       finished: test accuracy 0.9912, final cost 0.0301, total time 302s" in text
    assert "TensorBoard: http://203.0.113.7/" in text


def test_a_failed_task_job_fails_the_run():
    cluster = running_run()
    cluster.objects[3] = job("ps", 0, condition="Failed", failed=5)
    assert status.collect(cluster, "mnist", "default", NOW).exit_code == status.EXIT_FAILED


def test_pending_before_any_pod_runs_and_no_progress_yet():
    cluster = Recorded([job("chief", 0), job("ps", 0)], {})
    run = status.collect(cluster, "mnist", "default", NOW)
    assert run.state == "Pending" and run.exit_code == 3
    assert [r.phase for r in run.tasks] == ["-", "-"]
    assert "Chief:       no progress lines yet" in status.render(run)


def finishing_run() -> Recorded:
    """The chief's Job completed; the ps has yet to see the done marker."""
    objects = [
        job("chief", 0, condition="Complete"),
        job("worker", 0, condition="Complete"),
        job("ps", 0, active=1),
        pod("chief", 0, "Succeeded"),
        pod("worker", 0, "Succeeded"),
        pod("ps", 0, "Running"),
    ]
    return Recorded(objects, {"mnist-chief-0-abcde": CHIEF_LOG_DONE})


def test_a_run_whose_chief_is_done_but_a_ps_still_runs_is_finishing_not_finished():
    run = status.collect(finishing_run(), "mnist", "default", NOW)
    assert run.state == "Finishing" and run.exit_code == status.EXIT_RUNNING
    assert "Run mnist (namespace default, run id 0123456789ab): FINISHING" in status.render(run)


def test_watch_refreshes_until_the_run_ends(capsys):
    states = [running_run(), finishing_run(), finished_run()]

    class Changing:
        def get(self, kinds, selector):
            self.now = states.pop(0) if len(states) > 1 else states[0]
            return self.now.get(kinds, selector)

        def logs(self, pod):
            return self.now.logs(pod)

        def events(self):
            return []

        def nodes(self):
            return []

    sleeps = []
    code = status.main(
        ["--namespace", "default", "--prefix", "mnist", "--kubeconfig", "k", "--watch", "--interval", "2"],
        cluster=Changing(),
        clock=lambda: NOW,
        sleep=sleeps.append,
    )
    out = capsys.readouterr().out
    assert code == 0 and sleeps == [2.0, 2.0]
    assert [line.rsplit(": ", 1)[1] for line in out.splitlines() if line.startswith("Run mnist")] == [
        "RUNNING",
        "FINISHING",
        "FINISHED",
    ]


def test_no_jobs_of_the_prefix_is_unreadable(capsys):
    code = status.main(
        ["--namespace", "default", "--prefix", "other", "--kubeconfig", "k"], cluster=Recorded([], {})
    )
    assert code == status.EXIT_UNREADABLE == 4
    assert "no task or staging Jobs labelled app.kubernetes.io/instance=other" in capsys.readouterr().err


def test_defaults_come_from_the_stack_outputs(tmp_path):
    outputs = {
        "namespace": "team",
        "jobNames": ["exp1-chief-0", "exp1-worker-0"],
        "kubeconfig": "apiVersion: v1\nkind: Config\n",
        "tensorboardUrl": None,
        "runId": "feedbeefcafe",
    }
    args = status.build_parser().parse_args([])
    kubeconfig, namespace, prefix, url, run_id = status.resolve(args, lambda: outputs)
    assert (namespace, prefix, url, run_id) == ("team", "exp1", None, "feedbeefcafe")
    assert kubeconfig == outputs["kubeconfig"]
    # a kubeconfig output that is a path (kubeconfig mode) is used as it is; flags win
    args = status.build_parser().parse_args(["--prefix", "mine"])
    assert status.resolve(args, lambda: {**outputs, "kubeconfig": "/etc/k.yaml"})[:3] == (
        "/etc/k.yaml",
        "team",
        "mine",
    )


def test_a_kubeconfig_output_goes_to_a_private_file_removed_after_the_command(monkeypatch):
    """The stack's kubeconfig output (a credential) reaches kubectl as a 0600 file in a 0700
    directory, which the command removes when it ends, also when kubectl fails."""
    seen = []

    class Failing(Recorded):
        def __init__(self, path: str) -> None:
            super().__init__([], {})
            seen.append(
                (
                    path,
                    open(path).read(),
                    os.stat(path).st_mode & 0o777,
                    os.stat(os.path.dirname(path)).st_mode & 0o777,
                )
            )

        def get(self, kinds: str, selector: str) -> list[dict]:
            raise status.StatusError("kubectl: the server asked for credentials")

    monkeypatch.setattr(cli, "Kubectl", lambda path, namespace, kubectl: Failing(path))
    content = "apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: secret}}]\n"
    outputs = {"namespace": "team", "jobNames": ["exp1-chief-0"], "kubeconfig": content}
    assert status.main([], outputs=lambda: outputs) == status.EXIT_UNREADABLE
    [(path, text, file_mode, dir_mode)] = seen
    assert (text, file_mode, dir_mode) == (content, 0o600, 0o700)
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    # a path is used as it is, and nothing is written
    with status.kubeconfig_file("/etc/k.yaml") as given:
        assert given == "/etc/k.yaml"


def test_explicit_arguments_never_ask_pulumi():
    args = status.build_parser().parse_args(["--kubeconfig", "k", "--namespace", "n", "--prefix", "p"])

    def no_pulumi():
        raise AssertionError("pulumi stack output was called")

    assert status.resolve(args, no_pulumi) == ("k", "n", "p", None, None)


@pytest.mark.parametrize("seconds, text", [(None, "-"), (5, "5s"), (125, "2m"), (7200, "2h"), (200000, "2d")])
def test_age_reads_like_kubectl(seconds, text):
    assert status.age(seconds) == text


def test_a_restarted_chiefs_log_counts_the_epochs_done_before_it():
    # The newest chief pod's log begins at its checkpoint: no Epoch line of epochs 1-5.
    log = """\
Training convnet on 60000 examples from /data/mnist (idx); strategy parameter_server; 10 epochs of 3000 batches of 20; adam lr 0.001
Restored checkpoint /data/runs/mnist/checkpoints/ckpt-5: 5 of 10 epochs done; continuing from epoch 6
Step: 15100,  Epoch: 6,  Batch: 100 of 3000,  Cost: 0.0900,  AvgTime: 10.00ms
Step: 15600,  Epoch: 6,  Batch: 600 of 3000,  Cost: 0.0800,  AvgTime: 10.00ms
"""
    # 4.8 epochs of 3000 batches at 10 ms: 144 s (counting epoch 1-5 too gave 294 s, "4m")
    assert status.progress_line(progress.parse_log(log)) == (
        "epoch 5 of 10 done (epoch 6: batch 600 of 3000), cost 0.0800, 2000 examples/s, about 2m left"
    )


#: The chief's lines of a quick-start run up to epoch 2's first Step line (2 workers + 1 ps,
#: --epochs 3 --log_interval 20 on the bundled sample; benchmarks/step_line_times.py at load
#: 6): epoch 1 took 1.5 s, 5402 examples/s.
QUICK_START = """\
Training convnet_fc_slim on 8000 examples from trainer/data/mnist-10k (idx, mnist-10k by sha256); strategy parameter_server; 3 epochs of 125 batches of 64; adam lr 0.004 (warmup_cosine); label smoothing 0.1; mixed_bfloat16; exchanging every 50 steps
Step: 20,  Epoch: 1,  Batch: 20 of 125,  Cost: 1.2695,  AvgTime: 14.81ms
Step: 40,  Epoch: 1,  Batch: 40 of 125,  Cost: 1.1456,  AvgTime: 11.51ms
Step: 60,  Epoch: 1,  Batch: 60 of 125,  Cost: 0.4158,  AvgTime: 12.63ms
Step: 80,  Epoch: 1,  Batch: 80 of 125,  Cost: 0.2938,  AvgTime: 14.62ms
Step: 100,  Epoch: 1,  Batch: 100 of 125,  Cost: 0.3198,  AvgTime: 13.17ms
Step: 120,  Epoch: 1,  Batch: 120 of 125,  Cost: 0.2724,  AvgTime: 11.90ms
Epoch 1 of 3 done: cost 0.6069, train accuracy 0.8469, test accuracy 0.9535, test cost 0.2646, 1.5s, 5402 examples/s; checkpoint runs/local/checkpoints/ckpt-1
Step: 145,  Epoch: 2,  Batch: 20 of 125,  Cost: 0.2802,  AvgTime: 7.80ms
"""


def test_speed_and_time_left_before_the_first_epoch_follow_from_avgtime():
    lines = QUICK_START.splitlines()
    for count in range(2, 8):  # the Training line and the first 1-6 Step lines
        parsed = progress.parse_log("\n".join(lines[:count]))
        avg_ms = parsed.steps[-1]["avg_ms"]
        text = status.progress_line(parsed)
        # examples/s: the global batch of 64 (a worker's, with a ps) x 1000 / AvgTime; 0.80
        # to 1.03 of what epoch 1 gave in the end
        assert f", {64000 / avg_ms:.0f} examples/s, " in text
        assert 0.5 <= 64000 / avg_ms / 5402 <= 2
        # time left: the 3 epochs less the share done, at 125 x AvgTime each
        share = parsed.steps[-1]["batch"] / 125
        assert status.time_left(parsed, 3, 0, parsed.steps[-1]) == pytest.approx(
            (3 - share) * 125 * avg_ms / 1000
        )
    # after the second line: 2.68 epochs of 125 batches at 11.51 ms, 3.86 s
    assert status.progress_line(progress.parse_log("\n".join(lines[:3]))) == (
        "epoch 0 of 3 done (epoch 1: batch 40 of 125), cost 1.1456, 5560 examples/s, about 3s left"
    )
    # in epoch 2, epoch 1's own figures: 1.84 epochs left at 1.5 s
    assert status.progress_line(progress.parse_log(QUICK_START)) == (
        "epoch 1 of 3 done (epoch 2: batch 20 of 125), cost 0.2802, test accuracy 0.9535, "
        "5402 examples/s, about 2s left"
    )
