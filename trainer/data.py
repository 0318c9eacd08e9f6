"""Reading and checking MNIST-format data: the four IDX files (gzip or raw) or Keras' mnist.npz.

IDX format (http://yann.lecun.com/exdb/mnist/): big-endian header; images have magic
2051 (0x00000803) then count, rows, cols, then count*rows*cols uint8 pixels; labels have
magic 2049 (0x00000801) then count, then count uint8 labels. Fashion-MNIST uses the same
format and file names. Each IDX file may be gzip (``train-images-idx3-ubyte.gz``, as
published) or raw (``train-images-idx3-ubyte``, as unpacked); MNIST is recognised by the
SHA-256 of the decompressed bytes (KNOWN_IDX_SHA256), so any faithful copy is.
"""

from __future__ import annotations

import gzip
import hashlib
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
GZIP_MAGIC = b"\x1f\x8b"

#: Standard (.gz) file name -> {SHA-256 of the decompressed IDX bytes: data set}. The same
#: digest holds for the upstream .gz, any recompressed copy and the raw file. Sources: the
#: whole MNIST's four files as published (its train-images digest is the one published for
#: MNIST) and the bundled sample (trainer/data/mnist-10k, decompressed here).
KNOWN_IDX_SHA256: dict[str, dict[str, str]] = {
    "train-images-idx3-ubyte.gz": {
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db": "mnist",
        "0aa6ed34a4a1c000cbb044b491b0b7a027e42524d5f37a8609ea6e037829c2d2": "mnist-10k",
    },
    "train-labels-idx1-ubyte.gz": {
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5": "mnist",
        "dd0eb093641a01b5bb093fa6d27e613a8e3f7a23faad556f130ec59c78141486": "mnist-10k",
    },
    "t10k-images-idx3-ubyte.gz": {
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7": "mnist",
        "9e18517fc83a5d79fd4ab0a8e3bc7edf4a3867cd1ad3066f38e01d3b464ac013": "mnist-10k",
    },
    "t10k-labels-idx1-ubyte.gz": {
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2": "mnist",
        "4722d221e5d9a92b904fdbc43daba8cb1ad9207caf26c141efc31a76efac5d3a": "mnist-10k",
    },
}


def raw_name(name: str) -> str:
    """The uncompressed file name of a standard IDX name (``...-ubyte.gz`` -> ``...-ubyte``)."""
    return name[:-3] if name.endswith(".gz") else name


def idx_path(directory: str | Path, name: str) -> Path:
    """Where the standard IDX file ``name`` (a .gz name) is in ``directory``: the .gz file
    when present, else the raw file when present, else the .gz path (reported missing)."""
    directory = Path(directory)
    if (directory / name).exists() or not (directory / raw_name(name)).exists():
        return directory / name
    return directory / raw_name(name)


def known_idx_set(name: str, content_sha256: str) -> str | None:
    """The data set whose ``name`` file has this SHA-256 of its decompressed bytes, or None."""
    return KNOWN_IDX_SHA256.get(name, {}).get(content_sha256)


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
    #: IDX only: standard (.gz) name -> the file read (the .gz or the raw file).
    paths: dict[str, Path] | None = None
    #: IDX only: standard name -> SHA-256 of the decompressed bytes.
    content_sha256: dict[str, str] | None = None

    @property
    def known_as(self) -> str | None:
        """The data set all four IDX files are known copies of (e.g. "mnist"), else None."""
        if not self.content_sha256:
            return None
        sets = {known_idx_set(n, d) for n, d in self.content_sha256.items()}
        return sets.pop() if len(sets) == 1 and None not in sets else None


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
    """The IDX bytes of ``path``: decompressed for a .gz name (which must be gzip), as
    read for a raw name (decompressed too if it holds gzip data after all)."""
    raw = _read(path)
    if not path.name.endswith(".gz") and raw[:2] != GZIP_MAGIC:
        return raw
    if raw[:2] != GZIP_MAGIC:
        raise DataError(f"{path}: not a gzip file: starts with {raw[:16]!r}{_html_hint(raw, '.gz')}")
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise DataError(
            f"{path}: truncated gzip stream ({len(raw)} bytes): "
            "the file was cut short, download or copy it again"
        ) from None
    except (OSError, zlib.error) as err:
        raise DataError(f"{path}: corrupt gzip data: {err}") from None


def read_idx_images(path: Path, data: bytes | None = None) -> np.ndarray:
    """Read an IDX image file (.gz or raw) into uint8 (count, 28, 28); ``data``: its IDX
    bytes when already read.

    Raises:
        DataError: missing, not gzip, truncated, wrong magic, wrong size, extra bytes.
    """
    data = _gunzip(path) if data is None else data
    if len(data) < IMAGES_HEADER_BYTES:
        raise DataError(f"{path}: truncated: {len(data)} bytes, shorter than the 16-byte IDX image header")
    magic, count, rows, cols = struct.unpack(">IIII", data[:IMAGES_HEADER_BYTES])
    if magic != IMAGES_MAGIC:
        raise DataError(
            f"{path}: magic number {magic}, expected {IMAGES_MAGIC} (IDX images)"
            + (": this is a label file" if magic == LABELS_MAGIC else "")
        )
    if (rows, cols) != (ROWS, COLS):
        raise DataError(f"{path}: images are {rows}x{cols}, expected {ROWS}x{COLS}")
    want = IMAGES_HEADER_BYTES + count * rows * cols
    if len(data) < want:
        raise DataError(
            f"{path}: truncated: header declares {count} images "
            f"({want} bytes), the file holds {len(data)} bytes"
        )
    if len(data) > want:
        raise DataError(f"{path}: {len(data) - want} bytes after the {count} images the header declares")
    return np.frombuffer(data, np.uint8, offset=IMAGES_HEADER_BYTES).reshape(count, rows, cols)


def read_idx_labels(path: Path, data: bytes | None = None) -> np.ndarray:
    """Read an IDX label file (.gz or raw) into uint8 (count,), each 0-9; ``data``: its IDX
    bytes when already read.

    Raises:
        DataError: missing, not gzip, truncated, wrong magic, extra bytes, label > 9.
    """
    data = _gunzip(path) if data is None else data
    if len(data) < LABELS_HEADER_BYTES:
        raise DataError(f"{path}: truncated: {len(data)} bytes, shorter than the 8-byte IDX label header")
    magic, count = struct.unpack(">II", data[:LABELS_HEADER_BYTES])
    if magic != LABELS_MAGIC:
        raise DataError(
            f"{path}: magic number {magic}, expected {LABELS_MAGIC} (IDX labels)"
            + (": this is an image file" if magic == IMAGES_MAGIC else "")
        )
    want = LABELS_HEADER_BYTES + count
    if len(data) < want:
        raise DataError(
            f"{path}: truncated: header declares {count} labels, "
            f"the file holds {len(data) - LABELS_HEADER_BYTES}"
        )
    if len(data) > want:
        raise DataError(f"{path}: {len(data) - want} bytes after the {count} labels the header declares")
    labels = np.frombuffer(data, np.uint8, offset=LABELS_HEADER_BYTES)
    _check_label_range(labels, path)
    return labels


def _check_label_range(labels: np.ndarray, where: object) -> None:
    bad = np.flatnonzero(labels >= NUM_CLASSES)
    if bad.size:
        raise DataError(
            f"{where}: label {int(labels[bad[0]])} at index {int(bad[0])} is "
            f"outside 0-{NUM_CLASSES - 1} ({bad.size} such labels)"
        )


def _check_pair(images: np.ndarray, labels: np.ndarray, images_name: object, labels_name: object) -> None:
    if len(images) != len(labels):
        raise DataError(
            f"{labels_name}: {len(labels)} labels for {len(images)} images in "
            f"{images_name}: the counts must match"
        )
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
        raise DataError(
            f"{path}: not a .npz (zip) archive: starts with {raw[:16]!r}{_html_hint(raw, '.npz')}"
        )
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
            raise DataError(
                f"{path}: {key} has shape {arr.shape} dtype {arr.dtype}, expected (n, {ROWS}, {COLS}) uint8"
            )
    for key in ("y_train", "y_test"):
        arr = arrays[key]
        if arr.ndim != 1 or arr.dtype.kind not in "ui":
            raise DataError(f"{path}: {key} has shape {arr.shape} dtype {arr.dtype}, expected (n,) integers")
        if arr.size and arr.min() < 0:
            raise DataError(f"{path}: {key} has a negative label {int(arr.min())}")
        _check_label_range(arr, f"{path} {key}")
    for split in ("train", "test"):
        _check_pair(arrays[f"x_{split}"], arrays[f"y_{split}"], f"{path} x_{split}", f"{path} y_{split}")
    return (
        arrays["x_train"],
        arrays["y_train"].astype(np.uint8),
        arrays["x_test"],
        arrays["y_test"].astype(np.uint8),
    )


def data_format(data_dir: str | Path) -> str:
    """ "idx" when any IDX file is present (then all four must be), else "npz" when
    mnist.npz is, else DataError listing what was looked for."""
    directory = Path(data_dir)
    if directory.exists() and not directory.is_dir():
        raise DataError(f"{directory}: data directory is a file, not a directory")
    if not directory.is_dir():
        raise DataError(f"{directory}: data directory does not exist")
    if any((directory / n).exists() or (directory / raw_name(n)).exists() for n in ALL_IDX_FILES):
        return "idx"
    if (directory / NPZ_FILE).exists():
        return "npz"
    raise DataError(
        f"{directory}: no MNIST data: expected the four IDX files "
        f"({', '.join(ALL_IDX_FILES)}, gzip or raw without .gz) or {NPZ_FILE}"
    )


def load(data_dir: str | Path) -> Dataset:
    """Read and check the whole data set in ``data_dir`` (IDX files preferred over npz).

    Raises:
        DataError: naming the file and the fault, before any training starts.
    """
    directory = Path(data_dir)
    fmt = data_format(directory)
    if fmt == "npz":
        x_train, y_train, x_test, y_test = read_npz(directory / NPZ_FILE)
        return Dataset(x_train, y_train, x_test, y_test, str(directory), fmt)
    arrays, paths, digests = {}, {}, {}
    for split, (images_name, labels_name) in IDX_FILES.items():
        pair = []
        for name, reader in ((images_name, read_idx_images), (labels_name, read_idx_labels)):
            paths[name] = idx_path(directory, name)
            raw = _gunzip(paths[name])
            digests[name] = hashlib.sha256(raw).hexdigest()
            pair.append(reader(paths[name], raw))
        _check_pair(*pair, paths[images_name], paths[labels_name])
        arrays[split] = tuple(pair)
    (x_train, y_train), (x_test, y_test) = arrays["train"], arrays["test"]
    return Dataset(x_train, y_train, x_test, y_test, str(directory), fmt, paths, digests)


def content_sha256(path: Path) -> str:
    """SHA-256 of the IDX bytes of ``path`` (decompressed if gzip): the digest that
    KNOWN_IDX_SHA256 lists. Raises DataError as the readers do (missing, not gzip, ...)."""
    return hashlib.sha256(_gunzip(path)).hexdigest()


def make_dataset_fn(dataset: Dataset, batch_size: int, seed: int | None, augment_shift: int = 0):
    """A ``dataset_fn(input_context)`` for tf.distribute: shuffled, repeated training batches.

    With IDX files each input pipeline reads the files from the shared ``data_dir`` itself
    (whole files, decompressed in one op), so workers read their own shard and nothing is
    shipped from the coordinator; with mnist.npz the arrays are embedded. The shard stays
    in memory as one uint8 tensor and every batch is one gather of shuffled indices: no
    per-example work in the pipeline (per-example decode and map ops cost a worker about a
    tenth of its first epoch).

    ``seed`` None gives every input pipeline its own random order: ParameterServerStrategy
    traces ``dataset_fn`` once on the coordinator, so a fixed seed would make every worker
    see the same sequence.

    ``augment_shift`` > 0 moves each training image by a random whole number of pixels, up
    to that many in each direction, filling with background (zero padding, then a random
    28 x 28 crop: the usual MNIST augmentation); one op per batch.

    Yields (images float32 (batch, 28, 28, 1) in [0, 1], labels int32 (batch,)), forever,
    each pass over the shard in a new random order; the caller decides how many steps make
    an epoch.
    """
    import tensorflow as tf  # imported here so data checks stay TensorFlow-free

    fmt = dataset.fmt
    x_np, y_np = dataset.x_train, dataset.y_train
    sources = {}
    if fmt == "idx":
        for name, header in zip(IDX_FILES["train"], (IMAGES_HEADER_BYTES, LABELS_HEADER_BYTES)):
            path = dataset.paths[name] if dataset.paths else Path(dataset.data_dir) / name
            with open(path, "rb") as f:
                compressed = f.read(2) == GZIP_MAGIC
            sources[name] = (str(path), header, compressed)

    def read(name: str) -> tf.Tensor:
        path, header, compressed = sources[name]
        raw = tf.io.read_file(path)
        if compressed:
            raw = tf.io.decode_compressed(raw, compression_type="GZIP")
        return tf.io.decode_raw(raw, tf.uint8)[header:]

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        if fmt == "idx":
            images_name, labels_name = IDX_FILES["train"]
            images = tf.reshape(read(images_name), (-1, ROWS, COLS))
            labels = read(labels_name)
        else:
            images, labels = tf.constant(x_np), tf.constant(y_np)
        shard_seed = seed
        if input_context is not None and input_context.num_input_pipelines > 1:
            pipelines, pipeline = (input_context.num_input_pipelines, input_context.input_pipeline_id)
            images, labels = images[pipeline::pipelines], labels[pipeline::pipelines]
            if seed is not None:
                shard_seed = seed + pipeline
        count = tf.shape(labels, out_type=tf.int64)[0]

        def gather(indices):
            batch_images = tf.cast(tf.gather(images, indices), tf.float32)[..., None] / 255.0
            if augment_shift:
                batch_images = random_shift(batch_images, augment_shift)
            return batch_images, tf.cast(tf.gather(labels, indices), tf.int32)

        ds = (
            tf.data.Dataset.range(count)
            .shuffle(count, seed=shard_seed, reshuffle_each_iteration=True)
            .repeat()
        )
        return ds.batch(batch_size, drop_remainder=True).map(gather).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def random_shift(images, shift: int):
    """``images`` (batch, rows, cols, 1), each moved by its own random offset of -shift to
    +shift pixels in both directions, background-filled: a crop of the zero-padded batch at
    whole-pixel boxes (``crop_and_resize`` at exact pixel positions copies pixels)."""
    import tensorflow as tf

    n = tf.shape(images)[0]
    padded = tf.pad(images, [[0, 0], [shift, shift], [shift, shift], [0, 0]])
    side = tf.cast(tf.shape(padded)[1] - 1, tf.float32)
    offsets = tf.cast(tf.random.uniform((n, 2), 0, 2 * shift + 1, dtype=tf.int32), tf.float32)
    top_left = offsets / side
    bottom_right = (offsets + tf.constant([ROWS - 1, COLS - 1], tf.float32)) / side
    boxes = tf.concat([top_left, bottom_right], axis=1)
    return tf.image.crop_and_resize(padded, boxes, tf.range(n), (ROWS, COLS), method="nearest")
