"""trainer/training/export.py and trainer/evaluate.py in process: the export's layout and
signatures, its idempotence, and the evaluator's own reading of the data and the export."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trainer_test_helpers import idx_images, idx_labels, write_gz

from trainer import evaluate
from trainer.contract import progress


@pytest.fixture(scope="module")
def model():
    import keras

    from trainer.model import build_model

    keras.utils.set_random_seed(5)
    return build_model("convnet", 0.5)


@pytest.fixture(scope="module")
def exported(model, tmp_path_factory):
    from trainer.training.export import export_model

    log_dir = tmp_path_factory.mktemp("export")
    return log_dir, export_model(model, log_dir, 3)


def _pixels(n: int = 7) -> np.ndarray:
    return np.random.default_rng(11).random((n, 28, 28), dtype=np.float32)


def test_the_export_is_one_version_directory_with_the_savedmodel_and_the_keras_file(exported):
    log_dir, paths = exported
    assert (paths.saved_model, paths.keras_model) == ("export/3", "export/3/model.keras")
    version = log_dir / progress.EXPORT_SUBDIR / "3"
    assert sorted(p.name for p in version.iterdir()) == [
        "assets",
        "fingerprint.pb",
        "model.keras",
        "saved_model.pb",
        "variables",
    ]
    # nothing else under export/: no temporary directory left
    assert [p.name for p in (log_dir / progress.EXPORT_SUBDIR).iterdir()] == ["3"]


def test_the_signatures_take_784_or_28x28_pixels_and_return_the_softmax(model, exported):
    import tensorflow as tf

    log_dir, paths = exported
    loaded = tf.saved_model.load(str(log_dir / paths.saved_model))
    assert set(loaded.signatures) == {"serving_default", "images"}
    pixels = _pixels()
    logits = model(pixels[..., None], training=False).numpy()
    want = tf.nn.softmax(logits).numpy()
    by_row = loaded.signatures["serving_default"](pixels=tf.constant(pixels.reshape(7, 784)))
    by_image = loaded.signatures["images"](images=tf.constant(pixels))
    for out in (by_row, by_image):
        assert set(out) == {"probabilities", "classes"}
        np.testing.assert_allclose(out["probabilities"].numpy(), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(out["classes"].numpy(), logits.argmax(1))
    np.testing.assert_allclose(want.sum(1), 1.0, rtol=1e-5)


def test_the_keras_file_loads_without_the_trainer_and_gives_the_probabilities(model, exported):
    import keras
    import tensorflow as tf

    log_dir, paths = exported
    loaded = keras.saving.load_model(log_dir / paths.keras_model)
    assert loaded.input_shape == (None, 28, 28)
    pixels = _pixels()
    want = tf.nn.softmax(model(pixels[..., None], training=False)).numpy()
    np.testing.assert_allclose(loaded(pixels).numpy(), want, rtol=1e-5, atol=1e-7)


def _tmp_name(version: int, pid: int, boot: str | None = None) -> str:
    """A temporary export directory's name as a process ``pid`` of this machine's boot and
    pid namespace (or of boot ``boot``) writes it."""
    here = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    pidns = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    return f".{version}.tmp-{boot or here}-{pidns}-{pid}"


def _half_export(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"half")
    return path


def test_an_existing_version_is_kept_and_nothing_else_written(model, tmp_path):
    from trainer.training.export import export_model

    first = export_model(model, tmp_path, 1)
    pb = tmp_path / first.saved_model / "saved_model.pb"
    before = (pb.stat().st_ino, pb.stat().st_mtime_ns)
    again = export_model(model, tmp_path, 1)
    assert (again.saved_model, again.keras_model) == (first.saved_model, first.keras_model)
    # Not written by this call: no digests it could vouch for.
    assert first.saved_model_files and not again.saved_model_files
    assert (pb.stat().st_ino, pb.stat().st_mtime_ns) == before
    export_model(model, tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["1", "2"]


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="Linux's /proc names the pid namespace")
def test_another_process_s_export_in_progress_is_left_and_a_dead_one_s_removed(model, tmp_path):
    """Two chiefs exporting into one export/ at once: neither removes the other's temporary
    directory; one left by a process that has ended (same boot, same pid namespace) goes."""
    from trainer.training.export import export_model

    root = tmp_path / "export"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        live = _half_export(root, _tmp_name(2, other.pid))
        elsewhere = _half_export(root, _tmp_name(2, other.pid, boot="0" * 8 + "-1111-2222-3333-" + "4" * 12))
        older_form = _half_export(root, ".2.tmp-99999")  # no owner: cannot be proved dead
        export_model(model, tmp_path, 1)
        for kept in (live, elsewhere, older_form):
            assert (kept / "saved_model.pb").read_bytes() == b"half", kept
    finally:
        other.kill()
        other.wait()
    export_model(model, tmp_path, 3)  # the pid is gone now (reaped above)
    assert not live.exists()
    assert sorted(p.name for p in root.iterdir()) == sorted(["1", "3", elsewhere.name, older_form.name])


def test_version_0_is_refused(model, tmp_path):
    from trainer.training.export import export_model

    with pytest.raises(ValueError, match="export version 0 is invalid: must be an integer >= 1"):
        export_model(model, tmp_path, 0)
    assert not list(tmp_path.iterdir())


def test_the_evaluator_reads_gzip_and_raw_idx_like_the_trainer(tmp_path):
    from trainer import data as data_mod

    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (30, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 30, dtype=np.uint8)
    write_gz(tmp_path / "t10k-images-idx3-ubyte.gz", idx_images(images))
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_labels(labels))  # raw
    x, y = evaluate.read_test_set(tmp_path)
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, labels)
    shipped = Path(__file__).resolve().parents[2] / "trainer" / "data" / "mnist-10k"
    x, y = evaluate.read_test_set(shipped)
    dataset = data_mod.load(shipped)
    np.testing.assert_array_equal(x, dataset.x_test)
    np.testing.assert_array_equal(y, dataset.y_test)


def test_the_evaluator_names_a_bad_file_and_exits_2(tmp_path, capsys):
    # a label file under the images' name (20 labels: longer than the images' header)
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_labels(np.zeros(20, np.uint8))))
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_labels(np.zeros(3, np.uint8))))
    with pytest.raises(evaluate.EvaluateError, match="t10k-images-idx3-ubyte.gz: not IDX images"):
        evaluate.read_test_set(tmp_path)
    assert evaluate.main([str(tmp_path), "--data_dir", str(tmp_path)]) == 2
    assert "t10k-images-idx3-ubyte.gz: not IDX images" in capsys.readouterr().err


def test_several_run_dirs_need_an_output(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.report", str(tmp_path), str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "several RUN_DIRs: say where the picture goes" in proc.stderr
    assert not list(tmp_path.iterdir())
