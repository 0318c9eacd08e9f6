"""A log directory holding checkpoints of another model (or optimizer variables): a flag
error naming --log_dir and the flags, found before training
(trainer.training.checkpoints.check_checkpoint_matches), in process."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from trainer.contract import recipe
from trainer.flags import FlagError


def _packed(model_name: str, dropout: float, args: argparse.Namespace):
    """(weights, optimizer) built as trainer.training.run builds them: the model's packed
    weights and an optimizer over them."""
    import keras

    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training.schedule import make_optimizer

    weights = keras.Variable(PackedWeights(build_model(model_name, dropout)).initial_value())
    optimizer = make_optimizer(args, 100, args.learning_rate)
    optimizer.build([weights])
    return weights, optimizer


def _save(
    tmp_path: Path,
    model_name: str,
    dropout: float = 0.25,
    optimizer: str = "adam",
    lr_schedule: str = "warmup_cosine",
) -> str:
    """A checkpoint laid out as trainer.training.checkpoints.TrainState writes it (weights,
    optimizer, counters)."""
    import tensorflow as tf

    weights, opt = _packed(
        model_name,
        dropout,
        argparse.Namespace(
            **(recipe.defaults() | dict(learning_rate=0.003, lr_schedule=lr_schedule, optimizer=optimizer))
        ),
    )
    checkpoint = tf.train.Checkpoint(
        weights=weights,
        optimizer=opt,
        position=tf.Variable([2, 0], dtype=tf.int64),
        global_step=tf.Variable(0, dtype=tf.int64),
    )
    return tf.train.CheckpointManager(checkpoint, str(tmp_path / "checkpoints"), 3).save()


def _args(
    tmp_path: Path,
    model: str,
    dropout: float = 0.25,
    optimizer: str = "adam",
    lr_schedule: str = "warmup_cosine",
    learning_rate: float = 0.003,
) -> argparse.Namespace:
    return argparse.Namespace(
        **(
            recipe.defaults()
            | dict(
                log_dir=str(tmp_path),
                model=model,
                dropout=dropout,
                optimizer=optimizer,
                lr_schedule=lr_schedule,
                learning_rate=learning_rate,
            )
        )
    )


def check_checkpoint_model(path: str, args: argparse.Namespace) -> None:
    """check_checkpoint_matches with this run's weights and optimizer, built as run builds
    them."""
    from trainer.training.checkpoints import check_checkpoint_matches

    check_checkpoint_matches(path, args, *_packed(args.model, args.dropout, args))


@pytest.mark.parametrize(
    "written, wanted",
    [
        ("convnet_fc", "convnet"),
        ("convnet", "convnet_fc"),
        ("convnet_fc", "mlp"),
        ("mlp", "convnet"),
        ("convnet_fc", "convnet_fc_slim"),
    ],
)
def test_another_model_s_checkpoint_is_a_flag_error_naming_log_dir_and_model(tmp_path, written, wanted):
    path = _save(tmp_path, written)
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, wanted))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of model {written} ({path}); this run's "
        f"--model is {wanted}: use a new --log_dir or the same --model"
    )


def test_the_same_model_and_optimizer_pass_whatever_the_dropout_and_rate(tmp_path):
    path = _save(tmp_path, "convnet_fc", dropout=0.25)
    check_checkpoint_model(path, _args(tmp_path, "convnet_fc", dropout=0.5, learning_rate=0.01))


@pytest.mark.parametrize(
    "written, wanted",
    [
        (("adam", "warmup_cosine"), ("adam", "constant")),
        (("adam", "constant"), ("adam", "warmup_cosine")),
        (("sgd", "constant"), ("adam", "constant")),
    ],
)
def test_another_optimizer_s_checkpoint_is_a_flag_error_naming_its_flags(tmp_path, written, wanted):
    path = _save(tmp_path, "mlp", optimizer=written[0], lr_schedule=written[1])
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, "mlp", optimizer=wanted[0], lr_schedule=wanted[1]))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of a run with --optimizer {written[0]} "
        f"--lr_schedule {written[1]} ({path}); this run's are --optimizer {wanted[0]} "
        f"--lr_schedule {wanted[1]}: use a new --log_dir or the same --optimizer and "
        "--lr_schedule"
    )


def test_a_checkpoint_of_no_known_model_says_so(tmp_path):
    import tensorflow as tf

    other = tf.Variable(tf.zeros([7850]))  # a 784-10 softmax layer's weights, packed
    path = tf.train.Checkpoint(weights=other).save(str(tmp_path / "checkpoints" / "ckpt"))
    with pytest.raises(
        FlagError,
        match=r"holds checkpoints of a model whose weights match "
        r"none of convnet, convnet_fc, "
        r"convnet_fc_slim, mlp \(.*\); this run's "
        r"--model is convnet: use a new --log_dir",
    ):
        check_checkpoint_model(path, _args(tmp_path, "convnet"))


def test_a_checkpoint_of_unpacked_weights_is_a_flag_error_naming_the_earlier_trainer(tmp_path):
    """Checkpoints of the trainer before trainer/packed.py held the model's own variables."""
    import tensorflow as tf

    from trainer.model import build_model

    model = build_model("convnet_fc_slim", 0.25)
    path = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(tmp_path / "checkpoints"), 3
    ).save()
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, "convnet_fc_slim"))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of an earlier trainer, which kept the model's "
        f"variables unpacked ({path}): use a new --log_dir"
    )


def _saved_learning_rate(path: str) -> float:
    """The optimizer's constant learning-rate variable in checkpoint ``path``."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(path)
    keys = [
        k for k in reader.get_variable_to_shape_map() if k.startswith("optimizer/") and "learning_rate" in k
    ]
    assert len(keys) == 1, keys
    return float(reader.get_tensor(keys[0]))


def test_a_resumed_run_with_a_constant_rate_trains_at_its_own_rate(tmp_path):
    """The rate is an optimizer variable, so a restore would bring back the earlier run's."""
    import subprocess
    import sys

    import tensorflow as tf

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CONFIG"}
    common = [
        "-m",
        "trainer",
        "--log_dir",
        str(tmp_path),
        "--model",
        "mlp",
        "--batch_size",
        "100",
        "--lr_schedule",
        "constant",
    ]
    for epochs, rate in (("1", "0.001"), ("2", "0.002")):
        proc = subprocess.run(
            [sys.executable, *common, "--epochs", epochs, "--learning_rate", rate],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    # The line goes on with the recipe's other settings ("; label smoothing 0.1; ...").
    assert "Restored checkpoint" in proc.stdout and re.search(r"adam lr 0\.002[;\n]", proc.stdout)
    checkpoints = tmp_path / "checkpoints"
    assert _saved_learning_rate(str(checkpoints / "ckpt-1")) == pytest.approx(0.001)
    assert _saved_learning_rate(tf.train.latest_checkpoint(str(checkpoints))) == pytest.approx(0.002)
