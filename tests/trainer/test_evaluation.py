"""trainer.training.evaluation: the chief's test-set evaluation, and its preparation ahead of
the first epoch's end."""

from __future__ import annotations

import numpy as np

from trainer import data as data_mod
from trainer.flags import BUNDLED_DATA_DIR
from trainer.model import build_model
from trainer.training import evaluation


def _test_set(n: int = 1500) -> data_mod.Dataset:
    """The shipped sample's first n test digits (more than one EVAL_BATCH)."""
    full = data_mod.load(str(BUNDLED_DATA_DIR))
    return data_mod.Dataset(
        x_train=full.x_train[:10],
        y_train=full.y_train[:10],
        x_test=full.x_test[:n],
        y_test=full.y_test[:n],
        data_dir=full.data_dir,
        fmt=full.fmt,
    )


def test_prepared_evaluation_is_traced_once_and_gives_the_same_results():
    dataset = _test_set()
    prepared = build_model("convnet_fc_slim", 0.1)
    plain = build_model("convnet_fc_slim", 0.1)
    plain.set_weights(prepared.get_weights())

    evaluation.prepare_evaluation(prepared, dataset)
    assert evaluation._predict_fn(prepared).experimental_get_tracing_count() == 1
    accuracy, cost = evaluation.evaluate_with_cost(prepared, dataset)
    # The evaluation reused the preparation's trace (a 500-example last batch included).
    assert evaluation._predict_fn(prepared).experimental_get_tracing_count() == 1

    assert (accuracy, cost) == evaluation.evaluate_with_cost(plain, dataset)
    # Untrained: about chance, and the cost about ln(10).
    assert 0.0 <= accuracy <= 0.3
    assert abs(cost - np.log(10)) < 0.5
