"""A damaged newest checkpoint is skipped for the next older one that reads
(trainer.training.checkpoints.TrainState.restore_latest): real checkpoints written by
TrainState, then truncated, altered or left without an index on disk; and a --log_dir whose
checkpoints are all damaged is a permanent error naming it. A file that the volume fails to
deliver is no damage (tests/trainer/test_checkpoint_io.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from trainer_test_helpers import checkpoint_args, checkpoint_state, small_run_command, write_two_checkpoints

from trainer.contract.exit_codes import EXIT_BAD_FLAGS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def two_checkpoints(tmp_path) -> tuple[Path, list[np.ndarray]]:
    """ckpt-1 at epoch 1 and ckpt-2 at epoch 2, with weights 1.0 and 2.0 everywhere."""
    return write_two_checkpoints(tmp_path)


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DATA, INDEX = "ckpt-2.data-00000-of-00001", "ckpt-2.index"
DAMAGES = {
    "truncated data": (DATA, _truncate, "Read less bytes than requested"),
    "altered data": (DATA, _flip_middle_byte, "Checksum does not match"),
    "truncated index": (INDEX, _truncate, "sstable"),
    "altered index": (INDEX, _flip_middle_byte, "checksum mismatch"),
    "no index": (INDEX, Path.unlink, "no ckpt-2.index beside its data files: a save or removal cut short"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_newest_checkpoint_is_skipped_for_the_older_one(two_checkpoints, damage, capsys):
    log_dir, values = two_checkpoints
    name, spoil, says = DAMAGES[damage]
    spoil(log_dir / "checkpoints" / name)
    state = checkpoint_state(log_dir)
    newest, older = (str(log_dir / "checkpoints" / f"ckpt-{n}") for n in (2, 1))
    assert state.restore_latest(checkpoint_args(log_dir)) == older == state.latest
    assert state.resume_point() == (1, 0)
    np.testing.assert_array_equal(state.weights.numpy(), values[0])
    err = capsys.readouterr().err
    assert f"warning: chief-0: checkpoint {newest} cannot be read (" in err, err
    assert says in err and "skipped: trying the next older one" in err, err
    assert older not in err  # the one restored is not called unreadable


def test_an_intact_newest_checkpoint_is_restored_without_a_warning(two_checkpoints, capsys):
    log_dir, values = two_checkpoints
    state = checkpoint_state(log_dir)
    assert state.restore_latest(checkpoint_args(log_dir)) == str(log_dir / "checkpoints" / "ckpt-2")
    assert state.resume_point() == (2, 0)
    np.testing.assert_array_equal(state.weights.numpy(), values[1])
    assert "warning" not in capsys.readouterr().err


def test_every_checkpoint_damaged_is_a_permanent_error_naming_the_directory(two_checkpoints):
    from trainer.training.checkpoints import CheckpointsUnreadable

    log_dir, _ = two_checkpoints
    checkpoints = log_dir / "checkpoints"
    _truncate(checkpoints / DATA)
    (checkpoints / "ckpt-1.index").unlink()
    with pytest.raises(CheckpointsUnreadable) as caught:
        checkpoint_state(log_dir).restore_latest(checkpoint_args(log_dir))
    message = str(caught.value)
    assert message.startswith(
        f"--log_dir {log_dir}: none of the 2 checkpoints in {checkpoints} "
        f"can be read ({checkpoints}/ckpt-2: Read less bytes than "
        f"requested; {checkpoints}/ckpt-1: "
    )
    assert message.endswith(
        f"): move {checkpoints} away to train this run again from epoch 1, or use a new --log_dir"
    )


def _train(log_dir: Path, epochs: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    return subprocess.run(
        small_run_command(log_dir, epochs),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.slow
def test_a_run_resumes_from_the_older_checkpoint_and_fails_for_good_without_one(tmp_path):
    """``python -m trainer`` itself: a truncated newest checkpoint costs an epoch, not the run;
    with every checkpoint damaged the task exits 2 with one line and no traceback."""
    first = _train(tmp_path, 2)
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoints = tmp_path / "checkpoints"
    _truncate(checkpoints / DATA)
    resumed = _train(tmp_path, 3)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (
        f"warning: chief-0: checkpoint {checkpoints}/ckpt-2 cannot be read (Read less bytes "
        "than requested); skipped: trying the next older one"
    ) in resumed.stderr
    assert (
        f"Restored checkpoint {checkpoints}/ckpt-1: 1 of 3 epochs done; continuing from epoch 2"
    ) in resumed.stdout, resumed.stdout
    assert "Epoch 3 of 3 done" in resumed.stdout
    for path in checkpoints.glob("ckpt-*.data-*"):
        _truncate(path)
    failed = _train(tmp_path, 4)
    assert failed.returncode == EXIT_BAD_FLAGS, failed.stderr[-3000:]
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: --log_dir {tmp_path}: none of the 3 checkpoints in {checkpoints} can be read"
    ), failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
