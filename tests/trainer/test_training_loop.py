"""The training loop's order of starting chunks and waiting for them, and the times its Step
lines show, with a StepRunner that simulates a cluster on a fake clock in place of
TensorFlow's (the real runner is in test_local_steps.py, the real distributed runs in
test_distributed.py and test_step_line_times.py)."""

from __future__ import annotations

import argparse
import functools
import random
from types import SimpleNamespace

import pytest

from trainer.contract import progress
from trainer.training import loop as loop_mod


class SimulatedSteps:
    """StepRunner's interface on a simulated cluster with a fake clock (``now``, seconds).

    With ``asynchronous`` (a coordinator), ``workers`` workers take the chunks in the order
    started, each as soon as it is free, and every batch takes ``batch_s`` seconds on its
    worker (times ``slower(chunk index)``); a chunk's value function advances the clock to
    the chunk's end. Without, ``run`` itself takes the chunk's time, as a synchronous step
    function does. ``chunks`` keeps each chunk's (start, end, batches).

    ``run`` records ("run", first step, steps); a value function records ("wait", the step
    after the chunk) and gives that step as the chunk's cost, so each Step line shows which
    chunk it waited for; ``join`` records ("join",) and advances the clock to the last end.
    """

    def __init__(
        self,
        *args,
        workers: int = 2,
        batch_s: float = 0.0,
        asynchronous: bool = True,
        slower=lambda index: 1.0,
        **kwargs,
    ) -> None:
        self.global_batch = 64
        self.events: list[tuple] = []
        self.now = 0.0
        self.batch_s, self.asynchronous, self.slower = batch_s, asynchronous, slower
        self.free_at = [0.0] * workers  # when each worker has run its chunks
        self.chunks: list[tuple[float, float, int]] = []

    def run(self, num_steps: int, at_step: int):
        self.events.append(("run", at_step, num_steps))
        seconds = num_steps * self.batch_s * self.slower(len(self.chunks))
        if self.asynchronous:
            worker = min(range(len(self.free_at)), key=self.free_at.__getitem__)
            start = max(self.now, self.free_at[worker])
            self.free_at[worker] = start + seconds
        else:
            start = self.now
            self.now += seconds
        end = start + seconds
        self.chunks.append((start, end, num_steps))

        def value():
            self.events.append(("wait", at_step + num_steps))
            self.now = max(self.now, end)
            return float(at_step + num_steps), 0.0

        return value

    def join(self) -> None:
        self.events.append(("join",))
        self.now = max(self.now, *self.free_at)

    def run_by(self, now: float) -> float:
        """The batches run by ``now``, a running chunk's share of its time included."""
        return sum(
            k * min(1.0, max(0.0, (now - start) / (end - start)))
            for start, end, k in self.chunks
            if end > start
        )


class SigtermAsked:
    """SigtermFlag's interface: ``requested`` asks ``asked()``."""

    def __init__(self, asked) -> None:
        self.asked = asked

    def training(self) -> None:
        pass

    @property
    def requested(self) -> bool:
        return self.asked()


def _loop(
    tmp_path,
    monkeypatch,
    steps_per_epoch: int,
    requested=lambda: False,
    steps_per_execution: int = 2,
    log_interval: int = 4,
    **cluster,
):
    """A chief's TrainingLoop on SimulatedSteps(**cluster), on its fake clock."""
    monkeypatch.setattr(loop_mod, "StepRunner", functools.partial(SimulatedSteps, **cluster))
    args = argparse.Namespace(
        epochs=1, steps_per_execution=steps_per_execution, log_interval=log_interval, log_dir=str(tmp_path)
    )
    state = SimpleNamespace(
        is_chief=True, task_name="chief-0", save=lambda epoch, batch: f"ckpt at {epoch}/{batch}"
    )
    sigterm = SigtermAsked(requested)
    watchdog = SimpleNamespace(kick=lambda: None)
    loop = loop_mod.TrainingLoop(
        args,
        dist=None,
        state=state,
        packing=None,
        model=None,
        dataset=None,
        steps_per_epoch=steps_per_epoch,
        watchdog=watchdog,
        sigterm=sigterm,
    )
    loop.clock = lambda: loop.steps.now
    return loop


def test_a_step_line_waits_only_once_the_next_intervals_chunks_are_started(tmp_path, monkeypatch, capsys):
    loop = _loop(tmp_path, monkeypatch, steps_per_epoch=10)
    assert loop._train_epoch(0, 0, 0.0)
    assert loop.steps.events == [
        ("run", 0, 2),
        ("run", 2, 2),
        ("run", 4, 2),
        ("run", 6, 2),
        ("wait", 2),
        ("wait", 4),  # interval 1's chunks, after interval 2's were started
        ("run", 8, 2),
        ("wait", 6),
        ("wait", 8),
        ("wait", 10),
    ]  # the epoch's end: no Step line (10 is no multiple of 4)
    steps = progress.parse_log(capsys.readouterr().out).steps
    assert [(s["step"], s["batch"], s["batches"], s["cost"]) for s in steps] == [
        (4, 4, 10, 4.0),
        (8, 8, 10, 8.0),
    ]


def test_a_resumed_epochs_step_lines_count_the_runs_global_steps(tmp_path, monkeypatch, capsys):
    loop = _loop(tmp_path, monkeypatch, steps_per_epoch=8)
    assert loop._train_epoch(2, 4, 0.0)  # epoch 3 from its batch 4
    assert loop.steps.events == [("run", 20, 2), ("run", 22, 2), ("wait", 22), ("wait", 24)]
    steps = progress.parse_log(capsys.readouterr().out).steps
    assert [(s["step"], s["epoch"], s["batch"], s["cost"]) for s in steps] == [(24, 3, 8, 24.0)]


@pytest.mark.parametrize("stop_after_runs", [1, 3])
def test_sigterm_prints_the_interval_still_unreported_then_saves(
    tmp_path, monkeypatch, capsys, stop_after_runs
):
    loop = _loop(
        tmp_path,
        monkeypatch,
        steps_per_epoch=10,
        requested=lambda: sum(e[0] == "run" for e in loop.steps.events) >= stop_after_runs,
    )
    assert not loop._train_epoch(0, 0, 0.0)
    out = capsys.readouterr().out
    stopped_at = 2 * stop_after_runs
    assert f"SIGTERM: saved checkpoint ckpt at 0/{stopped_at} at epoch 1, batch {stopped_at}" in out
    expected_lines = [4] if stopped_at >= 4 else []
    assert [s["batch"] for s in progress.parse_log(out).steps] == expected_lines
    # Every step started has run before the checkpoint; then interval 1's cost is read.
    waits_after_join = [("wait", 4)] if stopped_at >= 4 else []
    assert loop.steps.events[-1 - len(waits_after_join) :] == [("join",), *waits_after_join]


@pytest.mark.parametrize(
    "workers, asynchronous, steps_per_execution",
    [(1, True, 20), (2, True, 20), (4, True, 20), (2, True, 10), (2, True, 5), (4, True, 5), (3, False, 20)],
    ids=[
        "1 worker",
        "2 workers",
        "4 workers",
        "2 workers, 2 chunks a line",
        "2 workers, 4 chunks a line",
        "4 workers, 4 chunks a line",
        "synchronous",
    ],
)
@pytest.mark.parametrize(
    "jitter, slow_worker",
    [(0.0, 1.0), (0.5, 1.0), (0.5, 3.0)],
    ids=["even", "50% jitter", "50% jitter, one worker 3x slower"],
)
def test_avgtime_is_the_wall_time_per_batch_since_the_epochs_start(
    tmp_path, monkeypatch, capsys, workers, asynchronous, steps_per_execution, jitter, slow_worker
):
    # The quick start's shape: 125 batches, a Step line every 20; 10 ms a batch on a worker,
    # each chunk up to ``jitter`` slower or faster (seeded), every other chunk of them
    # ``slow_worker`` times slower.
    for seed in range(10):
        factors = [
            (slow_worker if i % 2 else 1) * random.Random(seed * 1000 + i).uniform(1 - jitter, 1 + jitter)
            for i in range(125)
        ]
        loop = _loop(
            tmp_path,
            monkeypatch,
            steps_per_epoch=125,
            log_interval=20,
            steps_per_execution=steps_per_execution,
            workers=workers,
            batch_s=0.01,
            asynchronous=asynchronous,
            slower=factors.__getitem__,
        )
        sim, line_times = loop.steps, []
        step_line = loop._step_line

        def timed_step_line(*args):
            line_times.append(sim.now)
            step_line(*args)

        loop._step_line = timed_step_line
        assert loop._train_epoch(0, 0, 0.0)
        sim.join()
        steps = progress.parse_log(capsys.readouterr().out).steps
        assert [s["batch"] for s in steps] == [20, 40, 60, 80, 100, 120]
        epoch_ms = 1000 * sim.now / 125  # the epoch's wall time per batch
        for n, (step, now) in enumerate(zip(steps, line_times, strict=True), start=1):
            true_ms = 1000 * now / sim.run_by(now)  # so far
            # EpochPace's bounds on the epoch's n-th line, give or take the line's 0.005 ms
            # of rounding; exact when nothing runs beyond the chunks seen done.
            low, high = (1, 1) if not asynchronous else (2 * n / (2 * n + 1), 4 / 3)
            assert low * true_ms - 0.005 <= step["avg_ms"] <= high * true_ms + 0.005, (seed, n, true_ms)
            if jitter == 0:  # else a line's first batches may have run 3x faster than the rest
                assert 0.5 <= step["avg_ms"] / epoch_ms <= 2, (seed, n, epoch_ms)
