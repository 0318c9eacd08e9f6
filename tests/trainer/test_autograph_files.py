"""trainer.autograph_files: clean-up skipped by os._exit."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from trainer_test_helpers import write_mnist

from trainer import autograph_files

REPO = Path(__file__).resolve().parents[2]


def test_autograph_files_of_this_process_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ours = tmp_path / f"{autograph_files.AUTOGRAPH_PREFIX}abc123.py"
    ours.write_text("x = 1\n")
    elsewhere = tmp_path / "sub" / f"{autograph_files.AUTOGRAPH_PREFIX}zzz.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("x = 1\n")
    other = tmp_path / "not_autograph.py"
    other.write_text("x = 1\n")
    for name, path in (
        ("__autograph_generated_fileabc123", ours),
        ("__autograph_generated_filezzz", elsewhere),
        ("not_autograph", other),
    ):
        module = types.ModuleType(name)
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
    assert autograph_files.remove_autograph_files() == 1
    assert not ours.exists() and elsewhere.exists() and other.exists()


@pytest.mark.slow
def test_a_training_run_leaves_no_autograph_files(tmp_path):
    write_mnist(tmp_path / "data", n_train=80, n_test=20)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--data_dir",
            str(tmp_path / "data"),
            "--log_dir",
            str(tmp_path / "logs"),
            "--epochs",
            "1",
            "--batch_size",
            "20",
        ],
        cwd=REPO,
        env=dict(os.environ, TMPDIR=str(tmp), TF_CONFIG=""),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout.splitlines()
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith(autograph_files.AUTOGRAPH_PREFIX)) == []
