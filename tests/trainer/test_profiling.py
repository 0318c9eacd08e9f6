"""The opt-in profile window (trainer/profiling.py) and its table's categories
(benchmarks/profile_table.py), without training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainer import profiling

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import profile_table  # noqa: E402


def test_profiling_is_off_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(profiling.PROFILE_ENV, raising=False)
    profile = profiling.TrainingProfile("chief-0", True, steps_per_epoch=90)
    for batch in range(0, 91, 10):
        profile.at_batch(batch, join=lambda: None)
    assert profile.state == "idle"
    server = profiling.ServerProfile("ps-0")
    server.poll()
    assert server.state == "idle"


def test_the_chief_opens_a_third_of_an_epoch_in_and_closes_a_third_later(monkeypatch, tmp_path):
    monkeypatch.setenv(profiling.PROFILE_ENV, str(tmp_path))
    started, joins = [], []
    monkeypatch.setattr(profiling, "_start", lambda d: started.append(d) or (0.0, 0.0))
    monkeypatch.setattr(
        profiling,
        "_stop",
        lambda d, clock, extra: d.with_suffix(".json").write_text(
            json.dumps({"cpu_s": 1.0, "wall_s": 2.0, **extra})
        ),
    )
    chief = profiling.TrainingProfile("chief-0", True, steps_per_epoch=90)
    server = profiling.ServerProfile("ps-0")
    windows = []
    for batch in range(10, 91, 10):
        chief.at_batch(batch, join=lambda b=batch: joins.append(b))
        server.poll()
        windows.append((batch, chief.state, server.state))
    assert windows[1:7] == [
        (20, "idle", "idle"),
        (30, "running", "running"),
        (40, "running", "running"),
        (50, "running", "running"),
        (60, "stopped", "stopped"),
        (70, "stopped", "stopped"),
    ]
    assert joins == [30, 60]  # the window holds whole, finished steps
    assert started == [tmp_path / "chief-0", tmp_path / "ps-0"]
    assert json.loads((tmp_path / "chief-0.json").read_text())["batches"] == 30


def test_trace_events_fall_into_the_tables_categories():
    assert profile_table.category("tf_Compute/1", "while/body/conv2d/Relu:_MklNativeFusedConv2D") == "model"
    assert profile_table.category("tf_Compute/1", "while/body/concat/_39:_Send") == "transfers"
    assert profile_table.category("tf_Compute/1", "while/body/adam/Sub_3:Sub") == "optimizer"
    assert (
        profile_table.category("tf_Compute/1", "while/body/adam/AssignAddVariableOp:AssignAddVariableOp")
        == "optimizer"
    )
    assert profile_table.category("tf_data_private_threadpool/3", "GatherV2") == "input"
    assert profile_table.category("tf_Compute/1", "ExecutorState::Process") == "runtime"
    assert profile_table.category("tf_Compute/1", "KernelAndDeviceFunc::Run") == "waiting"
