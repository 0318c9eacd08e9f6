"""The training objective (cross-entropy against labels smoothed by ``--label_smoothing``) and
the cost the progress lines report (cross-entropy against the labels themselves)."""

from __future__ import annotations

import keras
import tensorflow as tf

from trainer.data import NUM_CLASSES


def example_losses(labels, logits, label_smoothing: float):
    """Per-example (objective, cost), both float32 (batch,) in nats, for int32 ``labels``
    (batch,) and ``logits`` (batch, 10) of any float dtype.

    objective: the cross-entropy against the labels smoothed by ``label_smoothing`` (the
    one-hot target times 1 - label_smoothing plus label_smoothing / 10 on every class;
    Szegedy et al. 2016, "Rethinking the Inception Architecture for Computer Vision",
    section 7), what the steps minimise; with 0 it is the cost itself.
    cost: the cross-entropy against the labels, what the Step and Epoch lines report, so
    that training and test cost stay comparable whatever the smoothing.

    The logits are cast to float32 first: under mixed_bfloat16 they are bfloat16, and Keras'
    mixed-precision guide computes the loss in float32.
    """
    logits = tf.cast(logits, tf.float32)
    cost = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    if not label_smoothing:
        return cost, cost
    objective = keras.losses.categorical_crossentropy(
        tf.one_hot(labels, NUM_CLASSES), logits, from_logits=True, label_smoothing=label_smoothing
    )
    return objective, cost
