"""Data checks: every fault in the data (a missing or truncated file, a wrong magic number or
size, counts that disagree, a label out of range) stops the task with its own exact error."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trainer_test_helpers import idx_images, idx_labels, write_gz, write_mnist

from trainer import data
from trainer.flags import BUNDLED_DATA_DIR

REPO = Path(__file__).resolve().parents[2]


def test_bundled_sample_reads_with_the_readme_counts():
    ds = data.load(BUNDLED_DATA_DIR)
    assert ds.x_train.shape == (8000, 28, 28) and ds.x_test.shape == (2000, 28, 28)
    assert ds.fmt == "idx"
    # Class counts from trainer/data/mnist-10k/README.md.
    assert np.bincount(ds.y_train).tolist() == [814, 896, 790, 832, 791, 688, 809, 856, 751, 773]
    assert np.bincount(ds.y_test).tolist() == [187, 231, 201, 200, 189, 175, 205, 214, 193, 205]


def test_missing_file(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == f"{tmp_path / 't10k-labels-idx1-ubyte.gz'}: file is missing"


def test_no_data_at_all(tmp_path):
    with pytest.raises(
        data.DataError,
        match=r"no MNIST data: expected the four IDX files .* "
        r"or mnist\.npz",
    ):
        data.load(tmp_path)


def test_html_page_saved_as_gz(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(b"<!DOCTYPE html><html><body>Not Found</body></html>")
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{path}: not a gzip file: starts with b'<!DOCTYPE html><'"
        " (looks like an HTML page saved as .gz: a failed download?)"
    )


def test_truncated_gzip(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{path}: truncated gzip stream ({len(raw) // 2} bytes): "
        "the file was cut short, download or copy it again"
    )


def test_truncated_images_inside_a_valid_gzip(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(path.read_bytes())
    write_gz(path, raw[:-100])
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{path}: truncated: header declares 80 images "
        f"({16 + 80 * 784} bytes), the file holds {16 + 80 * 784 - 100} bytes"
    )


def test_7999_labels_for_8000_images(tmp_path):
    rng = np.random.default_rng(1)
    write_mnist(tmp_path, n_train=8000, train_labels=rng.integers(0, 10, 7999))
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'train-labels-idx1-ubyte.gz'}: 7999 labels for 8000 images in "
        f"{tmp_path / 'train-images-idx3-ubyte.gz'}: the counts must match"
    )


def test_label_10(tmp_path):
    labels = np.zeros(80, np.uint8)
    labels[17] = 10
    write_mnist(tmp_path, train_labels=labels)
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'train-labels-idx1-ubyte.gz'}: label 10 at index 17 is outside 0-9 (1 such labels)"
    )


def test_wrong_magic_label_file_as_images(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    write_gz(path, idx_labels(np.zeros(20)))
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (f"{path}: magic number 2049, expected 2051 (IDX images): this is a label file")


def test_wrong_image_size(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    write_gz(path, idx_images(np.zeros((80, 32, 32))))
    with pytest.raises(data.DataError, match=r"images are 32x32, expected 28x28"):
        data.load(tmp_path)


def test_trailing_bytes(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    write_gz(path, idx_labels(np.zeros(20)) + b"\0\0\0")
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == f"{path}: 3 bytes after the 20 labels the header declares"


def _npz(path, **overrides):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (30, 28, 28)).astype(np.uint8),
        "y_train": rng.integers(0, 10, 30).astype(np.uint8),
        "x_test": rng.integers(0, 256, (10, 28, 28)).astype(np.uint8),
        "y_test": rng.integers(0, 10, 10).astype(np.uint8),
    }
    arrays.update(overrides)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})


def test_npz_reads(tmp_path):
    _npz(tmp_path / "mnist.npz")
    ds = data.load(tmp_path)
    assert ds.fmt == "npz" and ds.x_train.shape == (30, 28, 28) and len(ds.y_test) == 10


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"y_test": None}, "array 'y_test' is missing"),
        (
            {"y_train": np.full(30, 10, np.uint8)},
            "y_train: label 10 at index 0 is outside 0-9 (30 such labels)",
        ),
        ({"y_train": np.zeros(29, np.uint8)}, "y_train: 29 labels for 30 images in"),
        (
            {"x_test": np.zeros((10, 28, 28), np.float32)},
            "x_test has shape (10, 28, 28) dtype float32, expected (n, 28, 28) uint8",
        ),
    ],
)
def test_npz_faults(tmp_path, overrides, message):
    _npz(tmp_path / "mnist.npz", **overrides)
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value).startswith(str(tmp_path / "mnist.npz"))
    assert message in str(err.value)


def test_trainer_exits_3_on_bad_data_before_training(tmp_path):
    labels = np.zeros(80, np.uint8)
    labels[3] = 10
    write_mnist(tmp_path / "data", train_labels=labels)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--data_dir",
            str(tmp_path / "data"),
            "--log_dir",
            str(tmp_path / "log"),
            "--epochs",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "TF_CONFIG"},
    )
    assert proc.returncode == 3, proc.stderr
    assert "label 10 at index 3 is outside 0-9" in proc.stderr
    assert "train-labels-idx1-ubyte.gz" in proc.stderr
    assert not (tmp_path / "log" / "checkpoints").exists()


def test_data_dir_that_is_a_file(tmp_path):
    (tmp_path / "mnist").write_text("x")
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path / "mnist")
    assert str(err.value) == f"{tmp_path / 'mnist'}: data directory is a file, not a directory"


def test_idx_name_that_is_a_directory(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.unlink()
    path.mkdir()
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == f"{path}: is a directory, not a file"


def test_empty_gz_file(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(b"")
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == f"{path}: empty file (0 bytes): the download or copy failed"


def test_html_page_saved_as_npz(tmp_path):
    path = tmp_path / "mnist.npz"
    path.write_bytes(b"<!DOCTYPE html><html><body>Not Found</body></html>")
    with pytest.raises(data.DataError) as err:
        data.load(tmp_path)
    assert str(err.value) == (
        f"{path}: not a .npz (zip) archive: starts with b'<!DOCTYPE html><'"
        " (looks like an HTML page saved as .npz: a failed download?)"
    )


def test_raw_uncompressed_files_read_like_the_gz_and_full_mnist_is_known(tmp_path):
    import gzip

    for name in data.ALL_IDX_FILES:
        (tmp_path / data.raw_name(name)).write_bytes(gzip.decompress((BUNDLED_DATA_DIR / name).read_bytes()))
    raw, gz = data.load(tmp_path), data.load(BUNDLED_DATA_DIR)
    assert (raw.x_train == gz.x_train).all() and (raw.y_test == gz.y_test).all()
    assert raw.content_sha256 == gz.content_sha256 and raw.known_as == "mnist-10k"
    assert (
        data.load(tmp_path / ".." / tmp_path.name).paths["train-images-idx3-ubyte.gz"].name
        == "train-images-idx3-ubyte"
    )
    readme = REPO / ".." / "shared" / "data" / "mnist-full" / "README.md"
    if readme.is_file():  # the digests listed for the whole MNIST are the ones known
        for name in data.ALL_IDX_FILES:
            (digest,) = [d for d, what in data.KNOWN_IDX_SHA256[name].items() if what == "mnist"]
            assert digest in readme.read_text()


def test_random_shift_moves_each_image_by_at_most_the_shift_and_keeps_its_pixels():
    import tensorflow as tf

    images = np.zeros((200, 28, 28, 1), np.float32)
    images[:, 10:14, 12:15, 0] = np.linspace(0.1, 1.0, 12).reshape(4, 3)  # a 4x3 patch
    tf.random.set_seed(7)
    moved = data.random_shift(tf.constant(images), 2).numpy()
    assert moved.shape == images.shape
    offsets = set()
    for image in moved[..., 0]:
        rows, cols = np.nonzero(image)
        dy, dx = rows.min() - 10, cols.min() - 12
        assert -2 <= dy <= 2 and -2 <= dx <= 2
        # The same patch, pixel for pixel, just moved.
        np.testing.assert_array_equal(image[10 + dy : 14 + dy, 12 + dx : 15 + dx], images[0, 10:14, 12:15, 0])
        assert image.sum() == pytest.approx(images[0].sum())
        offsets.add((int(dy), int(dx)))
    assert len(offsets) == 25  # every offset from -2 to 2 in both directions occurs


def test_augmented_training_batches_are_the_plain_ones_each_shifted(tmp_path):
    write_mnist(tmp_path, n_train=64, n_test=8)
    dataset = data.load(tmp_path)
    plain_x, plain_y = next(iter(data.make_dataset_fn(dataset, 64, seed=1)()))
    moved_x, moved_y = next(iter(data.make_dataset_fn(dataset, 64, seed=1, augment_shift=3)()))
    np.testing.assert_array_equal(plain_y.numpy(), moved_y.numpy())  # the same examples
    padded = np.pad(plain_x.numpy()[..., 0], ((0, 0), (3, 3), (3, 3)))
    shifts = []
    for i, image in enumerate(moved_x.numpy()[..., 0]):
        # The crop of the zero-padded plain image that this one is, as (dy, dx).
        found = [
            (dy - 3, dx - 3)
            for dy in range(7)
            for dx in range(7)
            if np.array_equal(padded[i, dy : dy + 28, dx : dx + 28], image)
        ]
        assert found, f"example {i} is not a shift of at most 3 pixels of its plain image"
        shifts.append(found[0])
    assert len(set(shifts)) > 10  # each example has its own offset
