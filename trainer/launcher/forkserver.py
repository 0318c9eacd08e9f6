"""Task processes forked from one process that has already imported TensorFlow.

Importing TensorFlow and Keras costs each ``python -m trainer`` process seconds of CPU. The
local launcher starts four such processes at once, and on two cores they spent most of the
run's start importing (docs/benchmarks.md, "Where the seconds went"). The standard
library's ``multiprocessing`` forkserver imports ``trainer.launcher.preload`` once and forks
every task from it, so a task starts serving a fraction of a second after it is asked for.

``ForkedProcess`` is the part of ``subprocess.Popen`` that the launcher uses (``pid``,
``stdout``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``): each task gets
its own session and its own output pipe (stdout and stderr together, like
``stderr=STDOUT``), and runs ``python -m <module> ...`` or ``python -c <code> ...`` argv
as the interpreter would (``runpy`` and ``exec``), with its own environment.

What a fork inherits that a fresh interpreter would not: what ``trainer.launcher.preload``
imported and anything read at import time (TensorFlow reads TF_CPP_MIN_LOG_LEVEL then;
the preload defaults it to 2 before importing). TensorFlow itself starts its thread pools,
devices and gRPC only when a task first uses them, after the fork.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import select
import signal
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection

#: Imported once by the fork server (see trainer/launcher/preload.py).
PRELOAD_MODULES = ["trainer.launcher.preload"]
#: Set (to 1) in the environment the fork server starts with: trainer.launcher.preload, run
#: there, then leaves the launcher's session.
FORK_SERVER_ENV = "TRAINER_FORK_SERVER"
#: Set (to a file's path) in the environment the fork server starts with, after
#: use_private_network: the preload enters a private network namespace and writes the
#: outcome there (trainer/launcher/netns.py).
NETWORK_REPORT_ENV = "TRAINER_NETWORK_REPORT"

_context = None
_network_report: str | None = None
#: The read end of the pipe that signal.set_wakeup_fd writes to (wake_on_signals), or None.
_signal_wakeup: int | None = None


def use_private_network(report_path: str | None) -> None:
    """Start the fork server, when it next starts, in a private network namespace, writing
    the outcome to ``report_path`` (None: in the machine's network). A fork server already
    running keeps its network."""
    global _network_report
    _network_report = report_path


def wake_on_signals() -> None:
    """Make every wait for a task's exit return as soon as a signal with a Python handler
    arrives, whichever thread of this process the kernel hands it to.

    CPython runs signal handlers in the main thread only, between bytecodes. A
    process-directed signal may go to any thread that does not block it; taken by another
    thread, it does not interrupt the main thread's wait, and the handler (a second Ctrl-C)
    would run only once that wait ends, up to STOP_GRACE_S later. CPython's own C handler
    writes to the wakeup fd from whichever thread it runs in, and the wait polls that fd too.
    Call it from the main thread (signal.set_wakeup_fd's rule); once is enough.
    """
    global _signal_wakeup
    if _signal_wakeup is None:
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        _signal_wakeup = read_fd


def _drain(fd: int) -> None:
    """Read what the signals wrote to ``fd`` (non-blocking) until it is empty."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def context():
    """The forkserver context, preloading PRELOAD_MODULES (the server starts on first use)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD_MODULES)
    return _context


class ForkedProcess:
    """``argv`` (``[python, "-m", module, ...]`` or ``[python, "-c", code, ...]``) run in a
    process forked from the fork server, with environment ``env``.

    Raises:
        ValueError: ``argv`` is neither form (the interpreter's other options are not
            supported).
    """

    def __init__(self, argv: list[str], env: dict, name: str = "task") -> None:
        if len(argv) < 3 or argv[1] not in ("-m", "-c"):
            raise ValueError(
                f"argv {argv!r} is not supported: must be [python, '-m', module, "
                "...] or [python, '-c', code, ...]"
            )
        read_fd, write_fd = os.pipe()
        out = Connection(write_fd, readable=False)
        # daemon: should the launcher ever exit with a task left, multiprocessing's exit
        # handler SIGTERMs it (a non-daemon one it would wait for).
        self._process = context().Process(
            target=_run_child, args=(argv[1:], dict(env), out), name=name, daemon=True
        )
        # Should this start (re)start the fork server, the preload sees the variables.
        os.environ[FORK_SERVER_ENV] = "1"
        if _network_report:
            os.environ[NETWORK_REPORT_ENV] = _network_report
        try:
            self._process.start()
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.environ.pop(FORK_SERVER_ENV, None)
            os.environ.pop(NETWORK_REPORT_ENV, None)
            out.close()  # the child has its own copy; EOF comes when the child is gone
        self.args = argv
        self.pid = self._process.pid
        self.stdout = os.fdopen(read_fd, "r", buffering=1, encoding="utf-8", errors="replace")
        # The task's own handle: signals go to it and no pid reuse can redirect them, and
        # it tells a live task from one whose fork server died (which reports 255).
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except ProcessLookupError:  # already gone
            self._pidfd = None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended (-N for signal N, as Popen), else None."""
        return self.poll()

    def poll(self) -> int | None:
        """``returncode`` without waiting."""
        return self._exit_code(0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; return its code.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        code = self._exit_code(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless the process has already ended."""
        if self._pidfd is not None and self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:  # ended meanwhile
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _exit_code(self, timeout: float | None) -> int | None:
        """The exit code, waiting up to ``timeout`` seconds (None: for ever) for the exit."""
        # The pidfd first: after the fork server's death multiprocessing reports 255 for a
        # task that is still running.
        if self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            if _signal_wakeup is not None:
                poller.register(_signal_wakeup, select.POLLIN)
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
                ready = {fd for fd, _ in poller.poll(left)}
                if self._pidfd in ready:
                    break
                if not ready:
                    return None  # alive, whatever the fork server's pipe says
                # A signal (see wake_on_signals): its handler runs in this thread on the way
                # back to this loop, and raises if it stops the wait.
                _drain(_signal_wakeup)
            os.close(self._pidfd)
            self._pidfd = None
        # Exited: the fork server reports the code as soon as it has reaped the task.
        self._process.join(None if timeout is None else max(timeout, 5.0))
        return self._process.exitcode


def _run_child(args: list[str], env: dict, out: Connection) -> None:
    """The child: own session (Ctrl-C in the terminal reaches only the launcher), output
    into ``out``, environment ``env``, then ``args`` as the interpreter would run them."""
    os.setsid()
    os.dup2(out.fileno(), 1)
    os.dup2(out.fileno(), 2)
    out.close()
    os.environ.clear()
    os.environ.update(env)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    code = run_python_args(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_python_args(args: list[str]) -> int:
    """Run ``["-m", module, *rest]`` or ``["-c", code, *rest]`` as ``python`` would; return
    the exit code (SystemExit's, or 1 after printing an uncaught exception's traceback)."""
    option, target, rest = args[0], args[1], args[2:]
    try:
        if option == "-m":
            sys.argv = [target, *rest]  # runpy puts the module's path first, as python does
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *rest]
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - as the interpreter: traceback, exit 1
        traceback.print_exc()
        return 1
    return 0
