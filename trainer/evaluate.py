"""``python -m trainer.evaluate EXPORT_DIR --data_dir DIR [--sha256 DIGEST]``: the test accuracy
of a run's exported model, with plain TensorFlow, once its files are the ones the run recorded.

Self-contained on purpose: it imports nothing from the trainer (not even its data reader), so
it shows that the export alone, read by ``tf.saved_model.load`` as TF Serving reads it, gives
the run's result. It reads the test split of DIR itself: the IDX files
``t10k-images-idx3-ubyte[.gz]`` and ``t10k-labels-idx1-ubyte[.gz]`` (gzip or raw, as the
trainer reads them; http://yann.lecun.com/exdb/mnist/ describes the format), else Keras'
``mnist.npz`` (its x_test, y_test). Pixels are fed as the trainer feeds them: float32, the
uint8 value / 255, in batches of 1,000, to the ``serving_default`` signature (``pixels``
(batch, 784) -> ``classes``, the argmax of the logits, as the trainer's evaluation counts).

Which export, and why it is checked first: loading a SavedModel and calling its signature runs
whatever TensorFlow ops its graph holds, with this user's rights (reading and writing files
among them), so a directory that merely looks like an export is never loaded. EXPORT_DIR is the
run's directory, its ``export`` directory or a version directory ``export/<version>``; the
export loaded is the one the run's ``result.json`` names (``saved_model``), never simply the
highest version there, and only when the version directory holds exactly the files result.json
records (``saved_model_files``), each with its recorded SHA-256. The files are hashed as they
are copied into a private temporary directory, and the model is loaded from that copy, so what
runs is what was checked. ``--sha256`` checks a version directory anywhere (a copy off the
volume) against the tree digest of the chief's "Exported model" line instead
(``tree_digest``). docs/design.md ("What a task pod may write") says what this does and does
not protect against.

Output, on stdout: ``Test-Accuracy: <fraction, 4 decimals>`` (the chief's closing line's
format), ``Correct: <n> of <m> test examples (<fraction, repr>) by <SavedModel dir>`` and
``Verified: <k> files of <dir> by <what>``; the fraction is n / m, the same float
result.json's ``test_accuracy`` holds for the same weights and data. Exit codes: 0 done; 2 bad
arguments, a missing export or unreadable data; 3 refused (``EXIT_REFUSED``): no record, or
files that differ from it, the message naming the file, its SHA-256 and the expected one.
"""

from __future__ import annotations

import argparse
import errno
import gzip
import hashlib
import json
import os
import re
import stat
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

ROWS = COLS = 28
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
BATCH = 1000
#: The run's record and the export's folder in a run directory (trainer/contract/progress.py,
#: repeated: this file imports nothing from the trainer).
RESULT_FILE, EXPORT_SUBDIR = "result.json", "export"
SHA256 = re.compile(r"[0-9a-fA-F]{64}")
#: Exit code of an export that is not loaded because nothing ties it to the run (``Refused``).
EXIT_REFUSED = 3


class EvaluateError(ValueError):
    """A missing export or data file, or a malformed one; the message names it."""


class Refused(EvaluateError):
    """An export that is not loaded: loading a SavedModel runs the code in its graph, so only
    one whose files match the run's record (or --sha256) is. The message names the file, what
    it holds and what was expected."""


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


def _run_dir(path: Path) -> tuple[Path, Path | None]:
    """(the run directory whose result.json is the record, the version directory ``path``
    names or None) for EXPORT_DIR ``path``: a version directory (it holds saved_model.pb; the
    run's directory is two levels up), the run's directory (it holds result.json), or the
    directory of versions (``<log_dir>/export``)."""
    if (path / "saved_model.pb").is_file():
        return path.parent.parent, path
    if (path / RESULT_FILE).is_file():
        return path, None
    return path.parent, None


def recorded_export(run_dir: Path) -> tuple[Path, dict[str, str]]:
    """(the version directory, its files' SHA-256 by relative path) that ``run_dir``'s
    result.json names: ``saved_model`` (``export/<version>``) and ``saved_model_files``.

    Raises:
        Refused: no result.json, or one that names no export or records no digests.
    """
    record = run_dir / RESULT_FILE
    if not record.is_file():
        raise Refused(
            f"{record}: missing: the run's record names the export to load and the digests of its "
            "files; without it nothing ties a SavedModel to the run (for an export copied off its "
            "run directory, pass --sha256 with the digest the chief's 'Exported model' line printed)"
        )
    try:
        result = json.loads(record.read_text())
    except (OSError, ValueError) as err:
        raise Refused(f"{record}: unreadable: {err}") from None
    name = result.get("saved_model") if isinstance(result, dict) else None
    files = result.get("saved_model_files") if isinstance(result, dict) else None
    if not isinstance(name, str) or not re.fullmatch(rf"{EXPORT_SUBDIR}/[1-9][0-9]*", name):
        raise Refused(f"{record}: names no export (saved_model {name!r}, expected {EXPORT_SUBDIR}/<version>)")
    if (
        not isinstance(files, dict)
        or not files
        or not all(isinstance(v, str) and SHA256.fullmatch(v) for v in files.values())
        or not all(isinstance(k, str) and _plain_path(k) for k in files)
    ):
        raise Refused(
            f"{record}: records no digests of {name}'s files (saved_model_files), so nothing says "
            f"its files are the ones the run's chief wrote: a trainer older than the record, or a "
            f"chief that found {name} already there wrote it. Remove {run_dir / name} and run the "
            "same training command again: the finished run exports its checkpoint anew and records it"
        )
    return run_dir / name, files


def _plain_path(path: str) -> bool:
    """A relative ``/``-separated path without ``.``, ``..`` or empty parts."""
    return all(part not in ("", ".", "..") for part in path.split("/"))


def listed_files(directory: Path) -> set[str]:
    """Every entry under ``directory`` that is not a directory (symbolic links included, never
    followed), as ``/``-separated paths relative to it."""
    found = set()
    for top, dirs, names in os.walk(directory):
        links = [d for d in dirs if os.path.islink(os.path.join(top, d))]
        for name in [*names, *links]:
            found.add(Path(top, name).relative_to(directory).as_posix())
    return found


def copy_hashed(directory: Path, files: list[str], into: Path) -> dict[str, str]:
    """Copy each of ``files`` (relative to ``directory``) into ``into``, hashing the bytes as
    they are read: what is then loaded from ``into`` is exactly what was hashed, whatever
    happens to ``directory`` meanwhile. Returns path -> SHA-256.

    Raises:
        Refused: one of ``files`` is a symbolic link or not a regular file.
        OSError: one cannot be read.
    """
    digests = {}
    for name in files:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        # A regular file only, never through a link: a link to a pipe or a device would hang
        # the read, and one to elsewhere is not the export's file.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(directory / name, flags)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise Refused(f"{directory / name}: a symbolic link, not the export's file") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Refused(f"{directory / name}: not a regular file")
        with open(fd, "rb") as source, open(target, "wb") as out:
            for chunk in iter(lambda: source.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
        digests[name] = digest.hexdigest()
    return digests


def tree_digest(files: dict[str, str]) -> str:
    """The SHA-256 of the lines ``<sha256>  <path>``, sorted by path, each ending in a newline:
    one digest for a directory's files, as the chief prints it (``sha256sum`` of the files'
    ``sha256sum`` lines)."""
    text = "".join(f"{digest}  {path}\n" for path, digest in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def verified_export(export_dir: str | Path, into: Path, sha256: str | None = None) -> tuple[Path, str]:
    """Copy the run's export into ``into`` once its files are verified; return (its version
    directory, a line saying what it was verified against).

    Without ``sha256`` the export is the one the run's result.json names (``recorded_export``;
    a version directory given as ``export_dir`` must be that one), and its files must be
    exactly those recorded, each with its recorded SHA-256. With ``sha256`` (the tree digest
    of the chief's "Exported model" line, ``tree_digest``) ``export_dir`` is the version
    directory itself, anywhere, and its files must give that digest.

    Raises:
        EvaluateError: ``export_dir`` holds no SavedModel.
        Refused: no record, or files that differ from it: the message names the file, its
            SHA-256 and the recorded one.
    """
    path = Path(export_dir)
    if sha256 is not None:
        if not (path / "saved_model.pb").is_file():
            raise EvaluateError(f"{path}: no saved_model.pb: with --sha256 give the version directory")
        listed = sorted(listed_files(path))
        found = tree_digest(copy_hashed(path, listed, into))
        if found != sha256.lower():
            raise Refused(
                f"{path}: its {len(listed)} files give sha256 {found}, but --sha256 expects {sha256}: "
                "not the export that digest names (or changed since)"
            )
        return path, f"Verified: {len(listed)} files of {path} by --sha256 {found}"
    run_dir, named = _run_dir(path)
    if named is not None and named.parent.name != EXPORT_SUBDIR:
        raise Refused(
            f"{named}: not in a run's {EXPORT_SUBDIR} directory (<log_dir>/{EXPORT_SUBDIR}/<version>), so no "
            "run's result.json names it: for a copy, pass --sha256 with the digest the chief's 'Exported "
            "model' line printed"
        )
    version, files = recorded_export(run_dir)
    record = run_dir / RESULT_FILE
    if named is not None and named.resolve() != version.resolve():
        raise Refused(
            f"{named}: not the run's export: {record} names {version.relative_to(run_dir)}, and only the "
            "export a run records is loaded (for another one, pass --sha256 with its chief's digest)"
        )
    if not version.is_dir():
        raise Refused(f"{version}: missing, though {record} names it")
    extra = sorted(listed_files(version) - files.keys())
    if extra:
        raise Refused(f"{version / extra[0]}: not one of the files {record} records for {version.name}")
    missing = sorted(f for f in files if not (version / f).is_file())
    if missing:
        raise Refused(
            f"{version / missing[0]}: missing, though {record} records it (sha256 {files[missing[0]]})"
        )
    found = copy_hashed(version, sorted(files), into)
    for name in sorted(files):
        if found[name] != files[name].lower():
            raise Refused(
                f"{version / name}: sha256 {found[name]}, but {record} records {files[name]}: "
                "changed since the run's chief wrote it; not loaded"
            )
    return version, f"Verified: {len(files)} files of {version} by {record}, sha256 {tree_digest(found)}"


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


def _sha256_flag(text: str) -> str:
    if not SHA256.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a SHA-256: 64 hex digits")
    return text.lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.evaluate",
        description="Print the test accuracy of a run's exported model (SavedModel, plain TensorFlow), "
        "once its files match the run's record.",
    )
    parser.add_argument(
        "export_dir",
        help="<log_dir>, <log_dir>/export or <log_dir>/export/<version> (with --sha256: any copy)",
    )
    parser.add_argument(
        "--data_dir", required=True, help="the directory of the MNIST files the run was trained on"
    )
    parser.add_argument(
        "--sha256",
        type=_sha256_flag,
        help="the export's digest from the chief's 'Exported model' line: check the version directory "
        "EXPORT_DIR against it instead of the run's result.json",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trainer-evaluate-") as private:
        try:
            images, labels = read_test_set(args.data_dir)
            model_dir, verified = verified_export(args.export_dir, Path(private), args.sha256)
        except Refused as err:
            print(f"refused: {err}", file=sys.stderr)
            return EXIT_REFUSED
        except (EvaluateError, OSError, KeyError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's import
        correct = correct_predictions(Path(private), images, labels)
    accuracy = correct / len(labels)
    print(f"Test-Accuracy: {accuracy:.4f}")
    print(f"Correct: {correct} of {len(labels)} test examples ({accuracy!r}) by {model_dir}")
    print(verified)
    return 0


if __name__ == "__main__":
    sys.exit(main())
