"""The program's reads of its own state (infra/stack_state.py) beside the engine's writes, on
the real CLI and a local file backend.

The engine rewrites the checkpoint after every step; a read of the file backend in between can
fail with ``failed to load checkpoint: EOF`` (5 of 300 raw reads did on a 2-core AMD EPYC). The
reader reads again after such a failure, so every one of the program's reads returns the state.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .engine import PulumiProject, Toolchain

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).resolve().parent / "state_reader"
READS = 200  # = READS in state_reader/__main__.py


def test_every_read_of_the_state_beside_the_engines_writes_succeeds(
    toolchain: Toolchain, pulumi_home: Path, tmp_path: Path
) -> None:
    project = PulumiProject(
        PROGRAM,
        tmp_path,
        toolchain,
        include=("Pulumi.yaml", "__main__.py"),
        pulumi_home=pulumi_home,
        venv=REPO / ".venv",
    )
    shutil.copytree(REPO / "infra", project.dir / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    project.init_stack("dev")
    up = project.pulumi("up", "--yes", "--skip-preview", check=False, timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    outputs = json.loads(project.pulumi("stack", "output", "--json").stdout)
    assert outputs["reads"] == READS
    # The state holds the Stack resource from the first read on, and never less than before.
    assert outputs["seen"][0] >= 1 and outputs["seen"] == sorted(outputs["seen"]), outputs["seen"]
