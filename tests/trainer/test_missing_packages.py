"""A Python without the trainer's packages: the launcher and a task fail once, with one line
naming the Python, the module and the fix, and exit 2; nothing is restarted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from trainer.contract.exit_codes import EXIT_MISSING_PACKAGES, PERMANENT_EXIT_CODES

REPO = Path(__file__).resolve().parents[2]


def _fix(python: str, module: str, why: str, command: str) -> str:
    return (
        f"error: {python} cannot import {module} ({why}), which the trainer needs: run it "
        f"with the project's virtual environment, `.venv/bin/{command} ...` from the "
        "repository root (`bash scripts/bootstrap.sh` creates .venv), or install "
        "trainer/requirements.txt into this Python"
    )


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """The interpreter of a new virtual environment with no packages: the system Python a
    newcomer runs the quick start with."""
    root = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = str(root / "bin" / "python")
    probe = subprocess.run([python, "-c", "import numpy"], capture_output=True, text=True)
    assert probe.returncode == 1 and "No module named 'numpy'" in probe.stderr
    return python


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "PYTHONPATH")}


def test_the_launcher_says_once_which_package_is_missing_and_starts_nothing(bare_python, tmp_path):
    log_dir = tmp_path / "run"
    proc = subprocess.run(
        [bare_python, "-m", "trainer.local", "--epochs", "1", "--log_dir", str(log_dir)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == EXIT_MISSING_PACKAGES == 2
    assert EXIT_MISSING_PACKAGES in PERMANENT_EXIT_CODES
    assert proc.stderr.splitlines() == [
        _fix(bare_python, "numpy", "No module named 'numpy'", "python -m trainer.local")
    ]
    assert proc.stdout == ""  # no cluster spec, no task started
    assert not log_dir.exists()


def test_the_launcher_s_help_needs_no_package(bare_python):
    proc = subprocess.run(
        [bare_python, "-m", "trainer.local", "--help"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m trainer.local")


def test_a_task_says_once_which_package_is_missing(bare_python, tmp_path):
    proc = subprocess.run(
        [bare_python, "-m", "trainer", "--log_dir", str(tmp_path / "run")],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        _fix(bare_python, "numpy", "No module named 'numpy'", "python -m trainer")
    ]


def test_tasks_whose_tensorflow_import_fails_are_not_restarted(tmp_path):
    # A TensorFlow that is found but cannot be imported (a broken install): the launcher's
    # look-up passes, so every task meets the error itself, says so once and exits 2, and the
    # launcher stops the run at the first such exit instead of restarting anyone.
    shim = tmp_path / "shim" / "tensorflow"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tensorflow.python'\", name='tensorflow.python')\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.local",
            "--epochs",
            "1",
            "--log_dir",
            str(tmp_path / "run"),
            "--backoff_limit",
            "6",
        ],
        cwd=REPO,
        env={**_env(), "PYTHONPATH": str(tmp_path / "shim")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout.splitlines()
    error = _fix(
        sys.executable, "tensorflow.python", "No module named 'tensorflow.python'", "python -m trainer"
    )
    reported = [line.split("] ", 1)[0] + "]" for line in out if line.endswith(error)]
    assert reported and len(reported) == len(set(reported)), proc.stdout  # once per task
    assert [line for line in out if "restart" in line] == [
        next(
            line
            for line in out
            if line.endswith("exited with code 2 (bad flags, TF_CONFIG or packages): not restarting")
        )
    ]
    assert len([line for line in out if re.match(r"\[local\] started ", line)]) == 4
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "fork server: preloading failed (ModuleNotFoundError: No module named "
        "'tensorflow.python'); each task imports TensorFlow itself"
    ]
    assert proc.returncode != 0
