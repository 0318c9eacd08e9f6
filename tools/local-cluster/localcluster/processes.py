"""Starting, finding and stopping the cluster's daemons by pid.

Each daemon runs in its own session (so it outlives `up` and ignores the terminal's signals)
with its output in <state>/logs/<name>.log. Its pid file holds "<pid> <start time>": the start
time (field 22 of /proc/<pid>/stat, in clock ticks since boot) tells our process from an
unrelated one that got the same pid later, so `down` never signals a stranger.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after it are fixed.
    return stat[stat.rindex(")") + 2 :].split()[19]


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"


class Daemon:
    """One long-running process of the cluster: its pid file and log file."""

    def __init__(self, name: str, pid_dir: Path, log_dir: Path) -> None:
        self.name = name
        self.pid_file = pid_dir / f"{name}.pid"
        self.log_file = log_dir / f"{name}.log"

    def start(self, argv: Sequence[str], env: dict | None = None) -> int:
        """Starts ``argv`` detached, appending to the log file; returns the pid."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                close_fds=True,
            )
        self.pid_file.write_text(f"{proc.pid} {_start_time(proc.pid)}\n")
        return proc.pid

    def pid(self) -> int | None:
        """The pid of our running process, or None (no pid file, exited, or pid reused)."""
        try:
            pid_s, started = self.pid_file.read_text().split()
            pid = int(pid_s)
        except (OSError, ValueError):
            return None
        if _start_time(pid) != started or _is_zombie(pid):
            return None
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    def stop(self, timeout: float = 15.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; removes the pid file.

        Returns True when a process of ours was running.
        """
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        stop_pid(pid, timeout)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def stop_pid(pid: int, timeout: float = 15.0) -> None:
    """SIGTERM ``pid``, wait up to ``timeout`` s for it to go, then SIGKILL it and wait again."""
    started = _start_time(pid)
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)  # reaps it when it is our child
            except ChildProcessError:
                pass
            if _start_time(pid) != started or _is_zombie(pid):
                return
            time.sleep(0.1)


def pids_with_cmdline(fragment: str) -> list[int]:
    """Pids of processes whose command line (NUL-joined argv) contains ``fragment``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fragment in cmdline:
            found.append(int(entry.name))
    return found
