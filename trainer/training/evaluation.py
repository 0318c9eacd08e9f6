"""Test accuracy and cost of the chief's evaluation copy of the model, on the whole test set,
run locally (not on the cluster)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from trainer import data as data_mod

EVAL_BATCH = 1000

_predict_fns: dict[int, object] = {}


def evaluate(model, dataset: data_mod.Dataset) -> float:
    """Test accuracy (fraction correct) of ``model`` on the whole test set, run locally."""
    return evaluate_with_cost(model, dataset)[0]


def evaluate_with_cost(model, dataset: data_mod.Dataset) -> tuple[float, float]:
    """(test accuracy as a fraction correct, test cost as mean cross-entropy in nats) of
    ``model`` on the whole test set, run locally (one traced function per model: eager calls
    cost the chief about twice the time)."""
    predict = _predict_fn(model)
    correct, cost = 0, 0.0
    for start in range(0, len(dataset.x_test), EVAL_BATCH):
        x, y = _test_batch(dataset, start)
        predicted, cost_sum = predict(x, y.astype(np.int32))
        correct += int(np.sum(predicted.numpy() == y))
        cost += float(cost_sum)
    return correct / len(dataset.x_test), cost / len(dataset.x_test)


def prepare_evaluation(model, dataset: data_mod.Dataset) -> None:
    """Trace ``model``'s evaluation function and run it once, on the test set's first
    EVAL_BATCH examples, so that its first ``evaluate_with_cost`` only computes.

    The first evaluation otherwise costs more than the others: the tracing and the runtime's
    first run of the function (docs/benchmarks.md has the figures). The caller picks a
    moment when that time is not waited for.
    """
    x, y = _test_batch(dataset, 0)
    _predict_fn(model)(x, y.astype(np.int32))


def _test_batch(dataset: data_mod.Dataset, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Test images float32 (n, 28, 28, 1) in [0, 1] and labels uint8 (n,) from ``start``,
    n <= EVAL_BATCH."""
    x = dataset.x_test[start : start + EVAL_BATCH].astype(np.float32)[..., None] / 255.0
    return x, dataset.y_test[start : start + EVAL_BATCH]


def _predict_fn(model):
    """``model``'s traced evaluation function (made on first use, then kept): images float32
    (n, 28, 28, 1) and labels int32 (n,) -> (predicted classes int32 (n,), summed
    cross-entropy)."""
    predict = _predict_fns.get(id(model))
    if predict is None:

        def predict_fn(x, y):
            logits = model(x, training=False)
            costs = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
            return tf.argmax(logits, 1, output_type=tf.int32), tf.reduce_sum(costs)

        predict = _predict_fns[id(model)] = tf.function(
            predict_fn,
            input_signature=[
                tf.TensorSpec((None, *model.input_shape[1:]), tf.float32),
                tf.TensorSpec((None,), tf.int32),
            ],
            reduce_retracing=True,
        )
    return predict
