"""One run at a time in a --log_dir of one machine: the local runners hold a lock on it.

The bare commands (``python -m trainer`` without TF_CONFIG, ``python -m trainer.local``) share
their default --log_dir (``runs/local``): a second run started there while one trains would
resume from, and then write over, the first one's checkpoints, logs and export. So each of them
holds an exclusive ``flock(2)`` on ``<log_dir>/.run.lock`` for as long as it runs; a second one
exits 2, naming the holder, before it writes anything there. ``python -m trainer`` takes it at
its start when --log_dir exists, else when it makes --log_dir (after checking the data, so that
a run that cannot start leaves no trace); the launcher at its start. The kernel
drops the lock when its holder's process ends, however it ends (SIGKILL included), so a crashed
run never blocks the next one, which resumes it.

The tasks of a cluster (TF_CONFIG set, as the stack and the local launcher start them) take no
lock: the stack gives every run its own run directory and Kubernetes one pod per task, and on a
network file system the lock of a killed pod can outlive the pod by the server's lease.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path
from typing import IO

from trainer.contract.exit_codes import EXIT_BAD_FLAGS, EXIT_VOLUME_FULL
from trainer.volume import VolumeFull, is_no_space, volume_full

#: The lock file, in --log_dir. It holds the holder's pid and start time, for the message.
LOCK_FILE = ".run.lock"

#: The open lock files of this process, by resolved path: a lock lasts as long as its file
#: stays open.
_HELD: dict[str, IO[str]] = {}


class LogDirRefused(Exception):
    """The --log_dir cannot be held: another run holds it (the message names it and what to do),
    or it cannot be made."""


def wanted() -> bool:
    """Whether this process is a run of its own, which holds the lock: no TF_CONFIG."""
    return not os.environ.get("TF_CONFIG")


def hold(log_dir: str | Path, command: str) -> None:
    """Take ``log_dir``'s run lock for the rest of this process (making ``log_dir``); nothing
    when this process holds it already.

    Args:
        log_dir: the run's --log_dir.
        command: the command that runs, for the holder line (``python -m trainer``).

    Raises:
        LogDirRefused: another process holds it, or ``log_dir`` or its lock file cannot be made.
        trainer.volume.VolumeFull: the volume holding ``log_dir`` has no space for
            the lock file or its holder line (ENOSPC, EDQUOT).
    """
    path = Path(log_dir) / LOCK_FILE
    if str(path.resolve()) in _HELD:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open until the process ends
    except OSError as err:
        if is_no_space(err):
            raise volume_full(err, str(log_dir), f"writing the run lock {path}") from None
        raise LogDirRefused(
            f"--log_dir {log_dir} is invalid: cannot create {err.filename or path}: {err.strerror or err}"
        ) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "a process that has not yet written its name"
        lock.close()
        raise LogDirRefused(
            f"--log_dir {log_dir} is in use by another run ({holder}): give this run its own "
            "--log_dir, or start it again once that run has ended (it then resumes from "
            "that run's last checkpoint)"
        ) from None
    lock.seek(0)
    lock.truncate()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    try:
        lock.write(f"{command}, pid {os.getpid()}, started {started}\n")
        lock.flush()
    except OSError as err:
        with contextlib.suppress(OSError):  # close flushes the unwritten line again; the fd goes
            lock.close()
        if is_no_space(err):
            raise volume_full(err, str(log_dir), f"writing the run lock {path}") from None
        raise
    _HELD[str(path.resolve())] = lock


def hold_at_start(log_dir: str | Path, command: str) -> int | None:
    """``hold`` for a command that takes the lock before it starts anything: None once held;
    else the refusal printed to stderr (``error: ...``) and the exit code the command returns:
    EXIT_BAD_FLAGS (2) when another run holds ``log_dir`` or it cannot be made, EXIT_VOLUME_FULL
    (4) when its volume has no space for the lock (trainer/contract/exit_codes.py)."""
    try:
        hold(log_dir, command)
    except LogDirRefused as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_FLAGS
    except VolumeFull as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_VOLUME_FULL
    return None
