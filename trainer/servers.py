"""Server tasks (ps and, with ParameterServerStrategy, workers) and the files the chief
uses to tell them how the run is going.

``tf.distribute.Server.join()`` never returns, which is why the guide's ps Jobs never
completed. Instead each server polls two files in ``<log_dir>/cluster/`` on the shared
volume (works the same on localhost and on Kubernetes' NAS mount, and needs no extra
port): the chief rewrites ``heartbeat`` every few seconds while it runs and writes ``done``
when the run has finished, or ``failed`` (with its exit code) when it ended for good, with
an exit code no restart can cure. A server exits 0 once ``done`` is newer than its own start
or than the chief's last heartbeat, exits 5 (EXIT_CHIEF_FAILED, permanent too, so that its
Kubernetes Job fails at once) as soon as ``failed`` appears, and exits 1 with a message when
the chief has been silent for longer than ``--peer_timeout``.

Both files carry the run id (``--run_id``; one value shared by every task of a run, set by
the Kubernetes stack and by ``trainer.local``), and a server ignores files whose id is not
its own: a rerun in the same log directory is never ended early by the previous run's
``done``, nor kept alive by the previous chief's last heartbeats. With an empty
``--run_id`` (tasks started by hand) every file counts, as before run ids existed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from trainer.contract.exit_codes import (
    EXIT_CHIEF_FAILED,
    EXIT_OK,
    EXIT_RETRY,
    EXIT_SIGTERM,
    PERMANENT_REASONS,
)

HEARTBEAT_INTERVAL_S = 5.0
#: How often a server looks for the chief's done marker: a server exits on average half of
#: this after the chief, and every run waits for its last server, so a long interval shows in
#: a short run's time; two stat calls per poll, cheap on NAS too.
POLL_INTERVAL_S = 0.1
#: Tolerated clock difference between nodes writing the same NFS volume (mtimes).
CLOCK_SLACK_S = 5.0
#: How long a server started after an earlier run's ``done`` waits for a new chief.
STALE_GRACE_S = 30.0
#: The line of a heartbeat or done file that names its run.
RUN_ID_PREFIX = "run_id="
#: The failed marker's line with the chief's exit code.
CODE_PREFIX = "code="

#: The run id of this process (``--run_id``); see use_run_id.
_process_run_id = ""


def use_run_id(run_id: str) -> None:
    """Make ``run_id`` the default run id of every ClusterFiles this process creates.

    trainer.__main__ calls it once with ``--run_id`` before the task starts: trainer.training.run
    builds its ClusterFiles from ``--log_dir`` alone, and this is how the chief's heartbeat
    and done marker get the run's id without that module knowing about it.
    """
    global _process_run_id
    _process_run_id = run_id


class ClusterFiles:
    """``<log_dir>/cluster/heartbeat``, ``done`` and ``failed`` of one run.

    Each file holds a ``run_id=<id>`` line (done also ``time=<unix seconds>``, failed
    ``code=<the chief's exit code>`` and ``time=``); its mtime is the time that counts.
    Readers see only files of their own run (any file when the run id is empty).

    Args:
        log_dir: the shared ``--log_dir``.
        run_id: this run's id; default: the one given to use_run_id (empty if never called).
    """

    def __init__(self, log_dir: str | Path, run_id: str | None = None) -> None:
        self.dir = Path(log_dir) / "cluster"
        self.heartbeat = self.dir / "heartbeat"
        self.done = self.dir / "done"
        self.failed = self.dir / "failed"
        self.run_id = _process_run_id if run_id is None else run_id

    def touch_heartbeat(self) -> None:
        """Rewrite the heartbeat (new mtime, this run's id)."""
        self._write(self.heartbeat, f"{RUN_ID_PREFIX}{self.run_id}\n")

    def mark_done(self) -> None:
        """Tell the servers the run is over (after the result is written)."""
        self._write(self.done, f"{RUN_ID_PREFIX}{self.run_id}\ntime={time.time()}\n")

    def mark_failed(self, code: int) -> None:
        """Tell the servers the chief ended for good with exit ``code`` (a permanent one)."""
        self._write(self.failed, f"{RUN_ID_PREFIX}{self.run_id}\n{CODE_PREFIX}{code}\ntime={time.time()}\n")

    def clear_failed(self) -> None:
        """Remove the failed marker (a chief of the run starting again)."""
        try:
            self.failed.unlink()
        except FileNotFoundError:
            pass

    def failed_code(self) -> int | None:
        """The exit code in this run's failed marker (EXIT_CHIEF_FAILED when it names none),
        or None when there is no failed marker of this run."""
        try:
            text = self.failed.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        if self.run_id and marker_run_id(text) != self.run_id:
            return None
        for line in text.splitlines():
            if line.startswith(CODE_PREFIX) and line[len(CODE_PREFIX) :].strip().isdigit():
                return int(line[len(CODE_PREFIX) :])
        return EXIT_CHIEF_FAILED

    def _write(self, path: Path, text: str) -> None:
        # Written aside and renamed: a server reading at the same moment (on NFS too) sees
        # the old file or the new one, never a partial id.
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{path.name}.{os.getpid()}.tmp"
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full volume: no empty file left behind
            raise

    def _mtime(self, path: Path) -> float | None:
        """The file's mtime if it exists and belongs to this run, else None."""
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                # fstat of the file just read: mtime and id of one and the same version.
                mtime = os.fstat(file.fileno()).st_mtime
                text = file.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        if self.run_id and marker_run_id(text) != self.run_id:
            return None
        return mtime

    def heartbeat_mtime(self) -> float | None:
        """When this run's chief last beat, or None (no heartbeat, or another run's)."""
        return self._mtime(self.heartbeat)

    def done_mtime(self) -> float | None:
        """When this run's chief finished, or None (no marker, or another run's)."""
        return self._mtime(self.done)


def marker_run_id(text: str) -> str:
    """The run id a heartbeat or done file names; "" for files written before run ids
    (an empty heartbeat, a done holding only a time)."""
    for line in text.splitlines():
        if line.startswith(RUN_ID_PREFIX):
            return line[len(RUN_ID_PREFIX) :].strip()
    return ""


def start_heartbeat(files: ClusterFiles, interval_s: float = HEARTBEAT_INTERVAL_S) -> None:
    """Touch the heartbeat now and then every ``interval_s`` from a daemon thread; a failed
    marker of the run goes: its chief is trying again."""
    files.clear_failed()
    files.touch_heartbeat()

    def beat() -> None:
        while True:
            time.sleep(interval_s)
            try:
                files.touch_heartbeat()
            except OSError as err:  # a flaky NFS write must not kill the chief
                print(f"warning: cannot touch {files.heartbeat}: {err}", flush=True)

    threading.Thread(target=beat, name="heartbeat", daemon=True).start()


def server_decision(
    files: ClusterFiles, started_at: float, now: float, peer_timeout_s: float
) -> tuple[str, str] | None:
    """What a waiting server should do now: None to keep serving, or (``"exit0"`` |
    ``"exit1"`` | ``"failed"``, message).

    Only this run's files count (``files.run_id``; see ClusterFiles). Rules: ``failed``
    means the chief ended for good: exit at once (EXIT_CHIEF_FAILED; without a run id, only
    a marker newer than this server's start). ``done``
    newer than this server's start (less clock slack) means the run finished: exit 0; so
    does an older ``done`` with no heartbeat after it once STALE_GRACE_S have passed (a
    pod restarted after the run ended). No heartbeat newer than ``peer_timeout_s`` seconds
    (counting from this server's start when there is none) means the chief is lost: exit 1.
    """
    failed = files.failed_code()
    # Without run ids (tasks started by hand) only a marker of this server's time counts:
    # the next chief removes an older one only once it starts, after its servers.
    if failed is not None and (
        files.run_id or (files._mtime(files.failed) or 0.0) >= started_at - CLOCK_SLACK_S
    ):
        return "failed", chief_failed_message(files, failed)
    done = files.done_mtime()
    beat = files.heartbeat_mtime()
    if done is not None:
        finished_while_serving = done >= started_at - CLOCK_SLACK_S
        # A marker from before this server started counts only if no chief has beaten
        # since (the run is over and nobody is training): wait STALE_GRACE_S first so that
        # a chief starting a longer run in the same log dir can show its first heartbeat.
        finished_before = now - started_at > STALE_GRACE_S and (beat is None or done >= beat)
        if finished_while_serving or finished_before:
            return "exit0", f"the chief finished the run ({files.done} written); exiting"
    last_seen = max(started_at, beat or 0.0)
    if now - last_seen > peer_timeout_s:
        return "exit1", (
            f"lost the chief: no heartbeat in {files.heartbeat} for "
            f"{now - last_seen:.0f}s (--peer_timeout {peer_timeout_s:g}s); "
            "exiting non-zero so that the task is restarted or reported"
        )
    return None


def chief_failed_message(files: ClusterFiles, code: int) -> str:
    """What a task says when it leaves because the chief ended for good with ``code``."""
    reason = PERMANENT_REASONS.get(code, "a permanent error")
    return (
        f"the chief ended for good (exit {code}: {reason}; its log says why; "
        f"{files.failed} written); exiting {EXIT_CHIEF_FAILED} so that this task ends "
        "too instead of waiting for the peer timeout"
    )


def exit_when_chief_fails(files: ClusterFiles, task: str, interval_s: float = POLL_INTERVAL_S) -> None:
    """From a daemon thread: exit the process with EXIT_CHIEF_FAILED once this run's failed
    marker appears. For training tasks other than the chief (MultiWorkerMirroredStrategy's
    workers), which would otherwise wait in a collective until the watchdog's timeout."""
    from trainer import tasklog

    def watch() -> None:
        while True:
            code = files.failed_code()
            if code is not None:
                print(f"{task}: {chief_failed_message(files, code)}", file=sys.stderr, flush=True)
                tasklog.exit_now(EXIT_CHIEF_FAILED)
            time.sleep(interval_s)

    threading.Thread(target=watch, name="chief-failed", daemon=True).start()


def _exit_143_on_sigterm(task: str) -> None:
    """Exit 143 at once on SIGTERM: a server has nothing to save.

    Why a handler at all: in a container the task is PID 1, and the kernel drops signals that
    PID 1 has no handler for, so `kubectl delete pod` (or a drain) would leave the server running
    for the whole grace period; it would then see the chief's done marker and exit 0, and its
    Job would be Complete with the task gone instead of starting a replacement (seen on the
    local cluster). 143 (128 + SIGTERM) is what the Job's podFailurePolicy ignores
    (trainer/contract/exit_codes.py), so the replacement does not count against backoffLimit.
    """

    def stop(signum: int, frame: object) -> None:
        print(f"{task}: stopped by SIGTERM", file=sys.stderr, flush=True)
        os._exit(EXIT_SIGTERM)

    signal.signal(signal.SIGTERM, stop)


def run_server(
    task_type: str, task_index: int, cluster_spec: dict, log_dir: str, peer_timeout_s: float
) -> int:
    """Run a tf.distribute.Server for (task_type, task_index) until the run ends.

    Returns:
        0 after the chief's ``done`` marker; EXIT_CHIEF_FAILED after its ``failed`` marker;
        1 after ``peer_timeout_s`` without a heartbeat.
    """
    import tensorflow as tf

    _exit_143_on_sigterm(f"{task_type} {task_index}")
    started_at = time.time()
    files = ClusterFiles(log_dir)
    tf.distribute.Server(
        tf.train.ClusterSpec(cluster_spec),
        job_name=task_type,
        task_index=task_index,
        protocol="grpc",
        start=True,
    )
    print(f"{task_type} {task_index}: serving on {cluster_spec[task_type][task_index]}", flush=True)
    from trainer.profiling import ServerProfile

    profile = ServerProfile(f"{task_type}-{task_index}")  # off unless TRAINER_PROFILE is set
    while True:
        profile.poll()
        decision = server_decision(files, started_at, time.time(), peer_timeout_s)
        if decision:
            code, message = decision
            print(
                f"{task_type} {task_index}: {message}",
                file=sys.stdout if code == "exit0" else sys.stderr,
                flush=True,
            )
            return {"exit0": EXIT_OK, "failed": EXIT_CHIEF_FAILED}.get(code, EXIT_RETRY)
        time.sleep(POLL_INTERVAL_S)
