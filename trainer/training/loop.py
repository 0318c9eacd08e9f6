"""The training loop: steps in calls of ``--steps_per_execution`` (with ParameterServerStrategy
scheduled on the workers), a Step line every ``--log_interval`` batches, and after every
epoch a checkpoint, then the chief's evaluation, TensorBoard scalars and Epoch line; on
SIGTERM, a checkpoint where the loop stands."""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from trainer import data as data_mod
from trainer.contract import progress
from trainer.contract.cluster_spec import PARAMETER_SERVER
from trainer.packed import PackedWeights
from trainer.training.checkpoints import TrainState
from trainer.training.distribution import Distribution
from trainer.training.evaluation import evaluate_with_cost
from trainer.training.liveness import SigtermFlag, Watchdog, peer_lost
from trainer.training.schedule import learning_rate_at


@dataclass
class Outcome:
    """How the loop ended.

    Attributes:
        sigterm: stopped by SIGTERM, after saving a checkpoint; the rest is then partial.
        train_time_s: wall time of the epochs this process trained, seconds.
        examples: training examples of those epochs.
        last_cost: the last epoch's mean training cost (cross-entropy, nats).
        test_accuracy: the chief's evaluation after the last epoch (a fraction); None on
            other tasks.
    """

    sigterm: bool = False
    train_time_s: float = 0.0
    examples: int = 0
    last_cost: float = math.nan
    test_accuracy: float | None = None


class TrainingLoop:
    """Trains ``state``'s packed weights on ``dataset`` under ``dist``, from a resume point to
    ``--epochs``; the chief also evaluates ``model`` (its local copy, filled by ``packing``)
    and writes the run's TensorBoard events.

    Everything the training functions use is an attribute, so that keeping the loop keeps
    them (trainer.training.finish).
    """

    def __init__(self, args: argparse.Namespace, dist: Distribution, state: TrainState,
                 packing: PackedWeights, model, dataset: data_mod.Dataset,
                 steps_per_epoch: int, watchdog: Watchdog) -> None:
        self.args, self.dist, self.state, self.packing = args, dist, state, packing
        self.model, self.dataset, self.watchdog = model, dataset, watchdog
        self.is_chief = state.is_chief
        self.global_batch = args.batch_size * dist.replicas
        self.steps_per_epoch = steps_per_epoch
        self.dataset_fn = self._dataset_fn()
        self.train_steps = self._train_steps_fn()
        self.iterator = self._iterator()
        self.sigterm = SigtermFlag()
        watchdog.kick()
        self.writer = tf.summary.create_file_writer(
            str(Path(args.log_dir) / progress.TENSORBOARD_SUBDIR)) if self.is_chief else None
        #: The current epoch's chunks: (steps, a function giving (mean loss, correct)).
        self.pending: list[tuple[int, Callable[[], tuple[float, float]]]] = []

    def _dataset_fn(self):
        args = self.args
        if self.dist.kind == PARAMETER_SERVER:
            dataset_fn = data_mod.make_dataset_fn(self.dataset, args.batch_size, seed=None,
                                                  augment_shift=args.augment_shift)
            # Every worker shuffles with its own seed (see make_dataset_fn).
            tf.random.set_seed(None)
            return dataset_fn
        return data_mod.make_dataset_fn(self.dataset, args.batch_size, seed=args.seed,
                                        augment_shift=args.augment_shift)

    def _train_steps_fn(self):
        """The tf.function ``train_steps(iterator, num_steps)``: num_steps steps; returns
        (mean loss per step, correct predictions)."""
        strategy, packing, global_batch = self.dist.strategy, self.packing, self.global_batch
        weights, optimizer = self.state.weights, self.state.optimizer
        global_step = self.state.global_step
        scheduled = self.args.lr_schedule != "constant"

        def step_fn(images, labels):
            with tf.GradientTape() as tape:
                logits = packing.logits(weights, images, training=True)
                per_example = keras.losses.sparse_categorical_crossentropy(
                    labels, logits, from_logits=True)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, [weights])
            optimizer.apply_gradients(zip(grads, [weights]))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32),
                                                     labels), tf.float32))
            return loss, correct

        @tf.function
        def train_steps(iterator, num_steps):
            if scheduled:  # see make_optimizer
                optimizer.iterations.assign(global_step)
            total_loss = tf.constant(0.0)
            total_correct = tf.constant(0.0)
            for _ in tf.range(num_steps):
                images, labels = next(iterator)
                loss, correct = strategy.run(step_fn, args=(images, labels))
                total_loss += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
                total_correct += strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None)
            global_step.assign_add(tf.cast(num_steps, tf.int64))
            return total_loss / tf.cast(num_steps, tf.float32), total_correct

        return train_steps

    def _iterator(self):
        strategy, dataset_fn = self.dist.strategy, self.dataset_fn
        if self.dist.coordinator is None:
            return iter(strategy.distribute_datasets_from_function(dataset_fn))

        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        self.per_worker_dataset_fn = per_worker_dataset_fn
        return iter(self.dist.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def run(self, done_epochs: int, done_batches: int) -> Outcome:
        """Train from batch ``done_batches`` of epoch ``done_epochs`` (both counted from 0)
        to the end of ``--epochs``, or until SIGTERM.

        Raises:
            PeerLost: TensorFlow failed to reach a ps or peer.
        """
        outcome = Outcome()
        try:
            for epoch in range(done_epochs, self.args.epochs):
                batch = done_batches if epoch == done_epochs else 0
                epoch_start = time.perf_counter()
                if not self._train_epoch(epoch, batch, epoch_start):
                    outcome.sigterm = True
                    return outcome
                self._join()
                self._end_epoch(epoch, time.perf_counter() - epoch_start, outcome)
        except tf.errors.OpError as err:
            raise peer_lost(err, self.dist.kind) from None
        return outcome

    def _run_chunk(self, num_steps: int) -> Callable[[], tuple[float, float]]:
        """Run num_steps steps; returns a function that gives their (mean loss, correct)."""
        k = tf.constant(num_steps, tf.int32)
        if self.dist.coordinator is not None:
            remote = self.dist.coordinator.schedule(self.train_steps, args=(self.iterator, k))
            return lambda: tuple(float(v) for v in remote.fetch())
        loss, correct = self.train_steps(self.iterator, k)
        return lambda: (float(loss), float(correct))

    def _join(self) -> None:
        if self.dist.coordinator is not None:
            self.dist.coordinator.join()

    def _train_epoch(self, epoch: int, batch: int, epoch_start: float) -> bool:
        """Train epoch ``epoch`` from ``batch`` on, its chunks into ``pending``; return False
        when SIGTERM stopped it (a checkpoint is then saved)."""
        args, steps = self.args, self.steps_per_epoch
        interval_start, interval_batches = epoch_start, 0
        self.pending = []
        while batch < steps:
            k = min(args.steps_per_execution, steps - batch,
                    args.log_interval - batch % args.log_interval)
            value = self._run_chunk(k)
            self.pending.append((k, value))
            batch += k
            interval_batches += k
            if batch % args.log_interval == 0 or batch == steps:
                loss, _ = value()  # waits for this chunk only
                self.watchdog.kick()
                if self.is_chief and batch % args.log_interval == 0:
                    now = time.perf_counter()
                    self._step_line(epoch, batch, loss, now - interval_start, interval_batches)
                    interval_start, interval_batches = now, 0
            if self.sigterm.requested:
                self._join()
                path = self.state.save(epoch, batch)
                if self.is_chief:
                    print(f"SIGTERM: saved checkpoint {path} at epoch {epoch + 1}, batch "
                          f"{batch}; exiting", flush=True)
                return False
        return True

    def _step_line(self, epoch: int, batch: int, loss: float, seconds: float,
                   batches: int) -> None:
        """The chief's Step line and batch cost scalar, ``batches`` batches after the last."""
        avg_ms = 1000 * seconds / max(batches, 1)
        step = int(self.state.global_step.numpy())
        print(progress.step_line(step, epoch + 1, batch, self.steps_per_epoch, loss, avg_ms),
              flush=True)
        with self.writer.as_default(step=step):
            write_scalar(progress.TAG_BATCH_COST, loss)

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
            outcome.test_accuracy = self._report_epoch(epoch, epoch_time, path, {
                "train_cost": outcome.last_cost, "train_accuracy": train_accuracy,
                "examples_per_s": epoch_steps * self.global_batch / epoch_time})

    def _report_epoch(self, epoch: int, epoch_time: float, path: str, values: dict) -> float:
        """Evaluate, write the epoch's scalars and print its Epoch line; return the test
        accuracy. ``values``: the epoch's train_cost, train_accuracy and examples_per_s."""
        self.packing.copy_to_model(self.state.weights)
        test_accuracy, test_cost = evaluate_with_cost(self.model, self.dataset)
        # Per-epoch series at step = epoch (1-based): a restarted chief resumes at an
        # epoch boundary, so no two processes write the same epoch.
        epoch_values = {
            "train_cost": values["train_cost"], "train_accuracy": values["train_accuracy"],
            "test_cost": test_cost, "test_accuracy": test_accuracy,
            "learning_rate": learning_rate_at(self.state.optimizer, self.args,
                                              int(self.state.global_step.numpy())),
            "examples_per_s": values["examples_per_s"]}
        with self.writer.as_default(step=epoch + 1):
            for key, value in epoch_values.items():
                write_scalar(progress.EPOCH_TAGS[key], value)
        self.writer.flush()
        print(progress.epoch_line(epoch + 1, self.args.epochs, epoch_values, epoch_time, path),
              flush=True)
        return test_accuracy


def write_scalar(name: str, value: float) -> None:
    """Write a TensorBoard scalar with core TensorFlow only.

    tf.summary.scalar needs the tensorboard package, which tensorflow 2.21 no longer
    installs; this writes the same event (a float32 tensor tagged for the "scalars" plugin),
    so the trainer image does not need TensorBoard.
    """
    metadata = summary_pb2.SummaryMetadata(
        summary_description=progress.TAG_DESCRIPTIONS.get(name, ""),
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata)
