"""A task's life tied to the local launcher that started it.

The launcher starts each task in its own session, so Ctrl-C in the terminal reaches only the
launcher, which then stops the tasks in order. When the launcher dies without doing that
(SIGKILL, a crash) the tasks would go on: a chief training to the end, servers waiting up
to --peer_timeout. So each task watches the launcher through a pidfd (pidfd_open(2), Linux
5.3): a thread waits until it becomes readable, which is when the launcher has exited, and
then SIGKILLs the task. Not PR_SET_PDEATHSIG: the tasks are children of the fork server
(trainer/launcher/forkserver.py), not of the launcher, and the fork server outlives the launcher
for as long as a task holds its pipe. SIGKILL, not SIGTERM: every task gets it at once,
so the chief's SIGTERM checkpoint could not reach the dead ps, and a chief waiting on dead
workers stayed until --peer_timeout (seen with SIGTERM); the last epoch's checkpoint is
what a rerun resumes.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading

#: Set by the launcher in each task's environment: the launcher's pid.
LAUNCHER_PID_ENV = "TRAINER_LAUNCHER_PID"


def exit_with_launcher(environ: dict | None = None) -> bool:
    """SIGKILL this process as soon as the launcher in LAUNCHER_PID_ENV exits.

    Returns True when armed; False without the variable or without pidfds (not Linux,
    or Linux before 5.3: Kubernetes pods and manual runs do not need it). Exits 1 at once
    when the launcher is already gone (the race between the launcher's death and this
    call).
    """
    launcher = (environ if environ is not None else os.environ).get(LAUNCHER_PID_ENV)
    if not launcher or not hasattr(os, "pidfd_open"):
        return False
    try:
        pidfd = os.pidfd_open(int(launcher))
    except ProcessLookupError:
        print(f"error: the local launcher (pid {launcher}) is gone; exiting", file=sys.stderr, flush=True)
        os._exit(1)
    except OSError:  # ENOSYS: a kernel without pidfds
        return False

    def wait_for_launcher() -> None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while True:
            for _, events in poller.poll():
                if events & select.POLLIN:  # the launcher has exited
                    os.kill(os.getpid(), signal.SIGKILL)
                if events & select.POLLNVAL:  # the pidfd was closed: nothing to watch
                    return

    threading.Thread(target=wait_for_launcher, name="exit-with-launcher", daemon=True).start()
    return True
