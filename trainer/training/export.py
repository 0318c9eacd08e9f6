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

Temporary directories are ``.<version>.tmp-<boot id>-<pid namespace>-<pid>`` (``owner_tag``).
A chief removes its own, and another one only when that is provably abandoned
(``abandoned``): written on this boot of this kernel, in this pid namespace, by a process
that no longer exists. Anything else may be another chief's export in progress (two runs
sharing a --log_dir, or a Job's replacement pod started while the old one still runs on
another node) and is left alone: a leftover costs one model's size on the volume, while
removing a live one would fail that run's rename.

Its record: ``export_model`` returns the SHA-256 of every file of the version directory, which
the chief writes into result.json beside the export's path (``saved_model_files``); the tree
digest of those (``tree_digest``) is what its "Exported model" line prints. ``python -m
trainer.evaluate`` loads only the version result.json names, and only once its files match
(docs/design.md, "What a task pod may write"). Both compute the digests the same way, each with
its own code (the evaluator imports nothing from the trainer); tests/trainer/test_export.py holds
them together.

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

import errno
import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainer.contract.progress import EXPORT_SUBDIR, KERAS_MODEL_FILE
from trainer.data import COLS, ROWS

PIXELS = ROWS * COLS


@dataclass(frozen=True)
class Export:
    """Where a run's export is, relative to its --log_dir: ``saved_model``
    (``export/<version>``, the SavedModel's directory) and ``keras_model`` (its .keras file);
    ``saved_model_files``: each file of that directory (relative path, ``/``-separated) ->
    the SHA-256 of its bytes (64 hex digits), as written by this process; empty when the
    version was there already (written by another process, which this one cannot vouch for)."""

    saved_model: str
    keras_model: str
    saved_model_files: dict[str, str] = field(default_factory=dict)


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
        raise ValueError(
            f"export version {version} is invalid: must be an integer >= 1 (the epochs in the weights)"
        )
    paths = export_paths(version)
    root = Path(log_dir) / EXPORT_SUBDIR
    final = Path(log_dir) / paths.saved_model
    if (final / "saved_model.pb").is_file():
        return paths
    root.mkdir(parents=True, exist_ok=True)
    remove_abandoned(root)
    tmp = root / f".{version}.tmp-{owner_tag()}"
    try:
        write_saved_model(model, tmp)
        serving_model(model).save(tmp / KERAS_MODEL_FILE)
        # Digested before the rename: what this process wrote, not what the name holds later.
        files = file_digests(tmp)
        os.rename(tmp, final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        # Another chief renamed the same version into place first (rename(2) refuses a
        # non-empty target): that export stands, as an existing version always does.
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST) and (final / "saved_model.pb").is_file():
            return paths
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Export(paths.saved_model, paths.keras_model, files)


def file_digests(directory: Path) -> dict[str, str]:
    """Every regular file under ``directory`` (relative path, ``/``-separated) -> the SHA-256 of
    its bytes (64 hex digits), sorted by path.

    Raises:
        OSError: a file cannot be read.
    """
    digests = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            digests[path.relative_to(directory).as_posix()] = digest.hexdigest()
    return dict(sorted(digests.items()))


def tree_digest(files: dict[str, str]) -> str:
    """One SHA-256 for a directory's ``file_digests``: that of the lines ``<sha256>  <path>``,
    sorted by path, each ending in a newline (``sha256sum``'s output for them), so that
    ``cd export/<version> && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum |
    sha256sum`` gives it too."""
    text = "".join(f"{digest}  {path}\n" for path, digest in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


#: A temporary export directory's name: version, boot id, pid namespace inode, pid.
TMP_NAME = re.compile(r"\.(\d+)\.tmp-([0-9a-f-]+)-(\d+)-(\d+)")


def _identity() -> tuple[str, str]:
    """(boot id, pid namespace inode) of this process, or ("", "") where Linux's /proc does
    not say: then no other process's directory is ever taken for abandoned."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pidns = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return "", ""
    return (boot, pidns[1]) if pidns and re.fullmatch(r"[0-9a-f-]+", boot) else ("", "")


def owner_tag() -> str:
    """``<boot id>-<pid namespace inode>-<pid>`` of this process (``unknown-0-<pid>`` off
    Linux): the tail of its temporary export directory's name."""
    boot, pidns = _identity()
    return f"{boot or 'unknown'}-{pidns or 0}-{os.getpid()}"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def abandoned(name: str) -> bool:
    """Whether the temporary export directory ``name`` (TMP_NAME) is provably abandoned: its
    boot id and pid namespace are this process's (so its pid means the same process here)
    and that pid is this process's own (an earlier, failed export of this process) or no
    process's. A pid reused since by another process keeps the directory: a leftover, never
    a loss. Names of another form are never abandoned."""
    match = TMP_NAME.fullmatch(name)
    boot, pidns = _identity()
    if not match or not boot or (match[2], match[3]) != (boot, pidns):
        return False
    pid = int(match[4])
    return pid == os.getpid() or not _process_exists(pid)


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the provably abandoned temporary export directories in ``root`` (``abandoned``)
    and return them; say on stderr which others are left (another chief's export in
    progress, or a leftover this process cannot prove dead)."""
    removed = []
    for path in sorted(root.glob(".*.tmp-*")):
        if abandoned(path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        else:
            print(
                f"note: {path} is another process's export, in progress or left by one "
                "this chief cannot prove has ended (another node or container); left as it "
                "is (remove it by hand once no run uses this --log_dir)",
                file=sys.stderr,
                flush=True,
            )
    return removed


def write_saved_model(model, directory: Path) -> None:
    """Write ``model``'s SavedModel with the ``serving_default`` (784 pixels) and ``images``
    (28 x 28) signatures, each returning ``probabilities`` and ``classes``."""
    import keras
    import tensorflow as tf

    def predict(images):
        logits = model(images[..., None], training=False)
        return {"probabilities": tf.nn.softmax(logits), "classes": tf.argmax(logits, axis=1)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serving_default",
        lambda pixels: predict(tf.reshape(pixels, (-1, ROWS, COLS))),
        input_signature=[tf.TensorSpec((None, PIXELS), tf.float32, name="pixels")],
    )
    archive.add_endpoint(
        "images", predict, input_signature=[tf.TensorSpec((None, ROWS, COLS), tf.float32, name="images")]
    )
    archive.write_out(str(directory), verbose=False)
