"""Reading and checking MNIST-format data: the four IDX gzip files or Keras' mnist.npz.

IDX format (http://yann.lecun.com/exdb/mnist/): big-endian header; images have magic
2051 (0x00000803) then count, rows, cols, then count*rows*cols uint8 pixels; labels have
magic 2049 (0x00000801) then count, then count uint8 labels. Fashion-MNIST uses the same
format and file names.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
ROWS = COLS = 28
NUM_CLASSES = 10

#: The standard MNIST file names: split -> (images file, labels file).
IDX_FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
ALL_IDX_FILES: tuple[str, ...] = tuple(n for pair in IDX_FILES.values() for n in pair)
NPZ_FILE = "mnist.npz"
IMAGES_HEADER_BYTES = 16
LABELS_HEADER_BYTES = 8


class DataError(ValueError):
    """A data file that is missing or malformed; the message names the file and the fault."""


@dataclass(frozen=True)
class Dataset:
    """MNIST in memory.

    Attributes:
        x_train, x_test: uint8 arrays of shape (n, 28, 28), pixels 0-255.
        y_train, y_test: uint8 arrays of shape (n,), labels 0-9.
        data_dir: where it was read from.
        fmt: "idx" (four gzip files) or "npz" (mnist.npz).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    data_dir: str
    fmt: str


def _read(path: Path) -> bytes:
    """The bytes of ``path``; DataError when it is missing, a directory, empty or unreadable."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.is_file():
        raise DataError(f"{path}: file is missing")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
    if not raw:
        raise DataError(f"{path}: empty file (0 bytes): the download or copy failed")
    return raw


def _html_hint(raw: bytes, suffix: str) -> str:
    if raw.lstrip()[:1] == b"<":
        return f" (looks like an HTML page saved as {suffix}: a failed download?)"
    return ""


def _gunzip(path: Path) -> bytes:
    raw = _read(path)
    if raw[:2] != b"\x1f\x8b":
        raise DataError(f"{path}: not a gzip file: starts with {raw[:16]!r}"
                        f"{_html_hint(raw, '.gz')}")
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise DataError(f"{path}: truncated gzip stream ({len(raw)} bytes): "
                        "the file was cut short, download or copy it again") from None
    except (OSError, zlib.error) as err:
        raise DataError(f"{path}: corrupt gzip data: {err}") from None


def read_idx_images(path: Path) -> np.ndarray:
    """Read an IDX image file (.gz) into uint8 (count, 28, 28).

    Raises:
        DataError: missing, not gzip, truncated, wrong magic, wrong size, extra bytes.
    """
    data = _gunzip(path)
    if len(data) < IMAGES_HEADER_BYTES:
        raise DataError(f"{path}: truncated: {len(data)} bytes, shorter than the 16-byte "
                        "IDX image header")
    magic, count, rows, cols = struct.unpack(">IIII", data[:IMAGES_HEADER_BYTES])
    if magic != IMAGES_MAGIC:
        raise DataError(f"{path}: magic number {magic}, expected {IMAGES_MAGIC} (IDX images)"
                        + (": this is a label file" if magic == LABELS_MAGIC else ""))
    if (rows, cols) != (ROWS, COLS):
        raise DataError(f"{path}: images are {rows}x{cols}, expected {ROWS}x{COLS}")
    want = IMAGES_HEADER_BYTES + count * rows * cols
    if len(data) < want:
        raise DataError(f"{path}: truncated: header declares {count} images "
                        f"({want} bytes), the file holds {len(data)} bytes")
    if len(data) > want:
        raise DataError(f"{path}: {len(data) - want} bytes after the {count} images "
                        "the header declares")
    return np.frombuffer(data, np.uint8, offset=IMAGES_HEADER_BYTES).reshape(count, rows, cols)


def read_idx_labels(path: Path) -> np.ndarray:
    """Read an IDX label file (.gz) into uint8 (count,), each 0-9.

    Raises:
        DataError: missing, not gzip, truncated, wrong magic, extra bytes, label > 9.
    """
    data = _gunzip(path)
    if len(data) < LABELS_HEADER_BYTES:
        raise DataError(f"{path}: truncated: {len(data)} bytes, shorter than the 8-byte "
                        "IDX label header")
    magic, count = struct.unpack(">II", data[:LABELS_HEADER_BYTES])
    if magic != LABELS_MAGIC:
        raise DataError(f"{path}: magic number {magic}, expected {LABELS_MAGIC} (IDX labels)"
                        + (": this is an image file" if magic == IMAGES_MAGIC else ""))
    want = LABELS_HEADER_BYTES + count
    if len(data) < want:
        raise DataError(f"{path}: truncated: header declares {count} labels, "
                        f"the file holds {len(data) - LABELS_HEADER_BYTES}")
    if len(data) > want:
        raise DataError(f"{path}: {len(data) - want} bytes after the {count} labels "
                        "the header declares")
    labels = np.frombuffer(data, np.uint8, offset=LABELS_HEADER_BYTES)
    _check_label_range(labels, path)
    return labels


def _check_label_range(labels: np.ndarray, where: object) -> None:
    bad = np.flatnonzero(labels >= NUM_CLASSES)
    if bad.size:
        raise DataError(f"{where}: label {int(labels[bad[0]])} at index {int(bad[0])} is "
                        f"outside 0-{NUM_CLASSES - 1} ({bad.size} such labels)")


def _check_pair(images: np.ndarray, labels: np.ndarray, images_name: object,
                labels_name: object) -> None:
    if len(images) != len(labels):
        raise DataError(f"{labels_name}: {len(labels)} labels for {len(images)} images in "
                        f"{images_name}: the counts must match")
    if len(images) == 0:
        raise DataError(f"{images_name}: holds no images")


def read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read Keras' mnist.npz (arrays x_train, y_train, x_test, y_test).

    Raises:
        DataError: missing, not a zip/npz, a missing array, wrong shape or dtype,
            mismatched counts, labels outside 0-9.
    """
    raw = _read(path)
    # np.load takes anything that is not a zip for a pickle and blames pickling.
    if raw[:4] != b"PK\x03\x04":
        raise DataError(f"{path}: not a .npz (zip) archive: starts with {raw[:16]!r}"
                        f"{_html_hint(raw, '.npz')}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test") if k in npz}
    except Exception as err:  # np.load raises several types for non-npz input
        raise DataError(f"{path}: not a valid .npz archive: {err}") from None
    for key in ("x_train", "y_train", "x_test", "y_test"):
        if key not in arrays:
            raise DataError(f"{path}: array {key!r} is missing")
    for key in ("x_train", "x_test"):
        arr = arrays[key]
        if arr.ndim != 3 or arr.shape[1:] != (ROWS, COLS) or arr.dtype != np.uint8:
            raise DataError(f"{path}: {key} has shape {arr.shape} dtype {arr.dtype}, "
                            f"expected (n, {ROWS}, {COLS}) uint8")
    for key in ("y_train", "y_test"):
        arr = arrays[key]
        if arr.ndim != 1 or arr.dtype.kind not in "ui":
            raise DataError(f"{path}: {key} has shape {arr.shape} dtype {arr.dtype}, "
                            "expected (n,) integers")
        if arr.size and arr.min() < 0:
            raise DataError(f"{path}: {key} has a negative label {int(arr.min())}")
        _check_label_range(arr, f"{path} {key}")
    for split in ("train", "test"):
        _check_pair(arrays[f"x_{split}"], arrays[f"y_{split}"], f"{path} x_{split}",
                    f"{path} y_{split}")
    return (arrays["x_train"], arrays["y_train"].astype(np.uint8), arrays["x_test"],
            arrays["y_test"].astype(np.uint8))


def data_format(data_dir: str | Path) -> str:
    """"idx" when any IDX file is present (then all four must be), else "npz" when
    mnist.npz is, else DataError listing what was looked for."""
    directory = Path(data_dir)
    if directory.exists() and not directory.is_dir():
        raise DataError(f"{directory}: data directory is a file, not a directory")
    if not directory.is_dir():
        raise DataError(f"{directory}: data directory does not exist")
    if any((directory / n).exists() for n in ALL_IDX_FILES):
        return "idx"
    if (directory / NPZ_FILE).exists():
        return "npz"
    raise DataError(f"{directory}: no MNIST data: expected the four IDX files "
                    f"({', '.join(ALL_IDX_FILES)}) or {NPZ_FILE}")


def load(data_dir: str | Path) -> Dataset:
    """Read and check the whole data set in ``data_dir`` (IDX files preferred over npz).

    Raises:
        DataError: naming the file and the fault, before any training starts.
    """
    directory = Path(data_dir)
    fmt = data_format(directory)
    if fmt == "npz":
        x_train, y_train, x_test, y_test = read_npz(directory / NPZ_FILE)
    else:
        arrays = {}
        for split, (images_name, labels_name) in IDX_FILES.items():
            images = read_idx_images(directory / images_name)
            labels = read_idx_labels(directory / labels_name)
            _check_pair(images, labels, directory / images_name, directory / labels_name)
            arrays[split] = (images, labels)
        (x_train, y_train), (x_test, y_test) = arrays["train"], arrays["test"]
    return Dataset(x_train, y_train, x_test, y_test, str(directory), fmt)


def make_dataset_fn(dataset: Dataset, batch_size: int, seed: int | None):
    """A ``dataset_fn(input_context)`` for tf.distribute: shuffled, repeated training batches.

    With IDX files each input pipeline reads the gzip files from the shared ``data_dir``
    itself (tf.data.FixedLengthRecordDataset), so workers read their own shard and
    nothing is shipped from the coordinator; with mnist.npz the arrays are embedded.

    ``seed`` None gives every input pipeline its own random order: ParameterServerStrategy
    traces ``dataset_fn`` once on the coordinator, so a fixed seed would make every worker
    see the same sequence.

    Yields (images float32 (batch, 28, 28, 1) in [0, 1], labels int32 (batch,)), forever;
    the caller decides how many steps make an epoch.
    """
    import tensorflow as tf  # imported here so data checks stay TensorFlow-free

    data_dir = Path(dataset.data_dir)
    fmt = dataset.fmt
    x_np, y_np = dataset.x_train, dataset.y_train

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        if fmt == "idx":
            images_name, labels_name = IDX_FILES["train"]
            images = tf.data.FixedLengthRecordDataset(
                str(data_dir / images_name), ROWS * COLS, header_bytes=IMAGES_HEADER_BYTES,
                compression_type="GZIP")
            labels = tf.data.FixedLengthRecordDataset(
                str(data_dir / labels_name), 1, header_bytes=LABELS_HEADER_BYTES,
                compression_type="GZIP")
            ds = tf.data.Dataset.zip((images, labels)).map(
                lambda x, y: (tf.reshape(tf.io.decode_raw(x, tf.uint8), (ROWS, COLS)),
                              tf.io.decode_raw(y, tf.uint8)[0]))
        else:
            ds = tf.data.Dataset.from_tensor_slices((x_np, y_np))
        shard_seed = seed
        if input_context is not None and input_context.num_input_pipelines > 1:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            if seed is not None:
                shard_seed = seed + input_context.input_pipeline_id
        ds = ds.map(lambda x, y: (tf.cast(x, tf.float32)[..., None] / 255.0, tf.cast(y, tf.int32)))
        ds = ds.cache().shuffle(10_000, seed=shard_seed).repeat()
        return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    return dataset_fn
