"""Every task's output kept on the shared volume: ``<log_dir>/logs/<task>.log``.

A pod's output goes with the pod (a replaced or deleted Job takes it along), so each task
also appends what it prints to a file next to the run's checkpoints. The copy is made at the
file-descriptor level, so TensorFlow's C++ messages and a crash's last words are kept too:
fds 1 and 2 become pipes read by a small helper process (``python -m trainer.tasklog``),
which writes each chunk to the original stdout or stderr and to the file. Being another
process, the helper still drains the pipes when the task dies abruptly (SIGKILL, abort);
``stop`` hands the fds back and waits for it, so that a task ending normally (or by its
watchdog) has its last lines in the file before it exits (on Kubernetes the task is the
container's PID 1, whose exit kills the helper).

Layout under ``--log_dir``: ``checkpoints/`` (checkpoints), ``train/`` (TensorBoard events),
``cluster/`` (heartbeat and done), ``logs/`` (these files), ``result.json``: nothing shares
a directory with the checkpoints.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

LOGS_SUBDIR = "logs"
#: Seconds ``stop`` waits for the helper to write the last chunks.
DRAIN_TIMEOUT_S = 5.0

_state: dict = {}
#: Held by ``stop``: the main thread's exit and the SIGTERM watcher's may stop at once.
_stopping = threading.RLock()


def log_path(log_dir: str | Path, task_name: str) -> Path:
    """``<log_dir>/logs/<task_name>.log``, e.g. ``runs/x/logs/worker-1.log``."""
    return Path(log_dir) / LOGS_SUBDIR / f"{task_name}.log"


def start(log_dir: str | Path, task_name: str, header: str = "") -> Path | None:
    """Copy this process's fds 1 and 2 into ``log_path(log_dir, task_name)`` (appended).

    The file is made only once ``log_dir`` exists (the chief creates it after checking the
    data and flags): a run that never started writes nothing there. Returns the file's
    path, or None when a copy is already running.
    """
    if _state:
        return None
    path = log_path(log_dir, task_name)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    banner = f"==== {task_name} started {stamp} (pid {os.getpid()}){header} ====\n"
    sys.stdout.flush()
    sys.stderr.flush()
    pipes = [os.pipe(), os.pipe()]  # (read, write) for stdout, stderr; not inheritable
    helper = subprocess.Popen(
        [sys.executable, "-m", "trainer.tasklog", str(path), str(pipes[0][0]), str(pipes[1][0]), banner],
        stdin=subprocess.DEVNULL,
        pass_fds=(pipes[0][0], pipes[1][0]),
        close_fds=True,
    )
    saved = (os.dup(1), os.dup(2))
    for target, (read, write) in zip((1, 2), pipes):
        os.dup2(write, target)
        os.close(write)
        os.close(read)
    _state.update(helper=helper, saved=saved, path=path)
    return path


def stop(timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    """Give fds 1 and 2 back and wait (at most ``timeout_s``) until the helper has written
    everything; a no-op when ``start`` did not run or another ``stop`` did. A call made while
    another thread's is draining waits for it to end, then does nothing."""
    with _stopping:
        if "saved" not in _state:
            return
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        saved = _state.pop("saved")
        for target, fd in zip((1, 2), saved):
            os.dup2(fd, target)  # the pipes' last write ends close: the helper reads EOF
            os.close(fd)
        try:
            _state.pop("helper").wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        _state.clear()


def exit_now(code: int) -> None:
    """``os._exit(code)`` once the log file has the output so far."""
    stop()
    os._exit(code)


#: Output kept in memory while ``log_dir`` does not exist yet, at most this many bytes.
PENDING_LIMIT = 1 << 20


class _LazyFile:
    """The log file, opened (appending, after ``banner``) once its ``log_dir`` exists."""

    def __init__(self, path: Path, banner: str) -> None:
        self.path, self.file, self.failed = path, None, False
        self.pending = [banner.encode()]
        self.pending_size = 0

    def write(self, chunk: bytes) -> None:
        if self.failed:
            return
        if self.file is None:
            if self.pending_size < PENDING_LIMIT:
                self.pending.append(chunk)
                self.pending_size += len(chunk)
            self.poll()
            return
        try:
            self.file.write(chunk)
        except OSError:
            self.failed = True

    def poll(self) -> None:
        """Open the file if ``log_dir`` has appeared, and write what was kept meanwhile."""
        if self.file is not None or self.failed or not self.path.parent.parent.is_dir():
            return
        try:
            self.path.parent.mkdir(exist_ok=True)
            self.file = open(self.path, "ab", buffering=0)
            self.file.write(b"".join(self.pending))
        except OSError:
            self.failed = True
        self.pending = []


def copy(path: str, out_fd: int, err_fd: int, banner: str = "") -> int:
    """The helper: copy ``out_fd`` to fd 1 and ``err_fd`` to fd 2, both to ``path``, until
    both reach EOF. A terminal or launcher gone away (EPIPE) or a failing file (NFS) stops
    that one destination, never the copy to the other."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the task's own end is the helper's end (EOF)
    log = _LazyFile(Path(path), banner)
    selector = selectors.DefaultSelector()
    selector.register(out_fd, selectors.EVENT_READ, 1)
    selector.register(err_fd, selectors.EVENT_READ, 2)
    alive = {1: True, 2: True}
    open_fds = 2
    while open_fds:
        for key, _ in selector.select(timeout=1.0):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
                os.close(key.fd)
                open_fds -= 1
                continue
            if alive[key.data]:
                try:
                    os.write(key.data, chunk)
                except OSError:  # EPIPE: Python ignores SIGPIPE, so it is an error here
                    alive[key.data] = False
            log.write(chunk)
        log.poll()
    return 0


if __name__ == "__main__":
    sys.exit(copy(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
