"""A checkpoint that the volume fails to deliver for a while is read again, not judged damaged
(trainer/training/checkpoint_files.py): real checkpoints written by TrainState whose files go
away and come back, or whose reads fail at the system call (ESTALE, EIO, ENOENT). A failure
that lasts is an I/O error that the task exits EXIT_RETRY on, with no older checkpoint
restored in its place; a truly truncated checkpoint is still damaged.

No test waits on the clock: the pause between tries is a recorder, which puts a file back
where a test needs it, so every test runs the same way on a loaded machine.
"""

from __future__ import annotations

import builtins
import errno
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from trainer_test_helpers import checkpoint_args, checkpoint_state, small_run_command, write_two_checkpoints

from trainer.contract.exit_codes import EXIT_RETRY
from trainer.training import checkpoint_files
from trainer.training.checkpoint_files import CheckpointIOError

REPO = Path(__file__).resolve().parents[2]
DATA, INDEX = "ckpt-2.data-00000-of-00001", "ckpt-2.index"
#: The pauses of four tries, seconds: 0.5 doubling.
ALL_PAUSES = [0.5, 1.0, 2.0]


@pytest.fixture
def two_checkpoints(tmp_path) -> tuple[Path, list[np.ndarray]]:
    """ckpt-1 at epoch 1 and ckpt-2 at epoch 2, with weights 1.0 and 2.0 everywhere."""
    return write_two_checkpoints(tmp_path)


class Pauses:
    """Stands in for time.sleep between tries: records the seconds asked for, and at the first
    pause runs ``then`` (e.g. puts a file back)."""

    def __init__(self, then: Callable[[], None] | None = None) -> None:
        self.seconds: list[float] = []
        self.then = then

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        if self.then is not None:
            self.then()
            self.then = None


def moved_away(file: Path) -> Callable[[], None]:
    """Rename ``file`` away now; return what renames it back."""
    away = file.with_name(file.name + ".away")
    file.rename(away)
    return lambda: away.rename(file)


def failing_open(code: int, times: int | None) -> Callable:
    """An ``open`` that fails with OSError ``code`` for a checkpoint file of ckpt-2, the first
    ``times`` times (every time with None), as a volume's system call does."""
    left = [times]

    def fake_open(file, *args, **kwargs):
        if Path(file).name.startswith("ckpt-2.") and (left[0] is None or left[0] > 0):
            if left[0] is not None:
                left[0] -= 1
            raise OSError(code, os.strerror(code), str(file))
        return builtins.open(file, *args, **kwargs)

    return fake_open


def test_a_data_file_gone_for_a_moment_is_read_again_not_skipped(two_checkpoints, capsys):
    log_dir, values = two_checkpoints
    newest = log_dir / "checkpoints" / "ckpt-2"
    pauses = Pauses(then=moved_away(newest.parent / DATA))
    state = checkpoint_state(log_dir)
    assert state.restore_latest(checkpoint_args(log_dir), pause=pauses) == str(newest)
    assert pauses.seconds == [0.5] and state.resume_point() == (2, 0)
    np.testing.assert_array_equal(state.weights.numpy(), values[1])
    assert capsys.readouterr().err == (
        f"warning: chief-0: checkpoint {newest}: [Errno 2] No such file or directory: "
        f"'{newest}.data-00000-of-00001'; reading it again in 0.5 s\n"
    )


@pytest.mark.parametrize("code", [errno.ESTALE, errno.EIO, errno.ENOENT], ids=errno.errorcode.get)
def test_a_system_call_failing_on_the_first_read_is_not_damage(two_checkpoints, monkeypatch, code, capsys):
    log_dir, values = two_checkpoints
    monkeypatch.setattr(checkpoint_files, "open", failing_open(code, times=1), raising=False)
    pauses = Pauses()
    state = checkpoint_state(log_dir)
    assert state.restore_latest(checkpoint_args(log_dir), pause=pauses) == str(
        log_dir / "checkpoints" / "ckpt-2"
    )
    assert pauses.seconds == [0.5]
    np.testing.assert_array_equal(state.weights.numpy(), values[1])
    err = capsys.readouterr().err
    assert f"[Errno {code}] {os.strerror(code)}" in err and "skipped" not in err, err


def test_tensorflows_own_no_such_file_is_read_again(two_checkpoints):
    """The file goes between the look and TensorFlow's read: TensorFlow's error (UNKNOWN, with
    the system's "No such file or directory", which once counted as damage) is an I/O failure."""
    import tensorflow as tf

    log_dir, _ = two_checkpoints
    newest = str(log_dir / "checkpoints" / "ckpt-2")
    put_back: list[Callable[[], None]] = []
    failures: list[Exception] = []

    def read_while_moved(path: str) -> None:
        if not put_back:
            put_back.append(moved_away(Path(f"{path}.data-00000-of-00001")))
        try:
            checkpoint_files.read_every_tensor(path)
        except (tf.errors.OpError, IndexError) as err:
            failures.append(err)
            raise

    pauses = Pauses(then=lambda: put_back[0]())
    assert checkpoint_files.verdict(newest, read=read_while_moved, pause=pauses) is None
    assert pauses.seconds == [0.5]
    assert len(failures) == 1 and "No such file or directory" in str(failures[0]), failures


@pytest.mark.parametrize("how", ["data file gone", "stale handle"])
def test_a_failure_that_lasts_is_an_io_error_not_a_rollback(two_checkpoints, monkeypatch, how, capsys):
    log_dir, _ = two_checkpoints
    newest = log_dir / "checkpoints" / "ckpt-2"
    if how == "data file gone":
        (newest.parent / DATA).unlink()
        says = f"[Errno 2] No such file or directory: '{newest.parent / DATA}'"
    else:
        monkeypatch.setattr(checkpoint_files, "open", failing_open(errno.ESTALE, times=None), raising=False)
        says = f"[Errno 116] Stale file handle: '{newest.parent / INDEX}'"
    pauses = Pauses()
    state = checkpoint_state(log_dir)
    with pytest.raises(CheckpointIOError) as caught:
        state.restore_latest(checkpoint_args(log_dir), pause=pauses)
    assert pauses.seconds == ALL_PAUSES
    assert str(caught.value).startswith(
        f"checkpoint {newest} could not be read in 4 tries over 3.5 s ({says})"
    )
    assert state.latest is None and state.resume_point() == (0, 0)  # ckpt-1 was not restored
    err = capsys.readouterr().err
    assert err.count("reading it again") == 3 and "skipped" not in err, err


@pytest.mark.parametrize(
    "file, spoil, says",
    [
        (DATA, lambda p: os.truncate(p, p.stat().st_size // 2), "Read less bytes than requested"),
        (INDEX, lambda p: os.truncate(p, p.stat().st_size // 2), "not an sstable (bad magic number)"),
    ],
    ids=["truncated data", "truncated index"],
)
def test_a_truncated_checkpoint_is_damaged_once_a_second_read_agrees(two_checkpoints, file, spoil, says):
    log_dir, _ = two_checkpoints
    spoil(log_dir / "checkpoints" / file)
    pauses = Pauses()
    assert checkpoint_files.verdict(str(log_dir / "checkpoints" / "ckpt-2"), pause=pauses) == says
    assert pauses.seconds == [0.5]


def test_a_restore_that_fails_once_is_tried_again_and_twice_is_an_io_error(two_checkpoints, monkeypatch):
    """Under ParameterServerStrategy the restore runs on the ps; its failure after the files
    read whole is retried once, then reported for a restart, never taken for damage."""
    import tensorflow as tf

    log_dir, values = two_checkpoints
    real_restore = tf.train.Checkpoint.restore
    failures: list[Exception] = []

    def restore(self, save_path, options=None):
        if failures:
            raise failures.pop()
        return real_restore(self, save_path, options)

    monkeypatch.setattr(tf.train.Checkpoint, "restore", restore)
    newest = str(log_dir / "checkpoints" / "ckpt-2")
    failures.append(tf.errors.UnavailableError(None, None, "Socket closed"))
    state = checkpoint_state(log_dir)
    assert state.restore_latest(checkpoint_args(log_dir), pause=Pauses()) == newest
    np.testing.assert_array_equal(state.weights.numpy(), values[1])
    failures.extend(tf.errors.UnavailableError(None, None, "Socket closed") for _ in range(2))
    with pytest.raises(
        CheckpointIOError, match=r"reads whole but restoring it failed twice \(Socket closed\)"
    ):
        checkpoint_state(log_dir).restore_latest(checkpoint_args(log_dir), pause=Pauses())


@pytest.mark.slow
def test_a_task_whose_checkpoint_will_not_read_exits_for_a_restart(two_checkpoints):
    """``python -m trainer`` itself: the newest data file gone for good ends the task with
    EXIT_RETRY and one error line, after three warned tries, with neither checkpoint touched."""
    log_dir, _ = two_checkpoints
    checkpoints = log_dir / "checkpoints"
    (checkpoints / DATA).unlink()
    before = sorted(p.name for p in checkpoints.iterdir())
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    run = subprocess.run(small_run_command(log_dir, 3), cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == EXIT_RETRY, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: checkpoint {checkpoints}/ckpt-2 could not be read in 4 tries over 3.5 s "
        f"([Errno 2] No such file or directory: '{checkpoints / DATA}')"
    ), run.stderr[-3000:]
    assert run.stderr.count("reading it again in") == 3
    assert "Traceback" not in run.stderr and "skipped" not in run.stderr
    assert "Restored checkpoint" not in run.stdout and "Epoch" not in run.stdout
    assert sorted(p.name for p in checkpoints.iterdir()) == before
