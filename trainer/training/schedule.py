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
        progress = tf.clip_by_value(
            (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps), 0.0, 1.0
        )
        cosine = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        return tf.where(step < self.warmup_steps, warm, cosine)

    def get_config(self) -> dict:
        return {"peak": self.peak, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


class KeepsSchedule:
    """A Keras optimizer that also keeps, as ``schedule``, the learning rate it was made with: a
    float or a ``LearningRateSchedule``. Keras keeps it only privately, and its public
    ``learning_rate`` is the rate at ``optimizer.iterations``, which the training function sets
    to the global step only at the start of each call; ``rate_at`` gives it at any step."""

    def __init__(self, learning_rate, **kwargs) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.schedule = learning_rate

    def rate_at(self, step):
        """The learning rate at 0-based global step ``step`` (an int or an int64 tensor), as a
        float32 tensor."""
        if isinstance(self.schedule, keras.optimizers.schedules.LearningRateSchedule):
            return tf.cast(self.schedule(step), tf.float32)
        return tf.constant(self.schedule, tf.float32)


class SGD(KeepsSchedule, keras.optimizers.SGD):
    """Keras' SGD (no momentum) that keeps its schedule (``KeepsSchedule``)."""


class FusedAdam(KeepsSchedule, keras.optimizers.Optimizer):
    """Adam over one variable, the packed weights (trainer/packed.py), with its update in one
    kernel (TensorFlow's ``ResourceApplyAdam``) instead of Keras' nine element-wise ops; built
    on Keras' public optimizer API (``build``, ``add_optimizer_variables``, ``update_step``).

    The same arithmetic as Keras' Adam (m and v moving averages, the bias-corrected step
    ``lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)``; 50 steps of both
    on 1,000 weights differ by at most 4e-6) and Keras' defaults for beta_1, beta_2 and
    epsilon. Why: under ParameterServerStrategy the update runs on the ps for every worker
    step, and each op there is a pass over the packed weights plus the executor's scheduling;
    one kernel is one pass.

    Attributes (once built): momentum, velocity: the first and second moment, each of the
    variable's shape.

    Raises:
        ValueError: ``build`` got other than one variable. With several, ``update_step`` would
            have to tell which one it is given, which Keras offers no public way to do (under
            ParameterServerStrategy it is given the ps's variable, not the model's).
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def build(self, var_list) -> None:
        if self.built:
            return
        if len(var_list) != 1:
            raise ValueError(
                f"FusedAdam updates one variable, the packed weights: got {len(var_list)}; "
                "use keras.optimizers.Adam for a model's own variables"
            )
        super().build(var_list)
        momentums, velocities = self.add_optimizer_variables(var_list, ["momentum", "velocity"])
        self.momentum, self.velocity = momentums[0], velocities[0]

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        local_step = tf.cast(self.iterations + 1, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self.momentum.handle,
            v=self.velocity.handle,
            beta1_power=tf.pow(beta_1, local_step),
            beta2_power=tf.pow(beta_2, local_step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
            use_locking=False,
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}


def learning_rate_schedule(args: argparse.Namespace, total_steps: int, learning_rate: float):
    """The rate of ``--lr_schedule`` for a run of ``total_steps`` steps: ``learning_rate`` (the
    global batch's: ``--learning_rate`` scaled for synchronous replicas, ``--lr_scaling``, by
    flags.scaled_learning_rate) as a float, or a ``WarmupCosine`` peaking at it."""
    if args.lr_schedule == "warmup_cosine":
        return WarmupCosine(learning_rate, total_steps, max(1, round(WARMUP_FRACTION * total_steps)))
    return learning_rate


def make_optimizer(args: argparse.Namespace, total_steps: int, learning_rate: float):
    """The optimizer of ``--optimizer`` for the packed weights, at ``learning_rate_schedule``'s
    rate peaking at ``learning_rate``, with Keras' decoupled ``weight_decay`` of
    ``--weight_decay`` (none at 0).

    warmup_cosine follows the optimizer's step count (``optimizer.iterations``), which the
    training function resets to the global step at the start of every call, so the rate
    follows the run's progress across workers and restarts.
    """
    rate = learning_rate_schedule(args, total_steps, learning_rate)
    # None rather than 0: Keras then adds no decay step at all, so --weight_decay 0 trains
    # exactly as an optimizer without one.
    decay = args.weight_decay or None
    if args.optimizer == "sgd":
        return SGD(learning_rate=rate, weight_decay=decay)
    return FusedAdam(learning_rate=rate, weight_decay=decay)


def learning_rate_at(optimizer: KeepsSchedule, step: int) -> float:
    """The learning rate ``optimizer`` (``make_optimizer``'s) uses at global step ``step``: a
    constant rate exactly as given."""
    if isinstance(optimizer.schedule, keras.optimizers.schedules.LearningRateSchedule):
        return float(optimizer.schedule(step))
    return float(optimizer.schedule)
