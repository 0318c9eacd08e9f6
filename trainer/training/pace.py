"""The Step lines' AvgTime: ``EpochPace`` follows one epoch's chunks of steps from their start
to when the training loop sees them done, and gives the epoch's wall time per global batch so
far. Pure Python (no TensorFlow), so that it is tested on a simulated cluster."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Chunk:
    """One chunk of steps: its batches, when it was started (``StepRunner.run`` called; with
    a coordinator, queued) and when the loop saw it done (None until then); clock seconds."""

    batches: int
    started: float
    seen: float | None = None


@dataclass
class EpochPace:
    """AvgTime over an epoch begun at clock second ``start``.

    AvgTime is the wall time since the epoch's start over the batches run by then, in
    milliseconds per global batch. The batches run are those of the chunks seen done, plus
    for each chunk still running the batches its time since it was started would have run at
    the pace of the last chunk seen done (from its start to seen done), at most half of its
    own: a chunk may have waited for a worker, behind others, for part of that time.

    Why so: with a coordinator, a Step line sees its interval's chunks done while the next
    interval's run, and with 2 workers consecutive intervals run at once. Timing each
    interval alone, one wait took two intervals' time and the next none (2 workers + 1 ps,
    ``--epochs 3 --log_interval 20`` on the bundled sample: the lines alternated between
    about twice the epoch's time per batch and nearly nothing; docs/benchmarks.md, and
    benchmarks/step_line_times.py prints it). Since the epoch's start, the
    running chunks are at most one interval against at least one seen done, counted as
    between none and half of their batches: the result is never under 2/3 of the true wall
    time per batch so far on the epoch's first line (2n/(2n+1) on its n-th). It is over it
    where the running chunks ran ahead of the last one's pace; within 4/3 of it in
    simulations of 1-4 workers, with chunks 50% faster or slower at random and every other
    one 3 times slower (tests/trainer/test_training_loop.py).
    """

    start: float
    chunks: list[Chunk] = field(default_factory=list)
    #: How many chunks, from the first, the loop has seen done (it waits in order).
    seen_count: int = 0

    def started(self, batches: int, at: float) -> None:
        """A chunk of ``batches`` batches was started at clock second ``at``."""
        self.chunks.append(Chunk(batches, at))

    def seen_through(self, count: int, at: float) -> None:
        """The first ``count`` chunks are done, seen at clock second ``at`` (those seen
        before keep their time)."""
        for chunk in self.chunks[self.seen_count : count]:
            chunk.seen = at
        self.seen_count = max(self.seen_count, count)

    def avg_ms(self, now: float) -> float:
        """AvgTime at clock second ``now``: milliseconds per global batch since ``start``.

        Raises:
            ValueError: no chunk is seen done yet.
        """
        if not self.seen_count:
            raise ValueError(
                f"no chunk seen done at {now - self.start:.3f} s into the epoch: no time per batch"
            )
        batches = sum(c.batches for c in self.chunks[: self.seen_count])
        last = self.chunks[self.seen_count - 1]
        per_batch = (last.seen - last.started) / last.batches
        for chunk in self.chunks[self.seen_count :]:
            ran = (now - chunk.started) / per_batch if per_batch > 0 else chunk.batches
            batches += min(chunk.batches / 2, max(0.0, ran))
        return 1000 * (now - self.start) / batches
