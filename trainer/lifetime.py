"""A task's process lifetime: tied to the local launcher that started it, and the clean-up
that its final ``os._exit`` would otherwise skip.

The launcher starts each task in its own session, so Ctrl-C in the terminal reaches only the
launcher, which then stops the tasks in order. When the launcher dies without doing that
(SIGKILL, a crash) the tasks would go on: a chief training to the end, servers waiting up
to --peer_timeout. Linux's PR_SET_PDEATHSIG (prctl(2)) has the kernel send SIGKILL to the
task when its parent dies. SIGKILL, not SIGTERM: every task gets it at once, so the chief's
SIGTERM checkpoint could not reach the dead ps, and a chief waiting on dead workers stayed
until --peer_timeout (seen with SIGTERM); the last epoch's checkpoint is what a rerun resumes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

#: Set by the launcher in each task's environment: the launcher's pid.
LAUNCHER_PID_ENV = "TRAINER_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_launcher(environ: dict | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when the launcher in LAUNCHER_PID_ENV dies.

    Returns True when armed; False without the variable or off Linux (Kubernetes and
    manual runs). Exits 1 at once when the launcher is already gone (the race between the
    launcher's death and this call).
    """
    launcher = (environ if environ is not None else os.environ).get(LAUNCHER_PID_ENV)
    if not launcher or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if os.getppid() != int(launcher):
        print(f"error: the local launcher (pid {launcher}) is gone; exiting", file=sys.stderr,
              flush=True)
        os._exit(1)
    return True


#: Prefix of the modules TensorFlow's AutoGraph writes to the temporary directory
#: (tensorflow/python/autograph/pyct/loader.py); it deletes them from an atexit hook.
AUTOGRAPH_PREFIX = "__autograph_generated_file"


def remove_autograph_files() -> int:
    """Delete the AutoGraph source files this process wrote; return how many.

    ``python -m trainer`` ends with ``os._exit`` (TensorFlow's threads can keep a normal exit
    waiting), which skips atexit hooks, so without this every run would leave a few
    ``__autograph_generated_file*.py`` in the temporary directory.
    """
    import tempfile

    tmp = os.path.realpath(tempfile.gettempdir())
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not name.startswith(AUTOGRAPH_PREFIX) or not path:
            continue
        if os.path.dirname(os.path.realpath(path)) != tmp:
            continue
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    return removed
