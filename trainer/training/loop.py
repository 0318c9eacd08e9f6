"""The training loop: the epochs in chunks of steps (trainer.training.steps), a Step line
every ``--log_interval`` batches, and after every epoch a checkpoint, then the chief's
evaluation, TensorBoard scalars and Epoch line; on SIGTERM, a checkpoint where the loop
stands."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from trainer import data as data_mod
from trainer.contract import progress
from trainer.packed import PackedWeights
from trainer.profiling import TrainingProfile
from trainer.training.checkpoints import TrainState
from trainer.training.distribution import Distribution
from trainer.training.evaluation import evaluate_with_cost, prepare_evaluation
from trainer.training.events import EventWriters
from trainer.training.liveness import SigtermFlag, Watchdog, peer_lost
from trainer.training.pace import EpochPace
from trainer.training.schedule import learning_rate_at
from trainer.training.steps import StepRunner


@dataclass
class Outcome:
    """How the loop ended.

    Attributes:
        sigterm: stopped by SIGTERM, after saving a checkpoint; the rest is then partial.
        build_time_s: wall time of building the first step function and the evaluation's
            before the first epoch (TrainingLoop._build), seconds; not in train_time_s.
        train_time_s: wall time of the epochs this process trained, seconds.
        examples: training examples of those epochs.
        last_cost: the last epoch's mean training cost (cross-entropy, nats).
        test_accuracy: the chief's evaluation after the last epoch (a fraction); None on
            other tasks.
    """

    sigterm: bool = False
    build_time_s: float = 0.0
    train_time_s: float = 0.0
    examples: int = 0
    last_cost: float = math.nan
    test_accuracy: float | None = None


class TrainingLoop:
    """Trains ``state``'s packed weights on ``dataset`` under ``dist``, from a resume point to
    ``--epochs``; the chief also evaluates ``model`` (its local copy, filled by ``packing``)
    and writes the run's TensorBoard events.

    Everything the training functions use is reachable from the loop, so that keeping the
    loop keeps them (trainer.training.finish).
    """

    def __init__(
        self,
        args: argparse.Namespace,
        dist: Distribution,
        state: TrainState,
        packing: PackedWeights,
        model,
        dataset: data_mod.Dataset,
        steps_per_epoch: int,
        watchdog: Watchdog,
        sigterm: SigtermFlag,
    ) -> None:
        self.args, self.dist, self.state, self.packing = args, dist, state, packing
        self.model, self.dataset, self.watchdog = model, dataset, watchdog
        self.is_chief = state.is_chief
        self.steps = StepRunner(args, dist, state, packing, dataset, args.epochs * steps_per_epoch)
        self.global_batch = self.steps.global_batch
        self.steps_per_epoch = steps_per_epoch
        self.sigterm = sigterm
        sigterm.training()
        #: Off unless TRAINER_PROFILE is set (trainer/profiling.py).
        self.profile = TrainingProfile(state.task_name, self.is_chief, steps_per_epoch)
        watchdog.kick()
        #: The chief's event writers, one per TensorBoard run (none on other tasks).
        self.events = EventWriters(args.log_dir, progress.TENSORBOARD_SUBDIRS if self.is_chief else ())
        #: The current epoch's chunks: (steps, a function giving (mean loss, correct)).
        self.pending: list[tuple[int, Callable[[], tuple[float, float]]]] = []
        #: The wall clock of the epochs and their Step lines, in seconds.
        self.clock: Callable[[], float] = time.perf_counter

    def run(self, done_epochs: int, done_batches: int) -> Outcome:
        """Train from batch ``done_batches`` of epoch ``done_epochs`` (both counted from 0)
        to the end of ``--epochs``, or until SIGTERM.

        Raises:
            PeerLost: TensorFlow failed to reach a ps or peer.
            trainer.volume.VolumeFull: no space left on --log_dir's volume for a
                checkpoint or the TensorBoard events.
        """
        outcome = Outcome()
        try:
            outcome.build_time_s = self._build(done_epochs * self.steps_per_epoch + done_batches)
            for epoch in range(done_epochs, self.args.epochs):
                batch = done_batches if epoch == done_epochs else 0
                epoch_start = self.clock()
                if not self._train_epoch(epoch, batch, epoch_start):
                    outcome.sigterm = True
                    return outcome
                self.steps.join()
                self._end_epoch(epoch, self.clock() - epoch_start, outcome)
        except tf.errors.OpError as err:
            raise peer_lost(err, self.dist.kind) from None
        return outcome

    def _build(self, at_step: int) -> float:
        """Build the step function of step ``at_step`` (StepRunner.prepare) and, on the chief,
        the evaluation's meanwhile (its first run otherwise costs more, at the first epoch's
        end, when every worker waits for the chief); return the wall seconds."""
        start = self.clock()
        self.steps.prepare(at_step)
        if self.is_chief:
            prepare_evaluation(self.model, self.dataset)
        self.steps.join()
        self.watchdog.kick()
        return self.clock() - start

    def _train_epoch(self, epoch: int, batch: int, epoch_start: float) -> bool:
        """Train epoch ``epoch`` from ``batch`` on (its start seen at ``self.clock()``
        ``epoch_start``), its chunks into ``pending``; return False when SIGTERM stopped it
        (a checkpoint is then saved).

        Each ``--log_interval``'s Step line waits for that interval's chunks, but only once
        the next interval's chunks are started: with a coordinator the workers then always
        have steps queued. Waiting at the interval itself left them idle while the chief
        printed and scheduled again, which cost examples/s against no Step lines at all (2
        workers + 1 ps on full MNIST; docs/benchmarks.md). So a Step line prints one
        interval late, with the interval's own cost; the epoch's last prints before its
        Epoch line. Its AvgTime is since the epoch's start (EpochPace). Without a
        coordinator every chunk has run when ``run`` returns.
        """
        args, steps = self.args, self.steps_per_epoch
        pace = EpochPace(epoch_start)
        unreported = None  # the last interval's (last batch, chunks in pending by then)
        self.pending = []
        while batch < steps:
            k = min(args.steps_per_execution, steps - batch, args.log_interval - batch % args.log_interval)
            started = self.clock()
            value = self.steps.run(k, epoch * steps + batch)
            pace.started(k, started)
            if not self.steps.asynchronous:
                pace.seen_through(len(pace.chunks), self.clock())
            self.pending.append((k, value))
            batch += k
            self.profile.at_batch(batch, self.steps.join)
            if batch % args.log_interval == 0 or batch == steps:
                if unreported:
                    self._report_interval(epoch, pace, *unreported)
                unreported = (batch, len(self.pending))
            if self.sigterm.requested:
                self.steps.join()
                pace.seen_through(len(self.pending), self.clock())
                if unreported:
                    self._report_interval(epoch, pace, *unreported)
                path = self.state.save(epoch, batch)
                self.events.flush()  # os._exit would drop the queued Step scalars
                if self.is_chief:
                    print(
                        f"SIGTERM: saved checkpoint {path} at epoch {epoch + 1}, batch {batch}; exiting",
                        flush=True,
                    )
                return False
        if unreported:
            self._report_interval(epoch, pace, *unreported)
        return True

    def _report_interval(self, epoch: int, pace: EpochPace, batch: int, chunks: int) -> None:
        """Wait for the epoch's first ``chunks`` chunks (in ``pending``), of which the last
        ended an interval at batch ``batch`` of epoch ``epoch``, noting in ``pace`` when each
        was seen done; on the chief where ``batch`` is a multiple of ``--log_interval``,
        print the Step line with the last one's cost and ``pace``'s AvgTime."""
        loss = None
        for index in range(pace.seen_count, chunks):  # in the order started
            loss, _ = self.pending[index][1]()
            pace.seen_through(index + 1, self.clock())
        if loss is None:  # seen done already (run returned, or a join): at once
            loss, _ = self.pending[chunks - 1][1]()
        self.watchdog.kick()
        if self.is_chief and batch % self.args.log_interval == 0:
            self._step_line(epoch, batch, loss, pace.avg_ms(self.clock()))

    def _step_line(self, epoch: int, batch: int, loss: float, avg_ms: float) -> None:
        """The chief's Step line and batch cost scalar at batch ``batch`` of epoch ``epoch``.
        Its step is the run's global batch count at ``batch`` (each global batch is one
        step of the optimizer's schedule)."""
        step = epoch * self.steps_per_epoch + batch
        print(progress.step_line(step, epoch + 1, batch, self.steps_per_epoch, loss, avg_ms), flush=True)
        subdir, tag = progress.BATCH_COST
        self.events.scalar(subdir, tag, loss, step, progress.SERIES_DESCRIPTIONS["batch_cost"])

    def _end_epoch(self, epoch: int, epoch_time: float, outcome: Outcome) -> None:
        """The epoch's results into ``outcome``, its checkpoint, and the chief's report."""
        outcome.train_time_s += epoch_time
        results = [(k, value()) for k, value in self.pending]
        epoch_steps = sum(k for k, _ in results)
        outcome.examples += epoch_steps * self.global_batch
        outcome.last_cost = sum(k * r[0] for k, r in results) / epoch_steps
        train_accuracy = sum(r[1] for _, r in results) / (epoch_steps * self.global_batch)
        path = self.state.save(epoch + 1, 0)
        self.watchdog.kick()
        if self.is_chief:
            outcome.test_accuracy = self._report_epoch(
                epoch,
                epoch_time,
                path,
                {
                    "train_cost": outcome.last_cost,
                    "train_accuracy": train_accuracy,
                    "examples_per_s": epoch_steps * self.global_batch / epoch_time,
                },
            )

    def _report_epoch(self, epoch: int, epoch_time: float, path: str, values: dict) -> float:
        """Evaluate, write the epoch's scalars and print its Epoch line; return the test
        accuracy. ``values``: the epoch's train_cost, train_accuracy and examples_per_s."""
        self.packing.copy_to_model(self.state.weights)
        test_accuracy, test_cost = evaluate_with_cost(self.model, self.dataset)
        # Per-epoch series at step = epoch (1-based): a restarted chief resumes at an
        # epoch boundary, so no two processes write the same epoch.
        epoch_values = {
            "train_cost": values["train_cost"],
            "train_accuracy": values["train_accuracy"],
            "test_cost": test_cost,
            "test_accuracy": test_accuracy,
            "learning_rate": learning_rate_at(self.state.optimizer, int(self.state.global_step.numpy())),
            "examples_per_s": values["examples_per_s"],
        }
        for key, value in epoch_values.items():
            subdir, tag = progress.EPOCH_SERIES[key]
            self.events.scalar(subdir, tag, value, epoch + 1, progress.SERIES_DESCRIPTIONS[key])
        self.events.flush()
        print(progress.epoch_line(epoch + 1, self.args.epochs, epoch_values, epoch_time, path), flush=True)
        return test_accuracy
