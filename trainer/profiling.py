"""An opt-in TensorFlow profile of every task over the same training steps (off by default).

With ``TRAINER_PROFILE=<dir>`` in the environment of every task (the launcher passes its
own environment on), the chief (every training task with ps 0) starts ``tf.profiler`` after ``PROFILE_FROM_BATCH`` batches
of the first epoch it trains and stops it ``PROFILE_BATCHES`` batches later, once those
steps have run; each ps and worker, polling ``<dir>/window`` like the chief's done marker,
profiles while that file says ``start`` and stops at ``stop``. Each task writes its trace
under ``<dir>/<task>/`` (TensorBoard's profile plugin layout, ``*.xplane.pb``);
``benchmarks/profile_table.py`` turns the traces into a table of where the time went.

Each task also writes ``<dir>/<task>.json``: the CPU seconds its process spent in the
window (user + system, all threads: ``time.process_time``) and the window's wall seconds,
so the table can say what one step costs each task in CPU, which on a machine with fewer
cores than busy threads is what decides the throughput.

Why a file and not the profiler's own gRPC service: the servers already poll the shared
log directory, and a file needs no extra port (the launcher's tasks live in a network
namespace of their own).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

PROFILE_ENV = "TRAINER_PROFILE"
WINDOW_FILE = "window"


def profile_dir() -> Path | None:
    """The directory of ``TRAINER_PROFILE``, or None when profiling is off."""
    value = os.environ.get(PROFILE_ENV, "")
    return Path(value) if value else None


class ServerProfile:
    """A ps or worker's side of the window: ``poll()`` starts or stops the profiler as the
    chief's window file says. Does nothing when profiling is off."""

    def __init__(self, task: str) -> None:
        self.dir, self.task, self.state = profile_dir(), task, "idle"

    def poll(self) -> None:
        if self.dir is None or self.state == "stopped":
            return
        try:
            window = (self.dir / WINDOW_FILE).read_text().strip()
        except OSError:
            return
        if window == "start" and self.state == "idle":
            self.clock = _start(self.dir / self.task)
            self.state = "running"
        elif window == "stop" and self.state == "running":
            _stop(self.dir / self.task, self.clock, {})
            self.state = "stopped"


class TrainingProfile:
    """A training task's side (the chief; with ps 0 every task, whose steps are
    synchronous): ``at_batch(batch, join)`` after each chunk of the first trained epoch
    (``steps_per_epoch`` batches) starts the profiler a third into it and stops it (after
    ``join()``, so the profiled steps have run) a third of an epoch later; the chief (``opens_window``) also writes
    the window file the servers follow. Does nothing when profiling is off."""

    def __init__(self, task: str, opens_window: bool, steps_per_epoch: int) -> None:
        self.dir, self.task, self.state = profile_dir(), task, "idle"
        self.span = max(1, steps_per_epoch // 3)
        self.opens_window = opens_window
        if self.dir is not None and opens_window:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / WINDOW_FILE).unlink(missing_ok=True)

    def at_batch(self, batch: int, join) -> None:
        if self.dir is None or self.state == "stopped":
            return
        if self.state == "idle" and batch >= self.span:
            join()
            self.clock = _start(self.dir / self.task)
            self._window("start")
            self.state, self.first = "running", batch
        elif self.state == "running" and batch >= self.first + self.span:
            join()
            _stop(self.dir / self.task, self.clock, {"batches": batch - self.first})
            self._window("stop")
            self.state = "stopped"

    def _window(self, text: str) -> None:
        if self.opens_window:
            (self.dir / WINDOW_FILE).write_text(text + "\n")


def _start(trace_dir: Path) -> tuple[float, float]:
    """Start the profiler into ``trace_dir``; return the (CPU, wall) clocks at the start."""
    import tensorflow as tf

    clock = (time.process_time(), time.perf_counter())
    tf.profiler.experimental.start(str(trace_dir))
    return clock


def _stop(trace_dir: Path, clock: tuple[float, float], extra: dict) -> None:
    """Stop the profiler and write ``<trace_dir>.json``: the window's CPU and wall seconds
    since ``clock`` (measured before the trace is written out) and ``extra``."""
    import tensorflow as tf

    cpu_s, wall_s = time.process_time() - clock[0], time.perf_counter() - clock[1]
    tf.profiler.experimental.stop()
    trace_dir.with_suffix(".json").write_text(json.dumps({"cpu_s": cpu_s, "wall_s": wall_s, **extra}) + "\n")
