"""The optimizer's update rule applied to a task's own copy of the packed weights, for
``--local_steps`` > 1 (trainer.training.steps): the same arithmetic as the run's Keras
optimizer (trainer.training.schedule.make_optimizer), on tensors that stay in the task
instead of on the variables, which may live on a ps.

Adam, as Keras and TensorFlow's ``ApplyAdam`` define it (Kingma & Ba 2015, "Adam: A Method
for Stochastic Optimization", the bias correction folded into the step size):

    m <- beta_1 m + (1 - beta_1) g          v <- beta_2 v + (1 - beta_2) g^2
    w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

with t the 1-based step. SGD: ``w <- w - lr g``. With a weight decay d (``--weight_decay``),
each step first takes ``w <- w - lr d w``, as Keras' optimizers do (Loshchilov & Hutter 2019).
"""

from __future__ import annotations

import tensorflow as tf

from trainer.training.schedule import FusedAdam


def slot_variables(optimizer) -> list:
    """The optimizer's per-weight state of the packed vector, in the order ``apply`` takes
    it: Adam's [first moment m, second moment v]; SGD none. Each has the weights' shape
    (n,) and lives where the weights do (on the ps with ParameterServerStrategy)."""
    if isinstance(optimizer, FusedAdam):
        return [optimizer.momentum, optimizer.velocity]
    return []


def slot_decays(optimizer) -> list[tuple[float, bool]]:
    """Each slot's (moving-average decay, whether it averages squares), in
    ``slot_variables``' order: Adam's (beta_1, False) and (beta_2, True); see ``merge_slot``."""
    if isinstance(optimizer, FusedAdam):
        return [(float(optimizer.beta_1), False), (float(optimizer.beta_2), True)]
    return []


def merge_slot(shared, local, start, decay: float, squares: bool, steps):
    """A moving average that another task may have advanced meanwhile, after this task's
    ``steps`` updates of it: ``shared`` (its value now), ``start`` (what this task read),
    ``local`` (this task's value after its steps), all (n,); ``squares``: an average of
    squares; ``steps``: k, an int32 scalar.

    After k updates ``local = decay^k start + c``, where c holds this task's k gradients.
    Applying them to the shared value instead gives ``decay^k shared + c``: exactly the
    average that the two tasks' steps one after the other would give, so the moments stay
    consistent with the global step Adam's bias correction counts. Clipped at 0 where the
    average is of squares (decay beta_2), against rounding below 0 under a square root.
    """
    kept = tf.pow(tf.constant(decay, tf.float32), tf.cast(steps, tf.float32))
    merged = kept * shared + (local - kept * start)
    return tf.maximum(merged, 0.0) if squares else merged


def apply(optimizer, weights, slots: list, gradient, learning_rate, step):
    """One step of ``optimizer``'s rule on local tensors.

    Args:
        optimizer: the run's Keras optimizer (Adam or SGD), for its constants.
        weights: float32 (n,), the packed weights before the step.
        slots: what ``slot_variables`` lists, as float32 (n,) tensors.
        gradient: float32 (n,), the loss' gradient at ``weights``.
        learning_rate: float32 scalar, the rate of this step.
        step: int64 scalar, the 0-based global step (Adam's bias correction uses step + 1).

    Returns:
        (new weights, new slots), the same shapes.
    """
    if optimizer.weight_decay is not None:  # Keras' order: the decay, then the update
        weights = weights - learning_rate * tf.cast(optimizer.weight_decay, tf.float32) * weights
    if not slots:
        return weights - learning_rate * gradient, []
    m, v = slots
    beta_1 = tf.constant(optimizer.beta_1, tf.float32)
    beta_2 = tf.constant(optimizer.beta_2, tf.float32)
    t = tf.cast(step + 1, tf.float32)
    m = beta_1 * m + (1.0 - beta_1) * gradient
    v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    alpha = learning_rate * tf.sqrt(1.0 - tf.pow(beta_2, t)) / (1.0 - tf.pow(beta_1, t))
    return weights - alpha * m / (tf.sqrt(v) + optimizer.epsilon), [m, v]
