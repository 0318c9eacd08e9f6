"""The optimizer and its learning rate: ``--optimizer``, ``--lr_schedule`` (a constant rate,
or a warm-up then a cosine decay) and the rate at a given step."""

from __future__ import annotations

import argparse
import math

import keras
import tensorflow as tf

#: warmup_cosine: the share of the run's steps spent warming up from a tenth of the peak rate.
WARMUP_FRACTION = 0.15


class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from peak/10 to ``peak`` over ``warmup_steps``, then half a cosine
    down to 0 at ``total_steps`` (and 0 after)."""

    def __init__(self, peak: float, total_steps: int, warmup_steps: int) -> None:
        self.peak, self.total_steps, self.warmup_steps = peak, total_steps, warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warm = self.peak * (0.1 + 0.9 * step / self.warmup_steps)
        progress = tf.clip_by_value((step - self.warmup_steps)
                                    / max(1, self.total_steps - self.warmup_steps), 0.0, 1.0)
        cosine = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        return tf.where(step < self.warmup_steps, warm, cosine)

    def get_config(self) -> dict:
        return {"peak": self.peak, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps}


def make_optimizer(args: argparse.Namespace, total_steps: int):
    """The optimizer of ``--optimizer`` with ``args.learning_rate`` (``--learning_rate``,
    scaled by ``run`` for synchronous replicas: ``--lr_scaling``) under ``--lr_schedule``.

    warmup_cosine follows the optimizer's step count (``optimizer.iterations``), which the
    training function resets to the global step at the start of every call, so the rate
    follows the run's progress across workers and restarts.
    """
    rate = args.learning_rate
    if args.lr_schedule == "warmup_cosine":
        rate = WarmupCosine(args.learning_rate, total_steps,
                            max(1, round(WARMUP_FRACTION * total_steps)))
    if args.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=rate)
    return keras.optimizers.Adam(learning_rate=rate)


def learning_rate_at(optimizer, args: argparse.Namespace, step: int) -> float:
    """The learning rate the optimizer uses at global step ``step``."""
    if args.lr_schedule == "constant":
        return float(args.learning_rate)
    # Keras keeps the schedule there; optimizer.learning_rate would read optimizer.iterations,
    # which the training function sets to the global step only at the start of each call.
    return float(optimizer._learning_rate(step))
