"""One run at a time in a --log_dir (trainer/log_dir_lock.py), with real processes: a second
``python -m trainer`` or ``python -m trainer.local`` in the --log_dir of a running one exits 2 at
once, names the holder and writes nothing there; the lock goes with its holder, SIGKILL included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainer.log_dir_lock import LOCK_FILE

REPO = Path(__file__).resolve().parents[2]
#: Holds the lock of the --log_dir in argv[1] until stdin closes.
HOLDER = (
    "import sys; from trainer import log_dir_lock; log_dir_lock.hold(sys.argv[1], 'the test holder'); "
    "print('held', flush=True); sys.stdin.read()"
)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )


def _wait_for_holder(proc: subprocess.Popen, log_dir: Path) -> None:
    """Until ``proc`` has written itself into the lock file (it holds the lock from before that)."""
    lock = log_dir / LOCK_FILE
    while not (lock.is_file() and f"pid {proc.pid}," in lock.read_text()):
        assert proc.poll() is None, f"the first run ended ({proc.returncode}) before it held the lock"
        time.sleep(0.1)


def test_a_second_run_in_a_busy_log_dir_exits_2_naming_the_first(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    # A single-process run long enough never to end on its own here: stopped below by its pid.
    first = subprocess.Popen(
        [sys.executable, "-m", "trainer", "--log_dir", str(log_dir), "--epochs", "1000"],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_holder(first, log_dir)
        for command in (["-m", "trainer"], ["-m", "trainer.local", "--workers", "1", "--ps", "0"]):
            second = _run(*command, "--log_dir", str(log_dir), "--epochs", "1")
            assert second.returncode == 2, second.stderr
            assert second.stderr.startswith(
                f"error: --log_dir {log_dir} is in use by another run (python -m trainer, pid {first.pid}, "
                "started "
            ), second.stderr
            assert second.stderr.rstrip().endswith(
                "give this run its own --log_dir, or start it again once that run has ended (it then resumes "
                "from that run's last checkpoint)"
            ), second.stderr
            assert first.poll() is None  # refused while the first one runs
        # The second runs wrote no log of their own there: every task log's banner names the
        # first run's pid (the first run may open its own log only now, on a loaded machine).
        banners = [
            line
            for log in (log_dir / "logs").glob("*.log")
            for line in log.read_text().splitlines()
            if line.startswith("==== ")
        ]
        assert all(f"(pid {first.pid})" in line for line in banners), banners
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # The kernel dropped the SIGKILLed run's lock: the next run takes it.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(log_dir)],
        cwd=REPO,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
    finally:
        holder.stdin.close()
        assert holder.wait() == 0


def test_a_log_dir_that_cannot_be_made_is_refused_with_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = _run("-m", "trainer", "--log_dir", str(blocker / "run"), "--epochs", "1")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: --log_dir {blocker / 'run'} is invalid: cannot create "), (
        proc.stderr
    )
