"""Training steps on the cluster: a tf.function of ``--steps_per_execution`` steps over the
distributed dataset, scheduled on a worker with ParameterServerStrategy or run in this
process (the chief, or with ps 0 every task, synchronously)."""

from __future__ import annotations

import argparse
from typing import Callable

import keras
import tensorflow as tf

from trainer import data as data_mod
from trainer.contract.cluster_spec import PARAMETER_SERVER
from trainer.packed import PackedWeights
from trainer.training.checkpoints import TrainState
from trainer.training.distribution import Distribution


class StepRunner:
    """Runs steps that update ``state``'s packed weights on batches of ``dataset`` under
    ``dist``: ``run(k)`` starts k steps, ``join()`` waits for every step started.

    The dataset function, the per-worker dataset and the traced function are attributes, so
    that keeping the runner keeps them (trainer.training.finish).
    """

    def __init__(self, args: argparse.Namespace, dist: Distribution, state: TrainState,
                 packing: PackedWeights, dataset: data_mod.Dataset) -> None:
        self.args, self.dist, self.state, self.packing = args, dist, state, packing
        self.dataset = dataset
        self.global_batch = dist.global_batch(args.batch_size)
        self.dataset_fn = self._dataset_fn()
        self.train_steps = self._train_steps_fn()
        self.iterator = self._iterator()

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

    def run(self, num_steps: int) -> Callable[[], tuple[float, float]]:
        """Start ``num_steps`` steps; return a function that gives their (mean loss,
        correct predictions), waiting for them."""
        k = tf.constant(num_steps, tf.int32)
        if self.dist.coordinator is not None:
            remote = self.dist.coordinator.schedule(self.train_steps, args=(self.iterator, k))
            return lambda: tuple(float(v) for v in remote.fetch())
        loss, correct = self.train_steps(self.iterator, k)
        return lambda: (float(loss), float(correct))

    def join(self) -> None:
        """Wait until every step started has run (with a coordinator; else they have)."""
        if self.dist.coordinator is not None:
            self.dist.coordinator.join()
