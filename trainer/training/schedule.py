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


class FusedAdam(keras.optimizers.Adam):
    """Keras' Adam with each variable's update in one kernel (TensorFlow's
    ``ResourceApplyAdam``) instead of Keras' nine element-wise ops.

    The same arithmetic as Keras' Adam (m and v moving averages, the bias-corrected step
    ``lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)``; 50 steps of both
    on 1,000 weights differ by at most 4e-6) and the same state variables, so checkpoints are
    interchangeable. Why: under ParameterServerStrategy the update runs on the ps for every
    worker step, and each op there is a pass over the packed weights plus the executor's
    scheduling; one kernel is one pass.
    """

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        local_step = tf.cast(self.iterations + 1, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].handle,
            v=self._velocities[index].handle, beta1_power=tf.pow(beta_1, local_step),
            beta2_power=tf.pow(beta_2, local_step), lr=tf.cast(learning_rate, dtype),
            beta1=beta_1, beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype), use_locking=False)


def make_optimizer(args: argparse.Namespace, total_steps: int):
    """The optimizer of ``--optimizer`` with ``args.learning_rate`` (``--learning_rate``,
    scaled by ``run`` for synchronous replicas: ``--lr_scaling``) under ``--lr_schedule``,
    with Keras' decoupled ``weight_decay`` of ``--weight_decay`` (none at 0).

    warmup_cosine follows the optimizer's step count (``optimizer.iterations``), which the
    training function resets to the global step at the start of every call, so the rate
    follows the run's progress across workers and restarts.
    """
    rate = args.learning_rate
    if args.lr_schedule == "warmup_cosine":
        rate = WarmupCosine(args.learning_rate, total_steps,
                            max(1, round(WARMUP_FRACTION * total_steps)))
    # None rather than 0: Keras then adds no decay step at all, so --weight_decay 0 trains
    # exactly as an optimizer without one.
    decay = args.weight_decay or None
    if args.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=rate, weight_decay=decay)
    return FusedAdam(learning_rate=rate, weight_decay=decay)


def learning_rate_at(optimizer, args: argparse.Namespace, step: int) -> float:
    """The learning rate the optimizer uses at global step ``step``."""
    if args.lr_schedule == "constant":
        return float(args.learning_rate)
    # Keras keeps the schedule there; optimizer.learning_rate would read optimizer.iterations,
    # which the training function sets to the global step only at the start of each call.
    return float(optimizer._learning_rate(step))
