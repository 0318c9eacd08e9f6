"""``--local_steps``: real TensorFlow tasks through the local launcher on the shipped
mnist-10k sample, exchanging every 10 steps (with a ps, and with ps 0), and the update rule
of trainer/training/local_update.py against Keras' own Adam."""

from __future__ import annotations

import argparse
import math
import re

import numpy as np
import pytest
from test_distributed import TASKS_PS0, TASKS_PS1, _assert_clean_run, launch

from trainer.contract import recipe

LOCAL = ["--local_steps", "10"]


@pytest.mark.slow
@pytest.mark.parametrize("ps,tasks", [("1", TASKS_PS1), ("0", TASKS_PS0)])
def test_a_run_exchanging_every_10_steps_trains_and_ends_cleanly(tmp_path, ps, tasks):
    run = launch(tmp_path, "--workers", "2", "--ps", ps, *LOCAL)
    parsed = _assert_clean_run(run, tasks)
    assert "exchanging every 10 steps" in run.chief_log
    # 4 epochs of the 8,000-digit sample, one run: with ps 1 seeds 1-4 reached 0.9805-0.9845
    # in float32 and 0.9795-0.9820 in bfloat16 (AMD EPYC, 2026-12-05); 0.95 is 0.03 under.
    assert parsed.test_accuracy >= 0.95, run.chief_log[-2000:]


@pytest.mark.slow
def test_a_worker_killed_between_exchanges_loses_only_its_round(tmp_path):
    run = launch(
        tmp_path,
        "--workers",
        "2",
        "--ps",
        "1",
        *LOCAL,
        kills=[(r"\[chief-0\] Step: \d+,  Epoch: 2,  Batch: 40 ", "worker-0")],
    )
    parsed = _assert_clean_run(run, TASKS_PS1)
    assert len(run.pids["worker-0"]) == 2, run.output[-3000:]  # restarted once
    assert parsed.test_accuracy >= 0.95, run.chief_log[-2000:]


def _optimizer(name: str, schedule: str = "constant", weight_decay: float = 0.0):
    from trainer.training.schedule import make_optimizer

    return make_optimizer(
        argparse.Namespace(
            **(recipe.defaults() | dict(optimizer=name, lr_schedule=schedule, weight_decay=weight_decay))
        ),
        100,
        0.01,
    )


def test_a_weight_decay_of_0_is_none():
    # Keras then adds no decay step: the default trains exactly as before the flag existed.
    assert _optimizer("adam").weight_decay is None and _optimizer("sgd", weight_decay=0.5).weight_decay == 0.5


@pytest.mark.parametrize("decay", [0.0, 4.0])
@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_three_local_steps_match_the_keras_optimizer(name, decay):
    import keras
    import tensorflow as tf

    from trainer.training import local_update

    rng = np.random.default_rng(0)
    start = rng.normal(size=50).astype(np.float32)
    gradients = [rng.normal(size=50).astype(np.float32) for _ in range(3)]
    variable = keras.Variable(start)
    keras_optimizer = _optimizer(name, weight_decay=decay)
    keras_optimizer.build([variable])
    for gradient in gradients:
        keras_optimizer.apply_gradients([(tf.constant(gradient), variable)])
    optimizer = _optimizer(name, weight_decay=decay)
    optimizer.build([keras.Variable(start)])
    weights = tf.constant(start)
    slots = [tf.identity(v.value) for v in local_update.slot_variables(optimizer)]
    assert len(slots) == (2 if name == "adam" else 0)
    for step, gradient in enumerate(gradients):
        rate = optimizer.rate_at(tf.constant(step, tf.int64))
        weights, slots = local_update.apply(
            optimizer, weights, slots, tf.constant(gradient), rate, tf.constant(step, tf.int64)
        )
    np.testing.assert_allclose(weights.numpy(), variable.numpy(), rtol=0, atol=2e-6)
    assert np.abs(weights.numpy() - start).max() > 0.01  # the steps moved the weights


def test_the_scheduled_rate_is_the_schedules_at_the_global_step():
    import tensorflow as tf

    from trainer.training.schedule import learning_rate_at

    # Peak 0.01 over 100 steps: a warm-up from 0.001 over round(0.15 * 100) = 15 steps, then
    # half a cosine over the other 85.
    optimizer = _optimizer("adam", "warmup_cosine")
    expected = {
        0: 0.001,
        7: 0.001 + 0.009 * 7 / 15,
        15: 0.01,
        60: 0.005 * (1 + math.cos(math.pi * 45 / 85)),
        99: 0.005 * (1 + math.cos(math.pi * 84 / 85)),
    }
    for step, rate in expected.items():
        assert float(optimizer.rate_at(tf.constant(step, tf.int64))) == pytest.approx(
            rate, rel=1e-6, abs=1e-9
        )
        assert learning_rate_at(optimizer, step) == pytest.approx(rate, rel=1e-6, abs=1e-9)
    assert learning_rate_at(_optimizer("sgd"), 50) == 0.01  # a constant rate as given


def test_fused_adam_steps_as_keras_adam():
    import keras
    import tensorflow as tf

    from trainer.training.schedule import FusedAdam

    rng = np.random.default_rng(1)
    start = rng.normal(size=1000).astype(np.float32)
    fused, plain = keras.Variable(start), keras.Variable(start)
    ours, theirs = FusedAdam(learning_rate=0.01), keras.optimizers.Adam(learning_rate=0.01)
    ours.build([fused])
    theirs.build([plain])
    for _ in range(50):
        gradient = tf.constant(rng.normal(size=1000).astype(np.float32))
        ours.apply_gradients([(gradient, fused)])
        theirs.apply_gradients([(gradient, plain)])
    np.testing.assert_allclose(fused.numpy(), plain.numpy(), rtol=0, atol=4e-6)
    assert np.abs(fused.numpy() - start).max() > 0.1  # the steps moved the weights
    assert [v.shape for v in ours.variables] == [v.shape for v in theirs.variables]


def test_fused_adam_refuses_more_than_one_variable():
    import keras

    from trainer.training.schedule import FusedAdam

    with pytest.raises(ValueError, match="FusedAdam updates one variable, the packed weights: got 2"):
        FusedAdam().build([keras.Variable(np.zeros(3, np.float32)), keras.Variable(np.zeros(2, np.float32))])


def _moving_average(value, samples, decay):
    for sample in samples:
        value = decay * value + (1 - decay) * sample
    return value


@pytest.mark.parametrize("decay,squares", [(0.9, False), (0.999, True)])
def test_two_tasks_merged_rounds_are_the_moving_average_of_all_their_steps(decay, squares):
    import tensorflow as tf

    from trainer.training import local_update

    rng = np.random.default_rng(1)
    start = rng.random(20).astype(np.float32)
    a, b = (rng.random((5, 20)).astype(np.float32) for _ in range(2))
    # Both tasks read ``start``; A gives its 5 steps back first, then B.
    shared = start
    for samples in (a, b):
        local = _moving_average(start, samples, decay)
        shared = local_update.merge_slot(
            tf.constant(shared), tf.constant(local), tf.constant(start), decay, squares, tf.constant(5)
        ).numpy()
    np.testing.assert_allclose(
        shared, _moving_average(start, np.concatenate([a, b]), decay), rtol=1e-5, atol=1e-6
    )


def test_a_merged_average_of_squares_never_goes_below_zero():
    import tensorflow as tf

    from trainer.training import local_update

    # Rounding can leave this task's contribution a hair below zero where the gradients
    # were 0; the square root of Adam's step would then give nan.
    merged = local_update.merge_slot(
        tf.constant([0.0]), tf.constant([1e-12]), tf.constant([1.2e-12]), 0.999, True, tf.constant(1)
    )
    assert merged.numpy().tolist() == [0.0]
    unclipped = local_update.merge_slot(
        tf.constant([0.0]), tf.constant([1e-12]), tf.constant([1.2e-12]), 0.9, False, tf.constant(1)
    )
    assert unclipped.numpy()[0] < 0


def test_local_steps_above_steps_per_execution_is_a_flag_error():
    from trainer import flags

    with pytest.raises(
        flags.FlagError,
        match=re.escape("--local_steps 60 is invalid: must be at most --steps_per_execution (50)"),
    ):
        flags.validate(flags.build_parser().parse_args(["--local_steps", "60"]))
    with pytest.raises(flags.FlagError, match="--local_steps 0 is invalid: must be an integer >= 1"):
        flags.validate(flags.build_parser().parse_args(["--local_steps", "0"]))


def test_with_ps_0_the_rounds_begin_at_the_first_step(tmp_path):
    """StepRunner in this process over a one-replica MirroredStrategy (the synchronous
    path's all-reduce; real peers are the launcher tests' above): with ps 0 there is no
    every-step warm-up, so the first steps already run in rounds, which leave Keras'
    optimizer's iterations alone and move the weights; ``prepare`` builds the rounds'
    function alone. (With a ps the warm-up exchanges every step: the next test.)"""
    runner, state = _mirrored_runner(tmp_path, local_steps="5")
    assert runner.local and runner.local_from == 0

    before = state.weights.numpy().copy()
    runner.prepare(0)  # builds the rounds' function only, and takes no step
    assert runner.local_steps.experimental_get_tracing_count() == 1
    assert int(state.global_step.numpy()) == 0
    assert np.array_equal(state.weights.numpy(), before)
    loss, _ = runner.run(10, at_step=0)()
    assert int(state.optimizer.iterations.numpy()) == 0  # not Keras' apply_gradients
    assert int(state.global_step.numpy()) == 10
    assert np.abs(state.weights.numpy() - before).max() > 1e-4
    assert 0 < loss < 3
    assert runner.every_step.experimental_get_tracing_count() == 0
    assert runner.local_steps.experimental_get_tracing_count() == 1


def test_with_a_coordinator_prepare_builds_the_warm_up_function_and_changes_nothing(tmp_path):
    """A real ParameterServerStrategy (2 workers and 1 ps as in-process gRPC servers, in a
    child process: tests/trainer/ps_rounds_probe.py): ``prepare(0)`` traces the every-step
    function and has the workers run it for 0 steps, which moves no weight and counts no
    step; the warm-up reuses that trace, and the rounds' function is traced once, at the
    first round."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    probe = Path(__file__).with_name("ps_rounds_probe.py")
    proc = subprocess.run(
        [sys.executable, str(probe), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["local_from"] == 15
    # Only the warm-up's function: each worker builds the rounds' at its first round.
    assert seen["every_step_traced_by_prepare"] == 1
    assert seen["rounds_traced_by_prepare"] == 0
    assert seen["global_step_after_prepare"] == 0 == seen["optimizer_steps_after_prepare"]
    assert seen["weights_moved_by_prepare"] == 0.0
    # The warm-up's 10 steps are all Keras' optimizer's; then 10 steps in rounds.
    assert seen["global_step_after_warm_up"] == 10 == seen["optimizer_steps_after_warm_up"]
    assert seen["every_step_traced_after_steps"] == 1 == seen["rounds_traced_after_steps"]
    assert seen["global_step_after_rounds"] == 20
    assert seen["weights_moved_by_rounds"] > 1e-4


@pytest.mark.parametrize("local_steps", ["1", "5"])
def test_the_step_functions_are_traced_without_autograph(tmp_path, local_steps):
    """Tracing and running either step function (every step: --local_steps 1; rounds: 5,
    over a one-replica MirroredStrategy) writes no AutoGraph module: their loops are
    tf.while_loop calls, so AutoGraph's source rewriting (most of their tracing time) never
    runs."""
    import sys

    from trainer.autograph_files import AUTOGRAPH_PREFIX

    runner, state = _mirrored_runner(tmp_path, local_steps)
    function = runner.local_steps if runner.local else runner.every_step

    def autograph_modules() -> set[str]:
        return {name for name in sys.modules if name.startswith(AUTOGRAPH_PREFIX)}

    before = autograph_modules()
    loss, _ = runner.run(10, at_step=0)()
    assert function.experimental_get_tracing_count() == 1
    assert autograph_modules() == before
    assert 0 < loss < 3 and int(state.global_step.numpy()) == 10


def _mirrored_runner(tmp_path, local_steps: str):
    """A StepRunner in this process over a one-replica MirroredStrategy (the synchronous
    path, as with ps 0) for the mlp on the shipped sample, ``--local_steps local_steps``,
    warm-up and cosine schedule over 100 steps; returns (runner, its TrainState)."""
    import tensorflow as tf

    from trainer import data as data_mod
    from trainer import flags
    from trainer.contract.cluster_spec import MULTI_WORKER_MIRRORED, TaskConfig
    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training.checkpoints import TrainState
    from trainer.training.distribution import Distribution
    from trainer.training.steps import StepRunner

    args = flags.build_parser().parse_args(
        [
            "--local_steps",
            local_steps,
            "--model",
            "mlp",
            "--log_dir",
            str(tmp_path),
            "--lr_schedule",
            "warmup_cosine",
        ]
    )
    dist = Distribution(MULTI_WORKER_MIRRORED, tf.distribute.MirroredStrategy(["/cpu:0"]), None, 1)
    packing = PackedWeights(build_model("mlp", 0.0))
    total_steps = 100
    state = TrainState(
        dist.strategy,
        packing.initial_value(),
        args,
        total_steps,
        TaskConfig({}),
        0.0,
        learning_rate=args.learning_rate,
    )
    runner = StepRunner(args, dist, state, packing, data_mod.load(args.data_dir), total_steps)
    return runner, state
