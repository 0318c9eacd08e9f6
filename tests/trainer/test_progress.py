"""The guide's log lines: exact format, parsed back; the JSON result."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trainer.contract import progress

GUIDE = """Step: 124607,  Epoch: 24,  Batch: 1600 of 2750,  Cost: 0.8027,  AvgTime: 6.79ms
Test-Accuracy: 0.89
Total Time: 1664.68s
Final Cost: 0.5333
done
"""


def test_step_line_has_the_guides_exact_format():
    assert (
        progress.step_line(124607, 24, 1600, 2750, 0.80271, 6.7912)
        == "Step: 124607,  Epoch: 24,  Batch: 1600 of 2750,  Cost: 0.8027,  AvgTime: 6.79ms"
    )


def test_final_lines():
    assert progress.final_lines(0.98765, 12.3456, 0.04321) == [
        "Test-Accuracy: 0.9877",
        "Total Time: 12.35s",
        "Final Cost: 0.0432",
        "done",
    ]


def test_the_guides_own_output_parses():
    parsed = progress.parse_log(GUIDE)
    assert parsed.steps == [
        {"step": 124607, "epoch": 24, "batch": 1600, "batches": 2750, "cost": 0.8027, "avg_ms": 6.79}
    ]
    assert (parsed.test_accuracy, parsed.total_time_s, parsed.final_cost, parsed.done) == (
        0.89,
        1664.68,
        0.5333,
        True,
    )


def test_task_prefixes_and_other_lines_are_ignored():
    text = "[chief-0] " + GUIDE.replace("\n", "\n[chief-0] ") + "[ps-0] ps 0: serving\n"
    parsed = progress.parse_log(text)
    assert len(parsed.steps) == 1 and parsed.done and parsed.test_accuracy == 0.89


def test_the_newest_text_of_each_value_is_kept_as_printed():
    # A report quotes what the chief printed: "0.9730", not a float's "0.973".
    epoch = progress.epoch_line(
        1,
        2,
        {
            "train_cost": 0.3,
            "train_accuracy": 0.91,
            "test_accuracy": 0.973,
            "test_cost": 0.088,
            "examples_per_s": 2440,
        },
        4.1,
        "/ckpt-1",
    )
    step = progress.step_line(80, 2, 2, 78, 0.25, 50.0)
    parsed = progress.parse_log("\n".join([epoch, step]))
    assert parsed.logged == {
        "cost": "0.2500",
        "train_accuracy": "0.9100",
        "test_accuracy": "0.9730",
        "test_cost": "0.0880",
        "examples_per_s": "2440",
    }
    closed = progress.parse_log("\n".join([epoch, step, *progress.final_lines(0.97301, 9.0, 0.21)]))
    assert (closed.logged["test_accuracy"], closed.logged["cost"]) == ("0.9730", "0.2100")


@given(
    step=st.integers(0, 10**9),
    epoch=st.integers(1, 10**4),
    batches=st.integers(1, 10**6),
    cost=st.floats(0, 100, allow_nan=False),
    avg_ms=st.floats(0, 10**5, allow_nan=False),
)
def test_step_lines_parse_back(step, epoch, batches, cost, avg_ms):
    line = progress.step_line(step, epoch, batches, batches, cost, avg_ms)
    (parsed,) = progress.parse_log(line).steps
    assert (parsed["step"], parsed["epoch"], parsed["batch"], parsed["batches"]) == (
        step,
        epoch,
        batches,
        batches,
    )
    assert abs(parsed["cost"] - cost) <= 5e-5 and abs(parsed["avg_ms"] - avg_ms) <= 5e-3


def test_result_json_round_trip(tmp_path):
    result = progress.Result(
        test_accuracy=0.97,
        final_cost=0.1,
        total_time_s=10.0,
        train_time_s=8.0,
        epochs=3,
        resumed_from_epoch=0,
        examples_per_s=3000.0,
        train_examples=8000,
        batch_size=32,
        strategy="parameter_server",
        model="convnet",
        global_step=750,
    )
    path = progress.write_result(tmp_path, result)
    assert path == tmp_path / "result.json"
    assert progress.read_result(tmp_path)["global_step"] == 750
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left
