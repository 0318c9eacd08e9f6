"""trainer/evaluate.py's check of an export before it loads it, in process: the export loaded
is the one the run's result.json names, with exactly the files and SHA-256 digests recorded
there (or the tree digest given by --sha256), and anything else is refused with the file and
the expected digest. tests/trainer/test_export_run.py runs the same as real processes on a
real run's export."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trainer import evaluate
from trainer.flags import BUNDLED_DATA_DIR


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(a log dir holding export/3 and nothing else, its Export)."""
    import keras

    from trainer.model import build_model
    from trainer.training.export import export_model

    keras.utils.set_random_seed(3)
    log_dir = tmp_path_factory.mktemp("export")
    return log_dir, export_model(build_model("mlp", 0.5), log_dir, 3)


@pytest.fixture
def run(exported, tmp_path) -> Path:
    """A run directory: a copy of export/3 and the result.json the chief writes for it."""
    log_dir, paths = exported
    run_dir = tmp_path / "run"
    shutil.copytree(log_dir / "export", run_dir / "export")
    record = {
        "saved_model": paths.saved_model,
        "keras_model": paths.keras_model,
        "saved_model_files": paths.saved_model_files,
    }
    (run_dir / "result.json").write_text(json.dumps(record))
    return run_dir


def test_the_chief_records_every_file_s_sha256_and_both_sides_digest_alike(exported):
    from trainer.training.export import tree_digest

    log_dir, paths = exported
    version = log_dir / paths.saved_model
    files = sorted(p.relative_to(version).as_posix() for p in version.rglob("*") if p.is_file())
    assert list(paths.saved_model_files) == files
    assert {"saved_model.pb", "fingerprint.pb", "model.keras", "variables/variables.index"} <= set(files)
    for name, digest in paths.saved_model_files.items():
        assert digest == hashlib.sha256((version / name).read_bytes()).hexdigest(), name
    assert evaluate.tree_digest(paths.saved_model_files) == tree_digest(paths.saved_model_files)
    # The digest the docs give as a shell pipeline is the same.
    shell = subprocess.run(
        "find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum",
        shell=True,
        cwd=version,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout.split()[0] == tree_digest(paths.saved_model_files)


@pytest.mark.parametrize("given", ["run", "export", "export/3"])
def test_the_recorded_export_is_copied_once_verified(run, tmp_path, given):
    into = tmp_path / "private"
    into.mkdir()
    target = run if given == "run" else run / given
    version, said = evaluate.verified_export(target, into)
    assert version == run / "export" / "3"
    record = json.loads((run / "result.json").read_text())["saved_model_files"]
    assert said == (
        f"Verified: {len(record)} files of {version} by {run / 'result.json'}, "
        f"sha256 {evaluate.tree_digest(record)}"
    )
    for name in record:
        assert (into / name).read_bytes() == (version / name).read_bytes(), name


def test_a_planted_higher_version_is_neither_picked_nor_loaded(run, tmp_path):
    planted = run / "export" / "9"
    shutil.copytree(run / "export" / "3", planted)
    (planted / "saved_model.pb").write_bytes(b"planted")
    version, _ = evaluate.verified_export(run / "export", tmp_path)
    assert version.name == "3"
    with pytest.raises(
        evaluate.Refused, match=rf"{planted}: not the run's export: .*result.json names export/3"
    ):
        evaluate.verified_export(planted, tmp_path)


def test_a_changed_file_is_refused_naming_it_and_both_digests(run, tmp_path):
    data = next((run / "export" / "3" / "variables").glob("variables.data-*"))
    expected = hashlib.sha256(data.read_bytes()).hexdigest()
    data.write_bytes(data.read_bytes()[:-4] + b"\0\0\0\0")
    found = hashlib.sha256(data.read_bytes()).hexdigest()
    with pytest.raises(evaluate.Refused) as refused:
        evaluate.verified_export(run / "export", tmp_path)
    assert str(refused.value) == (
        f"{data}: sha256 {found}, but {run / 'result.json'} records {expected}: "
        "changed since the run's chief wrote it; not loaded"
    )


def test_an_added_missing_or_linked_file_is_refused(run, tmp_path):
    version = run / "export" / "3"
    (version / "assets" / "extra.txt").write_text("x")
    with pytest.raises(
        evaluate.Refused, match=r"assets/extra.txt: not one of the files .*result.json records"
    ):
        evaluate.verified_export(run, tmp_path)
    (version / "assets" / "extra.txt").unlink()
    keras_file = (version / "model.keras").read_bytes()
    (version / "model.keras").unlink()
    with pytest.raises(
        evaluate.Refused, match=r"model.keras: missing, though .*result.json records it \(sha256 "
    ):
        evaluate.verified_export(run, tmp_path)
    (tmp_path / "elsewhere.keras").write_bytes(keras_file)
    os.symlink(tmp_path / "elsewhere.keras", version / "model.keras")  # the right bytes, by a link
    with pytest.raises(evaluate.Refused, match=r"model.keras: a symbolic link, not the export's file"):
        evaluate.verified_export(run, tmp_path / "private")


def test_a_run_without_a_record_or_its_digests_is_refused(run, tmp_path):
    record = run / "result.json"
    older = {k: v for k, v in json.loads(record.read_text()).items() if k != "saved_model_files"}
    record.write_text(json.dumps(older))  # as a trainer before the digests wrote it
    with pytest.raises(evaluate.Refused, match=r"records no digests of export/3's files .* Remove "):
        evaluate.verified_export(run / "export", tmp_path)
    record.unlink()
    with pytest.raises(evaluate.Refused, match=r"result.json: missing: the run's record names the export"):
        evaluate.verified_export(run / "export", tmp_path)


def test_sha256_checks_a_copied_version_directory_without_a_record(run, tmp_path):
    record = json.loads((run / "result.json").read_text())["saved_model_files"]
    copy = tmp_path / "copy"
    shutil.copytree(run / "export" / "3", copy)
    digest = evaluate.tree_digest(record)
    with pytest.raises(evaluate.Refused, match=rf"{copy}: not in a run's export directory .* pass --sha256"):
        evaluate.verified_export(copy, tmp_path / "a")
    assert evaluate.verified_export(copy, tmp_path / "a", digest)[0] == copy
    (copy / "fingerprint.pb").write_bytes(b"other")
    with pytest.raises(
        evaluate.Refused, match=rf"{copy}: its {len(record)} files give sha256 [0-9a-f]{{64}}, but"
    ):
        evaluate.verified_export(copy, tmp_path / "b", digest)


def test_main_refuses_with_exit_3_before_loading_anything(run, capsys):
    (run / "export" / "3" / "saved_model.pb").write_bytes(b"planted")
    assert evaluate.main([str(run / "export"), "--data_dir", str(BUNDLED_DATA_DIR)]) == evaluate.EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.startswith(f"refused: {run / 'export' / '3' / 'saved_model.pb'}: sha256 "), err
    with pytest.raises(SystemExit) as bad:
        evaluate.main([str(run), "--data_dir", str(BUNDLED_DATA_DIR), "--sha256", "xyz"])
    assert bad.value.code == 2
    assert "--sha256: 'xyz' is not a SHA-256: 64 hex digits" in capsys.readouterr().err
