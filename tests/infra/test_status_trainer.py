"""``python -m infra.status`` shows the chief's progress under Kubeflow Trainer v2's names: the
run monitor's annotation on the chief's Job when there is one (infra/trainer_status.py), else
the same object made from the chief's log; in the text view and in ``-o json``."""

from __future__ import annotations

import json

from test_status import NOW, finished_run, running_run

from infra import status

ANNOTATION = "tf-mnist.io/trainer-status"
#: What the run monitor wrote on the chief's Job, as it writes it (compact JSON).
WRITTEN = {
    "progressPercentage": 50,
    "estimatedRemainingSeconds": 6,
    "metrics": [{"name": "test_accuracy", "value": "0.9420"}, {"name": "loss", "value": "0.2030"}],
    "lastUpdatedTime": "2026-01-02T11:59:55Z",
}
ARGS = ["--kubeconfig", "k.yaml", "--namespace", "default", "--prefix", "mnist"]


def annotated(cluster, text: str):
    """``cluster`` with ``text`` in the chief Job's annotation."""
    chief = next(o for o in cluster.objects if o["metadata"]["name"] == "mnist-chief-0")
    chief["metadata"]["annotations"] = {ANNOTATION: text}
    return cluster


def test_the_annotation_is_what_the_view_and_its_json_show(capsys):
    cluster = annotated(running_run(), json.dumps(WRITTEN, separators=(",", ":")))
    run = status.collect(cluster, "mnist", "default", NOW)
    assert (run.trainer_status, run.trainer_status_source) == (WRITTEN, "annotation")
    progress = next(line for line in status.render(run).splitlines() if line.startswith("Progress:"))
    assert progress == (
        "Progress:    50 %, about 6s left; test_accuracy 0.9420, loss 0.2030 "
        "(annotation tf-mnist.io/trainer-status of Job mnist-chief-0, 2026-01-02T11:59:55Z)"
    )
    assert status.main([*ARGS, "-o", "json"], cluster=cluster, clock=lambda: NOW) == status.EXIT_RUNNING
    facts = json.loads(capsys.readouterr().out)
    assert facts["trainer_status"] == WRITTEN and facts["trainer_status_source"] == "annotation"
    # The chief's own line is still the log's.
    assert facts["progress"]["line"].startswith("epoch 2 of 10 done (epoch 3: batch 600 of 3000)")


def test_without_an_annotation_the_same_object_is_made_from_the_chiefs_log():
    run = status.collect(running_run(), "mnist", "default", NOW)
    # 2 of 10 epochs and 600 of 3000 batches: 22 %; 7.8 epochs left at 30 s each.
    assert run.trainer_status_source == "log"
    assert run.trainer_status == {
        "progressPercentage": 22,
        "estimatedRemainingSeconds": 234,
        "metrics": [
            {"name": "test_accuracy", "value": "0.9800"},
            {"name": "loss", "value": "0.0800"},
            {"name": "train_accuracy", "value": "0.9700"},
            {"name": "test_loss", "value": "0.0700"},
            {"name": "examples_per_second", "value": "2000"},
        ],
        "lastUpdatedTime": "2026-01-02T12:00:00Z",
    }
    progress = next(line for line in status.render(run).splitlines() if line.startswith("Progress:"))
    assert progress.startswith("Progress:    22 %, about 3m left; test_accuracy 0.9800, loss 0.0800")
    assert progress.endswith("(from the chief's log: no annotation yet)")


def test_an_annotation_that_holds_no_object_is_passed_over_for_the_log():
    run = status.collect(annotated(running_run(), "{not json"), "mnist", "default", NOW)
    assert run.trainer_status_source == "log" and run.trainer_status["progressPercentage"] == 22


def test_a_finished_run_is_100_percent_with_the_chiefs_final_accuracy():
    run = status.collect(finished_run(), "mnist", "default", NOW)
    assert run.trainer_status["progressPercentage"] == 100
    assert run.trainer_status["estimatedRemainingSeconds"] == 0
    assert run.trainer_status["metrics"][:2] == [
        {"name": "test_accuracy", "value": "0.9912"},
        {"name": "loss", "value": "0.0301"},
    ]
    assert "Progress:    100 %; test_accuracy 0.9912, loss 0.0301" in status.render(run)


def test_an_annotation_of_the_wrong_shape_shows_what_is_unknown_as_unknown():
    cluster = annotated(running_run(), json.dumps({"progressPercentage": "half", "metrics": 5}))
    run = status.collect(cluster, "mnist", "default", NOW)
    progress = next(line for line in status.render(run).splitlines() if line.startswith("Progress:"))
    assert progress.startswith(
        "Progress:    ? % (annotation tf-mnist.io/trainer-status of Job mnist-chief-0, ?)"
    )
