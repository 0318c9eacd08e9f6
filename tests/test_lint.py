"""The tree is linted as pyproject.toml's ``[tool.ruff.lint]`` says and formatted as
``[tool.ruff.format]`` says, with the ruff that requirements.txt pins (in ``.venv``, next to
this interpreter), and mypy type-checks what ``[tool.mypy]`` names. A failure prints the tool's
own findings: ``ruff check --fix .`` mends most lint findings, ``ruff format .`` rewrites the
files it names. Formatted, every module still keeps the house limits of
tests/test_house_rules.py (500 lines a file, 80 a function)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
MYPY = Path(sys.executable).with_name("mypy")


def test_ruff_check_finds_nothing():
    assert RUFF.is_file(), f"{RUFF} is missing: scripts/bootstrap.sh installs requirements.txt's ruff"
    proc = subprocess.run([str(RUFF), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, f"ruff check .:\n{proc.stdout}{proc.stderr}"


def test_ruff_format_finds_nothing():
    assert RUFF.is_file(), f"{RUFF} is missing: scripts/bootstrap.sh installs requirements.txt's ruff"
    proc = subprocess.run(
        [str(RUFF), "format", "--check", "."], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"ruff format --check .:\n{proc.stdout}{proc.stderr}"


def test_mypy_finds_nothing():
    """About 45 s the first time (it reads pulumi_kubernetes' types), a second or two after
    (.mypy_cache)."""
    assert MYPY.is_file(), f"{MYPY} is missing: scripts/bootstrap.sh installs requirements.txt's mypy"
    proc = subprocess.run([str(MYPY)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, f"mypy:\n{proc.stdout}{proc.stderr}"
