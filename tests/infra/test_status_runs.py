"""``python -m infra.status --runs``: every run of the stack on the volume, read from its files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from infra import runs_scan, status

RUNS_DIR = "/data/runs/dev-default-mnist"
FIRST, SECOND, THIRD = "0a1b2c3d4e5f", "9f8e7d6c5b4a", "111111111111"


def _volume(tmp_path: Path) -> Path:
    """A volume with three runs of one stack: finished, running, stopped (oldest first)."""
    runs = tmp_path / "volume" / "runs" / "dev-default-mnist"
    first, second, third = runs / FIRST, runs / SECOND, runs / THIRD
    for run in (first, second, third):
        (run / "cluster").mkdir(parents=True)
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "ckpt-1.index").write_text("")
    (first / "checkpoints" / "ckpt-2.index").write_text("")
    (first / "result.json").write_text(
        json.dumps({"test_accuracy": 0.99123, "epochs": 2, "model": "convnet_fc_slim"})
    )
    (first / "cluster" / "done").write_text(f"run_id={FIRST}-aaaa\ntime=1\n")
    (first / "export").mkdir()
    (second / "cluster" / "heartbeat").write_text(f"run_id={SECOND}-bbbb\n")
    (third / "cluster" / "heartbeat").write_text(f"run_id={THIRD}-cccc\n")
    now = time.time()
    os.utime(third / "cluster" / "heartbeat", (now - 600, now - 600))
    for age, run in ((300, first), (200, second), (100, third)):
        os.utime(run, (now - age, now - age))
    return tmp_path / "volume"


def test_each_run_has_its_state_accuracy_and_id(tmp_path):
    runs = runs_scan.scan(str(_volume(tmp_path) / "runs" / "dev-default-mnist"))
    assert [
        (r["key"], r["state"], r["test_accuracy"], r["epochs"], r["checkpoints"], r["export"], r["run_id"])
        for r in runs
    ] == [
        (FIRST, "finished", 0.99123, 2, 2, True, f"{FIRST}-aaaa"),
        (SECOND, "running", None, None, 1, False, f"{SECOND}-bbbb"),
        (THIRD, "stopped", None, None, 1, False, f"{THIRD}-cccc"),
    ]
    assert runs_scan.scan(str(tmp_path / "nothing")) == []


def test_the_table_marks_the_current_configuration(tmp_path, capsys):
    volume = _volume(tmp_path)
    outputs = {"runsDir": RUNS_DIR, "runDir": f"{RUNS_DIR}/{SECOND}"}
    code = status.main(["--runs", "--volume", str(volume)], outputs=lambda: outputs)
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Runs in {RUNS_DIR} (* = the stack's current configuration):"
    assert lines[2].split() == [
        "RUN",
        "STATE",
        "ACCURACY",
        "EPOCHS",
        "MODEL",
        "CHECKPOINTS",
        "EXPORT",
        "RUN",
        "ID",
    ]
    assert lines[3].split() == [
        FIRST,
        "finished",
        "0.9912",
        "2",
        "convnet_fc_slim",
        "2",
        "yes",
        f"{FIRST}-aaaa",
    ]
    assert lines[4].split() == ["*", SECOND, "running", "-", "-", "-", "1", "no", f"{SECOND}-bbbb"]
    assert lines[5].split() == [THIRD, "stopped", "-", "-", "-", "1", "no", f"{THIRD}-cccc"]


class _ExecLocally:
    """A Kubectl whose exec runs the command here, as the TensorBoard pod would."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    def exec(self, target: str, argv: list[str]) -> str:
        self.targets.append(target)
        assert argv[:2] == ["python", "-c"]
        # A bare interpreter with no repository on its path, like the TensorBoard image.
        return subprocess.run(
            [sys.executable, "-I", *argv[1:]], capture_output=True, text=True, check=True, cwd="/", timeout=60
        ).stdout


def test_through_the_tensorboard_pod_the_scan_needs_only_python(tmp_path):
    volume = _volume(tmp_path)
    cluster = _ExecLocally()
    runs = status.read_runs(str(volume / "runs" / "dev-default-mnist"), "mnist", cluster, None)
    assert cluster.targets == ["deployment/mnist-tensorboard"]
    assert [(r["key"], r["state"]) for r in runs] == [
        (FIRST, "finished"),
        (SECOND, "running"),
        (THIRD, "stopped"),
    ]


def test_no_runs_dir_is_unreadable(capsys):
    assert status.main(["--runs", "--volume", "/nowhere"], outputs=lambda: {}) == status.EXIT_UNREADABLE
    assert "no runs directory: pass --runs_dir" in capsys.readouterr().err
