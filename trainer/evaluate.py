"""``python -m trainer.evaluate EXPORT_DIR --data_dir DIR``: the test accuracy of an exported
model, with plain TensorFlow.

Self-contained on purpose: it imports nothing from the trainer (not even its data reader), so
it shows that the export alone, read by ``tf.saved_model.load`` as TF Serving reads it, gives
the run's result. It reads the test split of DIR itself: the IDX files
``t10k-images-idx3-ubyte[.gz]`` and ``t10k-labels-idx1-ubyte[.gz]`` (gzip or raw, as the
trainer reads them; http://yann.lecun.com/exdb/mnist/ describes the format), else Keras'
``mnist.npz`` (its x_test, y_test). Pixels are fed as the trainer feeds them: float32, the
uint8 value / 255, in batches of 1,000, to the ``serving_default`` signature (``pixels``
(batch, 784) -> ``classes``, the argmax of the logits, as the trainer's evaluation counts).

EXPORT_DIR: a SavedModel directory (``<log_dir>/export/<version>``), or the directory of
versions (``<log_dir>/export``, TF Serving's model base path: the highest version is read).

Output, on stdout: ``Test-Accuracy: <fraction, 4 decimals>`` (the chief's closing line's
format) and ``Correct: <n> of <m> test examples (<fraction, repr>) by <SavedModel dir>``; the
fraction is n / m, the same float result.json's ``test_accuracy`` holds for the same weights
and data. Exit codes: 0 done; 2 bad arguments, a missing export or unreadable data.
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
from pathlib import Path

import numpy as np

ROWS = COLS = 28
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
BATCH = 1000


class EvaluateError(ValueError):
    """A missing export or data file, or a malformed one; the message names it."""


def _idx_bytes(directory: Path, name: str) -> tuple[Path, bytes]:
    """The IDX bytes of ``name`` in ``directory``: ``name.gz`` (gunzipped) or ``name``."""
    for path in (directory / f"{name}.gz", directory / name):
        if path.is_file():
            raw = path.read_bytes()
            try:
                return path, gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            except (OSError, EOFError) as err:
                raise EvaluateError(f"{path}: corrupt gzip data: {err}") from None
    raise EvaluateError(f"{directory / name}.gz: file is missing (nor {directory / name})")


def read_test_set(data_dir: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The test images, uint8 (n, 28, 28), and labels, uint8 (n,), of ``data_dir``.

    Raises:
        EvaluateError: no IDX files or mnist.npz, a wrong magic number or size, or counts
            that differ.
    """
    directory = Path(data_dir)
    if (
        not (directory / f"{TEST_IMAGES}.gz").exists()
        and not (directory / TEST_IMAGES).exists()
        and (directory / "mnist.npz").is_file()
    ):
        with np.load(directory / "mnist.npz", allow_pickle=False) as npz:
            return npz["x_test"].astype(np.uint8), npz["y_test"].astype(np.uint8)
    images_path, images = _idx_bytes(directory, TEST_IMAGES)
    labels_path, labels = _idx_bytes(directory, TEST_LABELS)
    if len(images) < 16 or len(labels) < 8:
        raise EvaluateError(f"{images_path}, {labels_path}: shorter than the IDX headers (16 and 8 bytes)")
    magic, count, rows, cols = struct.unpack(">IIII", images[:16])
    if magic != IMAGES_MAGIC or (rows, cols) != (ROWS, COLS) or len(images) != 16 + count * ROWS * COLS:
        raise EvaluateError(
            f"{images_path}: not IDX images of {ROWS}x{COLS} (magic {magic}, "
            f"{rows}x{cols}, {len(images)} bytes for {count} images)"
        )
    magic, n_labels = struct.unpack(">II", labels[:8])
    if magic != LABELS_MAGIC or len(labels) != 8 + n_labels or n_labels != count:
        raise EvaluateError(
            f"{labels_path}: not IDX labels for the {count} images of "
            f"{images_path} (magic {magic}, {n_labels} labels)"
        )
    return (
        np.frombuffer(images, np.uint8, offset=16).reshape(count, ROWS, COLS),
        np.frombuffer(labels, np.uint8, offset=8),
    )


def saved_model_dir(export_dir: str | Path) -> Path:
    """``export_dir`` when it holds saved_model.pb, else its highest numbered version
    subdirectory that does (TF Serving's choice).

    Raises:
        EvaluateError: neither.
    """
    directory = Path(export_dir)
    if (directory / "saved_model.pb").is_file():
        return directory
    versions = (
        [p for p in directory.glob("*") if p.name.isdigit() and (p / "saved_model.pb").is_file()]
        if directory.is_dir()
        else []
    )
    if not versions:
        raise EvaluateError(
            f"{directory}: no SavedModel: expected saved_model.pb in it or in "
            "a version subdirectory (<log_dir>/export/<version>)"
        )
    return max(versions, key=lambda p: int(p.name))


def correct_predictions(model_dir: Path, images: np.ndarray, labels: np.ndarray) -> int:
    """How many of ``images`` (uint8 (n, 28, 28)) the SavedModel's ``serving_default``
    classifies as ``labels`` says, fed as float32 pixels / 255 in batches of BATCH."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    correct = 0
    for start in range(0, len(images), BATCH):
        pixels = images[start : start + BATCH].reshape(-1, ROWS * COLS).astype(np.float32) / 255.0
        classes = serve(pixels=tf.constant(pixels))["classes"].numpy()
        correct += int(np.sum(classes == labels[start : start + BATCH]))
    return correct


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.evaluate",
        description="Print the test accuracy of an exported model (SavedModel, plain TensorFlow).",
    )
    parser.add_argument("export_dir", help="<log_dir>/export or <log_dir>/export/<version>")
    parser.add_argument(
        "--data_dir", required=True, help="the directory of the MNIST files the run was trained on"
    )
    args = parser.parse_args(argv)
    try:
        model_dir = saved_model_dir(args.export_dir)
        images, labels = read_test_set(args.data_dir)
    except (EvaluateError, OSError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's import
    correct = correct_predictions(model_dir, images, labels)
    accuracy = correct / len(labels)
    print(f"Test-Accuracy: {accuracy:.4f}")
    print(f"Correct: {correct} of {len(labels)} test examples ({accuracy!r}) by {model_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
