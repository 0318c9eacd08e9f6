"""A background thread that samples every process of a tree (a root and its descendants,
looked up again at each sample) at a fixed interval: what the benchmarks' memory and CPU
figures are read from (bench_runs.PeakMemory, step_line_times.CpuTime)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psutil


class TreeSampler:
    """Calls ``sample(process)`` for the root and each of its descendants every ``interval_s``
    seconds until ``stop``. A process that is gone or unreadable (psutil.Error) is skipped for
    that sample; a root that has exited leaves nothing to sample."""

    def __init__(
        self, root: psutil.Process, interval_s: float, sample: Callable[[psutil.Process], None]
    ) -> None:
        self.root, self.interval_s, self._sample = root, interval_s, sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                procs = []
            for proc in procs:
                try:
                    self._sample(proc)
                except psutil.Error:
                    continue
            time.sleep(self.interval_s)

    def stop(self) -> None:
        """End the sampling; returns once the thread has taken its last sample."""
        self._stop.set()
        self._thread.join()
