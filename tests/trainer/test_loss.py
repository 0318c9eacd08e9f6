"""The training objective with label smoothing, and the cost the progress lines report."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from trainer.training.loss import example_losses

# Two examples: logits whose softmax is known in closed form.
LOGITS = np.array(
    [
        [0.0] * 9 + [math.log(11.0)],  # p(9) = 11/20, every other class 1/20
        [math.log(3.0)] + [0.0] * 9,
    ],
    np.float32,
)  # p(0) = 3/12, the others 1/12
LABELS = np.array([9, 5], np.int32)


def test_without_smoothing_the_objective_is_the_cross_entropy_against_the_labels():
    objective, cost = example_losses(LABELS, LOGITS, 0.0)
    np.testing.assert_allclose(cost.numpy(), [-math.log(11 / 20), -math.log(1 / 12)], rtol=1e-6)
    np.testing.assert_allclose(objective.numpy(), cost.numpy())


@pytest.mark.parametrize("smoothing", [0.1, 0.5])
def test_smoothing_moves_that_share_of_the_target_onto_every_class_evenly(smoothing):
    objective, cost = example_losses(LABELS, LOGITS, smoothing)
    # Target (1 - s) on the label plus s / 10 on each class.
    log_p = [np.log(np.array([1 / 20] * 9 + [11 / 20])), np.log(np.array([3 / 12] + [1 / 12] * 9))]
    expected = [-(1 - smoothing) * lp[label] - smoothing / 10 * lp.sum() for lp, label in zip(log_p, LABELS)]
    np.testing.assert_allclose(objective.numpy(), expected, rtol=1e-5)
    # The reported cost stays the cross-entropy against the labels.
    np.testing.assert_allclose(cost.numpy(), [-math.log(11 / 20), -math.log(1 / 12)], rtol=1e-6)


def test_bfloat16_logits_give_float32_losses():
    objective, cost = example_losses(LABELS, tf.cast(LOGITS, tf.bfloat16), 0.1)
    assert objective.dtype == tf.float32 and cost.dtype == tf.float32
    assert cost.numpy()[0] == pytest.approx(-math.log(11 / 20), rel=0.01)  # bfloat16's 8 bits
