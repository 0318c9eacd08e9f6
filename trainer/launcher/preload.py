"""What the fork server imports once for every task (trainer/launcher/forkserver.py): TensorFlow,
Keras and the trainer's modules that use them.

Importing this module anywhere else does the same imports, nothing more; in the fork
server (FORK_SERVER_ENV set) it also leaves the launcher's session and, asked by
NETWORK_REPORT_ENV, first enters a private network namespace (trainer/launcher/netns.py):
before TensorFlow is imported, while the process has one thread. TensorFlow's
import prints its start-up banners (absl's notice, oneDNN's) on file descriptor 2, here
the launcher's terminal: they are caught and dropped like the tasks' own, and anything
else the import prints is passed on.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile

# Standard library only, no TensorFlow.
from trainer.launcher.forkserver import FORK_SERVER_ENV, NETWORK_REPORT_ENV
from trainer.launcher.netns import report_private_network

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _own_session() -> None:
    """Leave the launcher's process group: a signal to the group (Ctrl-C, ``timeout``, a
    closed terminal) would otherwise kill the fork server, and with it what the launcher
    knows of its tasks; the launcher stops the tasks itself."""
    try:
        os.setsid()
    except OSError:  # already a group leader: started some other way
        pass


def _import_quietly() -> None:
    from trainer.log_noise import is_log_noise

    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        # Keras imports matplotlib.pyplot if it can (for keras.visualization, which no task
        # uses): a good part of the fork server's import, before any task can start.
        hidden = sys.modules.setdefault("matplotlib", None) is None
        try:
            import keras  # noqa: F401
            import tensorflow  # noqa: F401

            import trainer.model  # noqa: F401
            import trainer.servers  # noqa: F401
            import trainer.training.checkpoints  # noqa: F401
            import trainer.training.distribution  # noqa: F401
            import trainer.training.finish  # noqa: F401
            import trainer.training.loop  # noqa: F401
            import trainer.training.run  # noqa: F401
        except ImportError as err:
            # multiprocessing ignores a preload's ImportError: say so, or every task would
            # silently import TensorFlow itself again. One line: each task that fails the
            # same way says how to fix it.
            print(
                f"fork server: preloading failed ({type(err).__name__}: {err}); each task "
                "imports TensorFlow itself",
                file=sys.stderr,
            )
        finally:
            if hidden:  # importable again (trainer.report draws with it)
                del sys.modules["matplotlib"]
            try:
                sys.stderr.flush()
            except OSError:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not is_log_noise(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


def _exit_without_teardown() -> None:
    """The fork server's last act: exit at once, skipping Python's teardown of the modules
    it imported (most of a second of CPU with TensorFlow loaded). The fork
    server holds the launcher's stdout, so whoever reads the launcher's output to its end
    would wait for that teardown after the launcher itself has exited. Its tasks end with
    os._exit and never run this."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


_in_fork_server = bool(os.environ.pop(FORK_SERVER_ENV, None))
if _in_fork_server:
    _own_session()
    _report = os.environ.pop(NETWORK_REPORT_ENV, None)
    if _report:
        report_private_network(_report)
_import_quietly()
if _in_fork_server:
    # Registered after TensorFlow's own exit handlers, so it runs first (atexit is LIFO).
    atexit.register(_exit_without_teardown)
