"""The tasks of one local run: started, watched, restarted and stopped as Kubernetes' Job
controller would.

``Launcher`` builds the cluster spec with ``trainer.contract.cluster_spec`` (the module the
Kubernetes stack uses) on free localhost ports, starts chief, workers and ps as ``python -m
trainer`` processes with their TF_CONFIG (forked from a process that has imported TensorFlow
once: trainer/launcher/forkserver.py), streams their output prefixed by task (``[worker-1]
...``), and restarts a task that dies, as Kubernetes restarts a failed Job pod, up to
``backoff_limit`` restarts per task. After a ps dies the chief is restarted too
(TensorFlow's guidance for ParameterServerStrategy: restart the coordinator, which resumes
from the last checkpoint). Ctrl-C or a spent backoff limit stops every child. The tasks run
in a network namespace of their own where Linux allows (trainer/launcher/netns.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from trainer.contract.cluster_spec import Replicas, local_cluster_spec, tf_config_json
from trainer.contract.exit_codes import PERMANENT_EXIT_CODES, PERMANENT_REASONS
from trainer.launcher import netns
from trainer.launcher.forkserver import ForkedProcess, use_private_network, wake_on_signals
from trainer.launcher.lifetime import LAUNCHER_PID_ENV
from trainer.log_noise import is_log_noise

#: Seconds a stopping child gets between SIGTERM and SIGKILL (Kubernetes' default grace).
STOP_GRACE_S = 30.0
#: The signals that stop the launcher (install_signal_handlers).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds the servers get to notice the chief's done marker: a finished run's ps and
#: workers are gone within a minute of the chief.
SERVER_EXIT_WAIT_S = 60.0
#: How often the launcher looks at its tasks: the run ends this long, at most, after its
#: last task, which a short run notices; a look is a poll of each task's pidfd, cheap.
WATCH_INTERVAL_S = 0.05
#: Restart delays grow like a Job's back-off (10 s, 20 s, ...), scaled down for one machine.
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 10.0


def free_ports(count: int, host: str = "localhost") -> list[int]:
    """``count`` distinct TCP ports that were free on ``host`` a moment ago."""
    socks, ports = [], []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            socks.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in socks:
            sock.close()
    return ports


def intra_op_threads(replicas: Replicas, cpus: int | None = None, task_type: str = "worker") -> int:
    """Intra-op threads per task: the cores divided among the computing tasks (the workers,
    plus the chief with ps 0), at least 1. With ps the chief computes only while the
    workers wait for it (evaluation), so it gets every core."""
    cpus = cpus or os.cpu_count() or 1
    if replicas.ps and task_type == "chief":
        return cpus
    computing = replicas.worker + (replicas.chief if replicas.ps == 0 else 0)
    return max(1, cpus // max(1, computing))


@dataclass
class Task:
    """One child task and its restart history."""

    task_type: str
    index: int
    argv: list[str]
    env: dict
    proc: ForkedProcess | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)
    restart_at: float | None = None

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.index}"


class Launcher:
    """Starts, watches, restarts and stops the tasks of one local run."""

    def __init__(
        self,
        replicas: Replicas,
        trainer_argv: list[str],
        backoff_limit: int,
        host: str = "localhost",
        out=None,
    ) -> None:
        self.replicas = replicas
        self.backoff_limit = backoff_limit
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        tasks = [(t, i) for t, i in replicas.tasks() if t != "evaluator"]
        ports = dict(zip(tasks, free_ports(len(tasks), host)))
        self.cluster_spec = local_cluster_spec(replicas, ports, host)
        self.tasks: dict[str, Task] = {}
        for task_type, index in tasks:
            env = dict(
                os.environ,
                TF_CONFIG=tf_config_json(self.cluster_spec, task_type, index),
                GRPC_FAIL_FAST="use_caller",
                PYTHONUNBUFFERED="1",
            )
            # The task exits when the launcher dies, even by SIGKILL (trainer.__main__).
            env[LAUNCHER_PID_ENV] = str(os.getpid())
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            # Share the cores among the tasks that compute instead of giving each TensorFlow
            # process a thread per core (oversubscription slows every task down).
            env.setdefault("TF_NUM_INTRAOP_THREADS", str(intra_op_threads(replicas, task_type=task_type)))
            argv = [sys.executable, "-m", "trainer", *trainer_argv]
            task = Task(task_type, index, argv, env)
            self.tasks[task.name] = task
        self.stopping = False
        #: Where the fork server reports its network (trainer/launcher/netns.py), in run().
        self._network_report = ""

    def say(self, message: str) -> None:
        with self.lock:
            print(f"[local] {message}", file=self.out, flush=True)

    def _stream(self, task: Task, proc: ForkedProcess) -> None:
        for line in proc.stdout:
            if is_log_noise(line):
                continue
            with self.lock:
                self.out.write(f"[{task.name}] {line}")
                self.out.flush()

    def start(self, task: Task) -> None:
        # Forked from the fork server, in its own session: Ctrl-C reaches only the launcher.
        task.proc = ForkedProcess(task.argv, task.env, name=task.name)
        task.restart_at = None
        # Started with the stop signals blocked, which it inherits: the kernel then delivers
        # them to the main thread, whose wait they interrupt. Delivered to this thread they
        # would wake no one: Python runs handlers in the main thread only, once its wait ends
        # (a thread this module does not start may still take one: see wake_on_signals).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            threading.Thread(target=self._stream, args=(task, task.proc), daemon=True).start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.say(f"started {task.name} (pid {task.proc.pid})")

    def stop(self, task: Task, sig: int = signal.SIGTERM) -> None:
        if task.proc and task.proc.poll() is None:
            try:
                task.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def stop_all(self) -> None:
        """SIGTERM the chief first (it saves a checkpoint, which needs the ps alive), then
        the others; SIGKILL whatever outlives STOP_GRACE_S. A second Ctrl-C (or SIGTERM)
        meanwhile SIGKILLs every task at once: the tasks run in their own sessions, so
        nobody else would stop them."""
        self.stopping = True
        try:
            self._stop_gracefully()
        except KeyboardInterrupt:
            self.say("interrupted again: killing every task")
            self.kill_all()

    def kill_all(self) -> None:
        """SIGKILL every running task and reap it; further interrupts are ignored."""
        while True:
            try:
                for task in self.tasks.values():
                    if task.proc and task.proc.poll() is None:
                        task.proc.kill()
                for task in self.tasks.values():
                    if task.proc:
                        task.proc.wait()
                return
            except KeyboardInterrupt:
                continue

    def _stop_gracefully(self) -> None:
        chief = self.tasks["chief-0"]
        others = [t for t in self.tasks.values() if t is not chief]
        for group in ([chief], others):
            running = [t for t in group if t.proc and t.proc.poll() is None]
            for task in running:
                self.stop(task)
            deadline = time.monotonic() + STOP_GRACE_S
            for task in running:
                try:
                    task.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{task.name} ignored SIGTERM for {STOP_GRACE_S:g}s; killing it")
                    task.proc.kill()
                    task.proc.wait()

    def _schedule_restart(self, task: Task, reason: str) -> bool:
        if task.exit_codes and task.exit_codes[-1] in PERMANENT_EXIT_CODES:
            self.say(f"{task.name} {reason} ({PERMANENT_REASONS[task.exit_codes[-1]]}): not restarting")
            return False
        if task.restarts >= self.backoff_limit:
            self.say(f"{task.name} {reason}; backoff limit {self.backoff_limit} reached")
            return False
        delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**task.restarts)
        task.restarts += 1
        task.restart_at = time.monotonic() + delay
        self.say(f"{task.name} {reason}; restart {task.restarts} of {self.backoff_limit} in {delay:g}s")
        return True

    def run(self) -> int:
        """Run to the end; return the chief's final exit code (130 after Ctrl-C)."""
        chief = self.tasks["chief-0"]
        self.say("cluster spec " + tf_config_json(self.cluster_spec, "chief", 0))
        with tempfile.TemporaryDirectory(prefix="trainer-local-") as tmp:
            self._network_report = os.path.join(tmp, "network")
            use_private_network(self._network_report)
            return self._run(chief)

    def _run(self, chief: Task) -> int:
        try:  # from the first start on: an interrupt must stop whatever has started
            # Servers first, so the coordinator finds them listening.
            order = [t for t in self.tasks.values() if t is not chief] + [chief]
            for n, task in enumerate(order):
                self.start(task)
                if n == 0 and not self._network_ok(task):
                    self.stop_all()
                    return 1
            return self._watch(chief)
        except KeyboardInterrupt:
            self.say("interrupted: stopping every task")
            self.stop_all()
            return 130
        finally:
            if not self.stopping:
                self.stop_all()

    def _network_ok(self, first: Task) -> bool:
        """Say where the tasks' ports can be reached from, once ``first`` has started (the
        fork server has then set up its network); False when that network does not work."""
        word, line = netns.outcome_line(self._network_report, first.proc.pid)
        self.say(line)
        return word != netns.BROKEN

    def _watch(self, chief: Task) -> int:
        chief_done_at = None
        while True:
            now = time.monotonic()
            for task in self.tasks.values():
                if task.restart_at is not None and now >= task.restart_at:
                    self.start(task)
                code = task.proc.poll() if task.proc and task.restart_at is None else None
                if code is None or len(task.exit_codes) > task.restarts:
                    continue
                task.exit_codes.append(code)
                if task is chief:
                    if code == 0:
                        chief_done_at = now
                        self.say("chief finished (exit 0); waiting for the other tasks")
                        for other in self.tasks.values():
                            if other.restart_at is not None:  # nothing left to rejoin
                                other.restart_at = None
                                other.restarts -= 1  # its exit stays counted, not re-reported
                                self.say(f"{other.name}: restart cancelled, the chief has finished")
                    elif not self._schedule_restart(task, f"exited with code {code}"):
                        self.stop_all()
                        return code
                elif code != 0 and chief_done_at is None:
                    if not self._schedule_restart(task, f"exited with code {code}"):
                        self.stop_all()
                        return chief.proc.returncode if chief.proc.poll() is not None else 1
                    if task.task_type == "ps" and chief.proc.poll() is None:
                        self.say(
                            "a ps was lost: restarting the chief (coordinator) so that it "
                            "resumes from the last checkpoint"
                        )
                        self.stop(chief, signal.SIGKILL)
                elif code != 0:
                    self.say(f"{task.name} exited with code {code} after the chief finished")
                else:
                    self.say(f"{task.name} exited 0")
            if chief_done_at is not None:
                others = [t for t in self.tasks.values() if t is not chief]
                # Ended = its last exit was reported above, not merely polled now: a task that
                # exits between the loop's poll and this line is reported on the next pass.
                if all(len(t.exit_codes) > t.restarts and t.restart_at is None for t in others):
                    bad = [f"{t.name}={t.exit_codes[-1]}" for t in others if t.exit_codes[-1]]
                    if bad:
                        self.say(f"every task ended; non-zero: {', '.join(bad)}")
                    else:
                        self.say("every task exited 0")
                    return 0
                if now - chief_done_at > SERVER_EXIT_WAIT_S:
                    self.say(
                        f"tasks still running {SERVER_EXIT_WAIT_S:g}s after the chief finished: stopping them"
                    )
                    self.stop_all()
                    return 0
            time.sleep(WATCH_INTERVAL_S)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def install_signal_handlers() -> None:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP (the terminal closed) all stop every child.

    SIGINT is set explicitly because a shell starts background jobs with it ignored;
    SIGHUP because its default would end the launcher and leave the children, which run
    in their own sessions, training on their own.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    wake_on_signals()
