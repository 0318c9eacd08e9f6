"""A log directory holding checkpoints of another model (or optimizer variables): a flag
error naming --log_dir and the flags, found before training
(trainer.train.check_checkpoint_matches), in process."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from trainer.flags import FlagError


def _packed(model_name: str, dropout: float, args: argparse.Namespace):
    """(weights, optimizer) built as trainer.train.run builds them: the model's packed
    weights and an optimizer over them."""
    import keras

    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.train import make_optimizer

    weights = keras.Variable(PackedWeights(build_model(model_name, dropout)).initial_value())
    optimizer = make_optimizer(args, 100)
    optimizer.build([weights])
    return weights, optimizer


def _save(tmp_path: Path, model_name: str, dropout: float = 0.25, optimizer: str = "adam",
          lr_schedule: str = "warmup_cosine") -> str:
    """A checkpoint laid out as trainer.train.run writes it (weights, optimizer, counters)."""
    import tensorflow as tf

    weights, opt = _packed(model_name, dropout, argparse.Namespace(
        learning_rate=0.003, lr_schedule=lr_schedule, optimizer=optimizer))
    checkpoint = tf.train.Checkpoint(weights=weights, optimizer=opt,
                                     position=tf.Variable([2, 0], dtype=tf.int64),
                                     global_step=tf.Variable(0, dtype=tf.int64))
    return tf.train.CheckpointManager(checkpoint, str(tmp_path / "checkpoints"), 3).save()


def _args(tmp_path: Path, model: str, dropout: float = 0.25, optimizer: str = "adam",
          lr_schedule: str = "warmup_cosine", learning_rate: float = 0.003) -> argparse.Namespace:
    return argparse.Namespace(log_dir=str(tmp_path), model=model, dropout=dropout,
                              optimizer=optimizer, lr_schedule=lr_schedule,
                              learning_rate=learning_rate)


def check_checkpoint_model(path: str, args: argparse.Namespace) -> None:
    """check_checkpoint_matches with this run's weights and optimizer, built as run builds
    them."""
    from trainer.train import check_checkpoint_matches

    check_checkpoint_matches(path, args, *_packed(args.model, args.dropout, args))


@pytest.mark.parametrize("written, wanted", [("convnet_fc", "convnet"), ("convnet", "convnet_fc"),
                                             ("convnet_fc", "mlp"), ("mlp", "convnet"),
                                             ("convnet_fc", "convnet_fc_slim")])
def test_another_model_s_checkpoint_is_a_flag_error_naming_log_dir_and_model(
        tmp_path, written, wanted):
    path = _save(tmp_path, written)
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, wanted))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of model {written} ({path}); this run's "
        f"--model is {wanted}: use a new --log_dir or the same --model")


def test_the_same_model_and_optimizer_pass_whatever_the_dropout_and_rate(tmp_path):
    path = _save(tmp_path, "convnet_fc", dropout=0.25)
    check_checkpoint_model(path, _args(tmp_path, "convnet_fc", dropout=0.5, learning_rate=0.01))


@pytest.mark.parametrize("written, wanted", [(("adam", "warmup_cosine"), ("adam", "constant")),
                                             (("adam", "constant"), ("adam", "warmup_cosine")),
                                             (("sgd", "constant"), ("adam", "constant"))])
def test_another_optimizer_s_checkpoint_is_a_flag_error_naming_its_flags(tmp_path, written,
                                                                         wanted):
    path = _save(tmp_path, "mlp", optimizer=written[0], lr_schedule=written[1])
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, "mlp", optimizer=wanted[0],
                                           lr_schedule=wanted[1]))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of a run with --optimizer {written[0]} "
        f"--lr_schedule {written[1]} ({path}); this run's are --optimizer {wanted[0]} "
        f"--lr_schedule {wanted[1]}: use a new --log_dir or the same --optimizer and "
        "--lr_schedule")


def test_a_checkpoint_of_no_known_model_says_so(tmp_path):
    import tensorflow as tf

    other = tf.Variable(tf.zeros([7850]))  # a 784-10 softmax layer's weights, packed
    path = tf.train.Checkpoint(weights=other).save(str(tmp_path / "checkpoints" / "ckpt"))
    with pytest.raises(FlagError, match=r"holds checkpoints of a model whose weights match "
                                        r"none of convnet, convnet_fc, "
                                        r"convnet_fc_slim, mlp \(or an earlier trainer's, "
                                        r"which kept them unpacked\) \(.*\); this run's "
                                        r"--model is convnet: use a new --log_dir"):
        check_checkpoint_model(path, _args(tmp_path, "convnet"))


def test_a_checkpoint_of_unpacked_weights_is_a_flag_error_naming_the_earlier_trainer(tmp_path):
    """Checkpoints of the trainer before trainer/packed.py held the model's own variables."""
    import tensorflow as tf

    from trainer.model import build_model

    model = build_model("convnet_fc_slim", 0.25)
    path = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                      str(tmp_path / "checkpoints"), 3).save()
    with pytest.raises(FlagError) as err:
        check_checkpoint_model(path, _args(tmp_path, "convnet_fc_slim"))
    assert str(err.value) == (
        f"--log_dir {tmp_path} holds checkpoints of a model whose weights match none of "
        "convnet, convnet_fc, convnet_fc_slim, mlp (or an earlier trainer's, which kept them "
        f"unpacked) ({path}); this run's --model is convnet_fc_slim: use a new --log_dir or "
        "the same --model")
