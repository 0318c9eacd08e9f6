"""The model to serve: the chief's evaluation copy of the network, exported at the end of a
run as a SavedModel (for TF Serving and plain TensorFlow) and a ``.keras`` file (for Keras).

Layout under --log_dir (``trainer.contract.progress.EXPORT_SUBDIR``)::

    export/<version>/saved_model.pb, variables/, fingerprint.pb   the SavedModel
    export/<version>/model.keras                                  the same model for Keras

``<version>`` is the number of epochs in the weights: a run continued to more epochs exports
a higher version beside the old one, which TF Serving (``--model_base_path=<log_dir>/export``,
which needs ``<base>/<version>/saved_model.pb``) picks up as the newer model. Each version
directory is written whole under a temporary name in ``export/`` and renamed into place, so
a reader never sees half an export, and an existing version is left as it is (a resumed
finished run exports nothing new).

Input scale: float32 pixels in [0, 1] (the uint8 value / 255), as the trainer's input
pipeline feeds the network (trainer.data.make_dataset_fn); raw 0-255 values would be
predicted badly without any error.

SavedModel signatures (outputs of both: ``probabilities`` float32 (batch, 10), the softmax
of the network's logits; ``classes`` int64 (batch,), the argmax of the logits):

- ``serving_default``: input ``pixels``, float32 (batch, 784), each image row-major.
- ``images``: input ``images``, float32 (batch, 28, 28).

``model.keras`` maps float32 (batch, 28, 28) in [0, 1] to the probabilities; it holds only
Keras' built-in layers, so ``keras.saving.load_model`` reads it without this trainer.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from trainer.contract.progress import EXPORT_SUBDIR, KERAS_MODEL_FILE
from trainer.data import COLS, ROWS

PIXELS = ROWS * COLS


@dataclass(frozen=True)
class Export:
    """Where a run's export is, relative to its --log_dir: ``saved_model``
    (``export/<version>``, the SavedModel's directory) and ``keras_model`` (its .keras file)."""

    saved_model: str
    keras_model: str


def export_paths(version: int) -> Export:
    """The relative paths of export ``version`` (>= 1)."""
    saved_model = f"{EXPORT_SUBDIR}/{version}"
    return Export(saved_model, f"{saved_model}/{KERAS_MODEL_FILE}")


def serving_model(model):
    """A Keras model mapping float32 (batch, 28, 28) pixels in [0, 1] to class
    probabilities (batch, 10): ``model`` (float32 (batch, 28, 28, 1) -> logits) between a
    reshape and a softmax. It shares ``model``'s variables."""
    import keras

    images = keras.Input(shape=(ROWS, COLS), name="images")
    x = keras.layers.Reshape((ROWS, COLS, 1), name="channel")(images)
    probabilities = keras.layers.Softmax(name="probabilities")(model(x))
    return keras.Model(images, probabilities, name=f"{model.name}_probabilities")


def export_model(model, log_dir: str | Path, version: int) -> Export:
    """Export ``model`` (a built Keras model of trainer.model: float32 (batch, 28, 28, 1) in
    [0, 1] -> logits (batch, 10)) as ``<log_dir>/export/<version>``; return its paths.

    Nothing is written when that version exists already. The SavedModel's functions are
    traced in this process; under ParameterServerStrategy the caller keeps the returned
    paths' objects alive as the rest of the chief's (trainer.training.finish).

    Raises:
        ValueError: ``version`` < 1 (TF Serving reads only positive version numbers).
        OSError: the directory cannot be written.
    """
    if version < 1:
        raise ValueError(f"export version {version} is invalid: must be an integer >= 1 "
                         "(the epochs in the weights)")
    paths = export_paths(version)
    root = Path(log_dir) / EXPORT_SUBDIR
    final = Path(log_dir) / paths.saved_model
    if (final / "saved_model.pb").is_file():
        return paths
    root.mkdir(parents=True, exist_ok=True)
    # Left by a chief killed while exporting: a --log_dir holds one run at a time
    # (trainer/log_dir_lock.py; on the stack every run has a directory of its own).
    for stale in root.glob(".*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = root / f".{version}.tmp-{os.getpid()}"
    write_saved_model(model, tmp)
    serving_model(model).save(tmp / KERAS_MODEL_FILE)
    os.rename(tmp, final)
    return paths


def write_saved_model(model, directory: Path) -> None:
    """Write ``model``'s SavedModel with the ``serving_default`` (784 pixels) and ``images``
    (28 x 28) signatures, each returning ``probabilities`` and ``classes``."""
    import keras
    import tensorflow as tf

    def predict(images):
        logits = model(images[..., None], training=False)
        return {"probabilities": tf.nn.softmax(logits),
                "classes": tf.argmax(logits, axis=1)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serving_default", lambda pixels: predict(tf.reshape(pixels, (-1, ROWS, COLS))),
        input_signature=[tf.TensorSpec((None, PIXELS), tf.float32, name="pixels")])
    archive.add_endpoint(
        "images", predict,
        input_signature=[tf.TensorSpec((None, ROWS, COLS), tf.float32, name="images")])
    archive.write_out(str(directory), verbose=False)
