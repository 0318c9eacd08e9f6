"""Builders of IDX files (good and deliberately broken) for the trainer tests, the command
of a small one-process run, and real checkpoints written by TrainState."""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from trainer import data
from trainer.contract import recipe
from trainer.data import IMAGES_MAGIC, LABELS_MAGIC
from trainer.flags import BUNDLED_DATA_DIR

#: The whole MNIST beside the checkout (../shared/data/mnist-full): benchmarks and opt-in tests.
FULL_MNIST = Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist-full"


def full_mnist_or_skip() -> Path:
    """FULL_MNIST when it is there and a known copy of MNIST (sha256 of its IDX bytes);
    otherwise the calling test is skipped with the reason."""
    if not FULL_MNIST.is_dir():
        pytest.skip(f"{FULL_MNIST} is not present (the whole MNIST, opt-in)")
    if data.load(FULL_MNIST).known_as != "mnist":
        pytest.skip(f"{FULL_MNIST} is not a known copy of MNIST (sha256 of the IDX bytes)")
    return FULL_MNIST


def idx_images(images: np.ndarray, magic: int = IMAGES_MAGIC, count: int | None = None) -> bytes:
    n, rows, cols = images.shape
    header = struct.pack(">IIII", magic, n if count is None else count, rows, cols)
    return header + images.astype(np.uint8).tobytes()


def idx_labels(labels: np.ndarray, magic: int = LABELS_MAGIC, count: int | None = None) -> bytes:
    header = struct.pack(">II", magic, len(labels) if count is None else count)
    return header + labels.astype(np.uint8).tobytes()


def write_gz(path: Path, raw: bytes) -> Path:
    path.write_bytes(gzip.compress(raw))
    return path


def write_mnist(
    directory: Path,
    n_train: int = 80,
    n_test: int = 20,
    seed: int = 0,
    train_labels: np.ndarray | None = None,
) -> Path:
    """Four valid IDX files with random pixels in ``directory``."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_gz(directory / f"{prefix}-images-idx3-ubyte.gz", idx_images(rng.integers(0, 256, (n, 28, 28))))
        labels = rng.integers(0, 10, n)
        if prefix == "train" and train_labels is not None:
            labels = train_labels
        write_gz(directory / f"{prefix}-labels-idx1-ubyte.gz", idx_labels(labels))
    return directory


def small_run_command(log_dir: Path, epochs: int = 1) -> list[str]:
    """``python -m trainer`` on the bundled sample with the MLP and batches of 500 (20 steps an
    epoch): a whole run in a few seconds, for tests of what a run leaves behind."""
    return [sys.executable, "-m", "trainer", "--log_dir", str(log_dir), "--model", "mlp"] + [
        "--batch_size",
        "500",
        "--epochs",
        str(epochs),
        "--data_dir",
        str(BUNDLED_DATA_DIR),
    ]


def checkpoint_args(log_dir: Path) -> argparse.Namespace:
    """The flags of a run of the mlp with sgd at a constant rate, for ``checkpoint_state``."""
    return argparse.Namespace(
        **(
            recipe.defaults()
            | dict(
                log_dir=str(log_dir),
                learning_rate=0.01,
                lr_schedule="constant",
                optimizer="sgd",
                epochs=3,
                model="mlp",
                dropout=0.0,
            )
        )
    )


def checkpoint_state(log_dir: Path):
    """A TrainState of the mlp (79,510 packed weights) with sgd, as trainer.training.run
    builds one for a single process."""
    import tensorflow as tf

    from trainer.contract.cluster_spec import TaskConfig
    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training.checkpoints import TrainState

    args = checkpoint_args(log_dir)
    return TrainState(
        tf.distribute.get_strategy(),
        PackedWeights(build_model("mlp", 0.0)).initial_value(),
        args,
        30,
        TaskConfig({}),
        time.time(),
        learning_rate=args.learning_rate,
    )


def write_two_checkpoints(log_dir: Path) -> tuple[Path, list[np.ndarray]]:
    """ckpt-1 at epoch 1 and ckpt-2 at epoch 2 in ``log_dir``/checkpoints, with weights 1.0 and
    2.0 everywhere; return ``log_dir`` and those weights."""
    state = checkpoint_state(log_dir)
    values = []
    for epoch in (1, 2):
        values.append(np.full(state.weights.shape, float(epoch), np.float32))
        state.weights.assign(values[-1])
        assert state.save(epoch, 0) == str(log_dir / "checkpoints" / f"ckpt-{epoch}")
    return log_dir, values
