"""How a training task learns it must stop: Kubernetes' SIGTERM, a lost peer (an error from
TensorFlow), or no training progress for ``--peer_timeout`` seconds (the watchdog)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from trainer import tasklog
from trainer.contract.cluster_spec import PARAMETER_SERVER
from trainer.contract.exit_codes import EXIT_SIGTERM


class PeerLost(RuntimeError):
    """A peer (ps, or with ps 0 any worker) went away; the task should be restarted."""


def peer_lost(err: Exception, strategy_kind: str) -> PeerLost:
    """The PeerLost for ``err`` (a tf.errors.OpError raised while training under
    ``strategy_kind``): its message names the lost peer and the error's first line."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    what = "a parameter server" if strategy_kind == PARAMETER_SERVER else "a peer"
    return PeerLost(
        f"lost {what} ({type(err).__name__}: {first}); exiting so the task "
        "is restarted and resumes from the last checkpoint"
    )


class Watchdog:
    """Exit the process (code 1) when no training progress is seen for ``timeout_s``.

    The coordinator waits forever for lost workers and collectives can hang on a dead
    peer; this turns "lost peers for longer than a timeout" into a clear non-zero exit.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.last = time.monotonic()
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    def kick(self) -> None:
        """Training has progressed now."""
        self.last = time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(min(5.0, self.timeout_s / 4))
            idle = time.monotonic() - self.last
            if idle > self.timeout_s:
                print(
                    f"error: no training progress for {idle:.0f}s (--peer_timeout "
                    f"{self.timeout_s:g}s): peers lost; exiting so the task is restarted",
                    file=sys.stderr,
                    flush=True,
                )
                tasklog.exit_now(1)  # os._exit(1) once the message is in the task's log file


class SigtermFlag:
    """Whether this process has been sent SIGTERM (it installs the handler when made).

    Kubernetes deletes pods with SIGTERM, then SIGKILL after the grace period. Once training
    has begun (``training()``), the loop sees ``requested``, saves a checkpoint where it stands
    and the task exits 143. Before that there is nothing to save, so SIGTERM ends the task at
    once with EXIT_SIGTERM (143, which the Jobs' podFailurePolicy ignores), even while the main
    thread is inside TensorFlow waiting for peers that never come up: CPython runs a Python
    handler only on the main thread, between bytecodes, so the handler only records and a
    daemon thread, woken through ``signal.set_wakeup_fd``, acts. A handler is needed at all
    because in a container the task is PID 1, and the kernel drops signals PID 1 does not
    handle: the pod would stay for the whole grace period.

    Must be made on the main thread (``signal.signal`` and ``set_wakeup_fd`` require it).
    """

    def __init__(self, task: str) -> None:
        self.requested = False
        self._task, self._training = task, False
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        signal.set_wakeup_fd(write_fd)
        threading.Thread(target=self._watch, args=(read_fd,), name="sigterm", daemon=True).start()

    def training(self) -> None:
        """Training has begun: from now on SIGTERM asks the loop to save and stop."""
        self._training = True

    def _on_sigterm(self, signum, frame) -> None:
        self.requested = True

    def _watch(self, read_fd: int) -> None:
        while True:
            signals = os.read(read_fd, 64)  # one byte per signal delivered, its number
            if signal.SIGTERM in signals and not self._training:
                print(
                    f"{self._task}: stopped by SIGTERM before training began (nothing to save)",
                    file=sys.stderr,
                    flush=True,
                )
                tasklog.exit_now(EXIT_SIGTERM)
