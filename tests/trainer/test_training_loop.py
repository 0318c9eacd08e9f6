"""The training loop's order of starting chunks and waiting for them, with a StepRunner that
records its calls in place of TensorFlow's (the real runner is in test_local_steps.py and
the real distributed runs in test_distributed.py)."""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import pytest

from trainer.contract import progress
from trainer.training import loop as loop_mod


class RecordingSteps:
    """StepRunner's interface: ``run`` records ("run", first step, steps) and returns a
    function that records ("wait", the step after the chunk) and gives that step as the
    chunk's cost, so each Step line shows which chunk it waited for."""

    def __init__(self, *args, **kwargs) -> None:
        self.global_batch = 64
        self.events: list[tuple] = []

    def run(self, num_steps: int, at_step: int):
        self.events.append(("run", at_step, num_steps))

        def value():
            self.events.append(("wait", at_step + num_steps))
            return float(at_step + num_steps), 0.0
        return value

    def join(self) -> None:
        self.events.append(("join",))


class SigtermAsked:
    """SigtermFlag's interface: ``requested`` asks ``asked()``."""

    def __init__(self, asked) -> None:
        self.asked = asked

    def training(self) -> None:
        pass

    @property
    def requested(self) -> bool:
        return self.asked()


def _loop(tmp_path, monkeypatch, steps_per_epoch: int, requested=lambda: False):
    monkeypatch.setattr(loop_mod, "StepRunner", RecordingSteps)
    args = argparse.Namespace(epochs=1, steps_per_execution=2, log_interval=4,
                              log_dir=str(tmp_path))
    state = SimpleNamespace(is_chief=True, task_name="chief-0",
                            save=lambda epoch, batch: f"ckpt at {epoch}/{batch}")
    sigterm = SigtermAsked(requested)
    watchdog = SimpleNamespace(kick=lambda: None)
    return loop_mod.TrainingLoop(args, dist=None, state=state, packing=None, model=None,
                                 dataset=None, steps_per_epoch=steps_per_epoch,
                                 watchdog=watchdog, sigterm=sigterm)


def test_a_step_line_waits_only_once_the_next_intervals_chunks_are_started(
        tmp_path, monkeypatch, capsys):
    loop = _loop(tmp_path, monkeypatch, steps_per_epoch=10)
    assert loop._train_epoch(0, 0, time.perf_counter())
    assert loop.steps.events == [
        ("run", 0, 2), ("run", 2, 2), ("run", 4, 2), ("run", 6, 2),
        ("wait", 4),  # interval 1's last chunk, after interval 2's were started
        ("run", 8, 2),
        ("wait", 8),
        ("wait", 10)]  # the epoch's end: no Step line (10 is no multiple of 4)
    steps = progress.parse_log(capsys.readouterr().out).steps
    assert [(s["step"], s["batch"], s["batches"], s["cost"]) for s in steps] == [
        (4, 4, 10, 4.0), (8, 8, 10, 8.0)]


def test_a_resumed_epochs_step_lines_count_the_runs_global_steps(
        tmp_path, monkeypatch, capsys):
    loop = _loop(tmp_path, monkeypatch, steps_per_epoch=8)
    assert loop._train_epoch(2, 4, time.perf_counter())  # epoch 3 from its batch 4
    assert loop.steps.events == [("run", 20, 2), ("run", 22, 2), ("wait", 24)]
    steps = progress.parse_log(capsys.readouterr().out).steps
    assert [(s["step"], s["epoch"], s["batch"], s["cost"]) for s in steps] == [(24, 3, 8, 24.0)]


@pytest.mark.parametrize("stop_after_runs", [1, 3])
def test_sigterm_prints_the_interval_still_unreported_then_saves(
        tmp_path, monkeypatch, capsys, stop_after_runs):
    loop = _loop(tmp_path, monkeypatch, steps_per_epoch=10,
                 requested=lambda: sum(e[0] == "run" for e in loop.steps.events)
                 >= stop_after_runs)
    assert not loop._train_epoch(0, 0, time.perf_counter())
    out = capsys.readouterr().out
    stopped_at = 2 * stop_after_runs
    assert f"SIGTERM: saved checkpoint ckpt at 0/{stopped_at} at epoch 1, batch {stopped_at}" in out
    expected_lines = [4] if stopped_at >= 4 else []
    assert [s["batch"] for s in progress.parse_log(out).steps] == expected_lines
    assert loop.steps.events[-1 if stopped_at < 4 else -2] == ("join",)
