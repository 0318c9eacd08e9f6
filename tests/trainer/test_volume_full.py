"""A full volume is a permanent error in every write of a run, not only its checkpoints
(trainer/volume.py): staging, the first heartbeat, the export, result.json, the
done marker and the TensorBoard events each end the process with EXIT_VOLUME_FULL and one line
naming the path, without a traceback.

The volume is full for real: a tmpfs of a few KiB mounted where the write goes, inside a
private mount namespace (``unshare -m``) that holds the process; the mounts go with the
namespace when its last process ends, which each test checks.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_test_helpers import small_run_command

from trainer.contract.exit_codes import EXIT_VOLUME_FULL

REPO = Path(__file__).resolve().parents[2]
#: Says why the volume is full, as the system words ENOSPC.
NO_SPACE = "[Errno 28] No space left on device"
HINT = (
    "a restart cannot cure it: free space there, or give the volume more (on Kubernetes "
    "pulumi config set persistence.pvc.storage <size>, e.g. 10Gi, then pulumi up)"
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not sys.platform.startswith("linux"),
    reason="mounting a tmpfs in a private mount namespace needs Linux, root and unshare(1)",
)


def _mounted_under(path: Path) -> list[str]:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return [line for line in mounts if f" {path}" in line]


def in_private_mounts(
    tmp_path: Path, setup: str, command: list[str], listed: Path, timeout_s: float = 300
) -> tuple[int, str, str, list[str]]:
    """Run ``setup`` (sh, mounting what the test needs) then ``command`` in a private mount
    namespace; return (command's exit code, its stdout, its stderr, the names in ``listed``
    as the command left them, seen inside the namespace).

    The namespace's processes are a session of their own, killed by its id on a timeout;
    the test's mounts must be gone afterwards.
    """
    out = tmp_path / "out"
    out.mkdir()
    script = (
        f"set -eu\n{setup}\nset +e\n"
        f'"$@" >"{out}/stdout" 2>"{out}/stderr"\necho $? >"{out}/rc"\n'
        f'ls -A "{listed}" >"{out}/listed"\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    proc = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *command],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        shell_output, _ = proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, shell_output  # the setup worked
    assert _mounted_under(tmp_path) == []  # nothing left mounted outside the namespace
    return (
        int((out / "rc").read_text()),
        (out / "stdout").read_text(),
        (out / "stderr").read_text(),
        (out / "listed").read_text().split(),
    )


def tmpfs(path: Path, size: str) -> str:
    """sh lines mounting a tmpfs of ``size`` (e.g. ``4k``: one page) at ``path``."""
    return f'mkdir -p "{path}"\nmount -t tmpfs -o size={size},mode=0755 tmpfs "{path}"'


def assert_one_error_line(
    stderr: str, directory: Path, writing: str, flag: str = "--log_dir", reason: str = NO_SPACE
):
    """One ``error:`` line in ``stderr``, no traceback: the volume holding ``directory``
    (given as ``flag``) is full, ``writing`` failed, with ``reason`` first in the parentheses."""
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith(
        f"error: the volume holding {flag} {directory} is full: {writing} failed ({reason}"
    ), errors[0]
    assert errors[0].endswith(HINT), errors[0]
    assert "Traceback" not in stderr, stderr[-3000:]


def test_staging_into_a_full_volume_exits_4_and_leaves_the_directory_as_it_was(tmp_path):
    dest = tmp_path / "volume" / "data"
    rc, _, stderr, left = in_private_mounts(
        tmp_path,
        tmpfs(tmp_path / "volume", "64k"),
        [sys.executable, "-m", "trainer.stage", "--dest", str(dest)],
        dest,
    )
    assert rc == EXIT_VOLUME_FULL, stderr
    assert_one_error_line(stderr, dest, f"staging into {dest}", flag="--dest")
    assert left == []  # the bundled sample (about 1.7 MB) did not fit; no temporary left


def test_no_room_for_the_first_heartbeat_exits_4_before_training(tmp_path):
    log_dir = tmp_path / "run"
    cluster = log_dir / "cluster"
    fill = f'head -c 4096 /dev/zero >"{cluster}/filler"'  # the one page of the tmpfs
    rc, stdout, stderr, left = in_private_mounts(
        tmp_path, f"{tmpfs(cluster, '4k')}\n{fill}", small_run_command(log_dir), cluster
    )
    assert rc == EXIT_VOLUME_FULL, stderr
    assert_one_error_line(stderr, log_dir, f"writing the heartbeat {cluster / 'heartbeat'}")
    assert left == ["filler"]  # no empty temporary file left
    assert "Training" not in stdout


@pytest.mark.parametrize("command", ["trainer", "trainer.local"])
def test_no_room_for_the_run_lock_exits_4_before_anything_else(tmp_path, command):
    """A local run's first write in --log_dir is its lock file's holder line."""
    log_dir = tmp_path / "run"
    fill = f'head -c 4096 /dev/zero >"{log_dir}/filler"'
    argv = [sys.executable, "-m", command, "--log_dir", str(log_dir), "--epochs", "1"]
    rc, stdout, stderr, left = in_private_mounts(tmp_path, f"{tmpfs(log_dir, '4k')}\n{fill}", argv, log_dir)
    assert rc == EXIT_VOLUME_FULL, stderr
    assert_one_error_line(stderr, log_dir, f"writing the run lock {log_dir / '.run.lock'}")
    assert sorted(left) == [".run.lock", "filler"] and stdout == ""


@pytest.mark.slow
def test_no_room_for_the_export_exits_4_and_leaves_no_temporary(tmp_path):
    log_dir = tmp_path / "run"
    export = log_dir / "export"
    rc, stdout, stderr, left = in_private_mounts(
        tmp_path, tmpfs(export, "64k"), small_run_command(log_dir), export
    )
    assert rc == EXIT_VOLUME_FULL, stderr[-3000:]
    # TensorFlow's SavedModel writer says it in its own words, naming its file
    assert_one_error_line(stderr, log_dir, f"writing the export {export / '1'}", reason=f"{export}/.1.tmp-")
    assert "No space left on device [Op:SaveV2])" in stderr
    assert left == []
    assert "Epoch 1 of 1 done" in stdout
    assert (log_dir / "checkpoints" / "ckpt-1.index").is_file()  # on the roomy disk
    assert not (log_dir / "result.json").exists() and not (log_dir / "cluster" / "done").exists()


@pytest.mark.slow
def test_no_room_for_result_json_exits_4_after_the_export(tmp_path):
    """--log_dir itself is the full tmpfs (one page, taken by the run's lock file); its
    subdirectories are the disk's, bound in."""
    log_dir, disk = tmp_path / "run", tmp_path / "disk"
    subdirs = ("checkpoints", "cluster", "export", "logs", "train", "validation")
    binds = "\n".join(
        f'mkdir -p "{disk / d}" "{log_dir / d}"\nmount --bind "{disk / d}" "{log_dir / d}"' for d in subdirs
    )
    rc, _, stderr, left = in_private_mounts(
        tmp_path, f"{tmpfs(log_dir, '4k')}\n{binds}", small_run_command(log_dir), log_dir
    )
    assert rc == EXIT_VOLUME_FULL, stderr[-3000:]
    assert_one_error_line(stderr, log_dir, f"writing {log_dir / 'result.json'}")
    assert sorted(left) == sorted([".run.lock", *subdirs])  # no result.json, no temporary
    assert (disk / "export" / "1" / "saved_model.pb").is_file()
    assert not (disk / "cluster" / "done").exists()


@pytest.mark.slow
def test_no_room_for_the_done_marker_exits_4_after_result_json(tmp_path):
    """cluster/ holds one page: the heartbeat's (later beats only warn); the done marker
    needs a second."""
    log_dir = tmp_path / "run"
    cluster = log_dir / "cluster"
    rc, _, stderr, left = in_private_mounts(
        tmp_path, tmpfs(cluster, "4k"), small_run_command(log_dir), cluster
    )
    assert rc == EXIT_VOLUME_FULL, stderr[-3000:]
    assert_one_error_line(stderr, log_dir, f"writing the done marker {cluster / 'done'}")
    assert left == ["heartbeat"]
    assert (log_dir / "result.json").is_file()


@pytest.mark.slow
def test_no_room_for_the_first_tensorboard_event_exits_4_before_training(tmp_path):
    """The summary writer writes its file's first event when it is made."""
    log_dir = tmp_path / "run"
    train = log_dir / "train"
    fill = f'head -c 4096 /dev/zero >"{train}/filler"'
    rc, stdout, stderr, left = in_private_mounts(
        tmp_path, f"{tmpfs(train, '4k')}\n{fill}", small_run_command(log_dir), train
    )
    assert rc == EXIT_VOLUME_FULL, stderr[-3000:]
    # TensorFlow's summary writer says it in its own words, naming its file
    assert_one_error_line(
        stderr, log_dir, f"writing TensorBoard events in {train}", reason=f"{train}/events.out.tfevents."
    )
    assert "Epoch" not in stdout
    assert [name for name in left if name != "filler"][0].startswith("events.out.tfevents.")


@pytest.mark.slow
def test_no_room_for_tensorboard_events_mid_run_exits_4_like_a_checkpoint(tmp_path):
    """train/ holds two pages, one taken: the events file gets the other, which one epoch's
    events fit (about 2.8 KB with a Step scalar every batch), and the second epoch's overflow.
    The run ends as a full volume while checkpointing does, not as a lost peer (exit 1)."""
    log_dir = tmp_path / "run"
    train = log_dir / "train"
    fill = f'head -c 4096 /dev/zero >"{train}/filler"'
    command = [*small_run_command(log_dir, 2), "--log_interval", "1"]
    rc, stdout, stderr, _ = in_private_mounts(tmp_path, f"{tmpfs(train, '8k')}\n{fill}", command, train)
    assert rc == EXIT_VOLUME_FULL, stderr[-3000:]
    assert_one_error_line(
        stderr, log_dir, f"writing TensorBoard events in {train}", reason=f"{train}/events.out.tfevents."
    )
    assert "No space left on device" in stderr and "lost a" not in stderr
    assert "Epoch 1 of 2 done" in stdout and "Epoch 2 of 2 done" not in stdout
    assert not (log_dir / "result.json").exists()
