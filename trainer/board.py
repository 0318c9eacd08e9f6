"""TensorBoard for a local run: the real TensorBoard (the pinned ``tensorboard`` package) on a
run's log directory, on loopback.

``python -m trainer.local --tensorboard`` starts it before training and stops it with the
launcher; ``python -m trainer.board [RUN_DIR]`` opens a finished run (by default the newest
one under ``runs/``). Either prints the URL, serves until Ctrl-C and stops TensorBoard when
it stops (also when it is killed: the kernel kills TensorBoard with it).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from trainer.contract.progress import TRAIN_SUBDIR

#: Seconds TensorBoard gets to answer its URL: it imports TensorFlow when installed, which
#: takes seconds on a busy machine; 90 s is several times that.
START_TIMEOUT_S = 90.0
#: Seconds between TensorBoard's rereads of the log directory (its default is 5).
RELOAD_INTERVAL_S = 2
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class BoardError(RuntimeError):
    """TensorBoard could not be started (not installed, port taken, exited early)."""


def free_port(host: str) -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class TensorBoardServer:
    """One ``tensorboard --logdir <logdir> --host <host> --port <port>`` process.

    Args:
        logdir: the run's log directory (TensorBoard lists its ``train`` and ``validation``
            runs), or a directory of runs (``<run>/train``, ``<run>/validation`` each).
        port: 0 picks a free one.
        out: where TensorBoard's own lines go, prefixed ``[tensorboard] ``.
    """

    def __init__(
        self,
        logdir: str | Path,
        port: int = 0,
        host: str = "127.0.0.1",
        out: TextIO | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.logdir = Path(logdir)
        self.host = host
        self.port = port or free_port(host)
        self.out = out or sys.stdout
        self.lock = lock or threading.Lock()
        self.proc: subprocess.Popen | None = None
        self._lines: list[str] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Start TensorBoard and wait until its URL answers; return the URL.

        Raises:
            BoardError: the package is missing, or TensorBoard exited or did not answer
                within ``timeout_s`` (its last lines are in the message).
        """
        try:
            import tensorboard  # noqa: F401 - only to say what is missing
        except ImportError:
            raise BoardError(
                "the tensorboard package is not installed: "
                ".venv/bin/pip install -r requirements.txt (it pins "
                "tensorboard==2.21.0)"
            ) from None
        cmd = [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(self.logdir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--reload_interval",
            str(RELOAD_INTERVAL_S),
        ]
        # TensorBoard imports TensorFlow when it is installed: keep its C++ banners quiet.
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._stream, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                time.sleep(0.2)  # the last lines
                raise BoardError(
                    f"TensorBoard exited with code {self.proc.returncode}: " + " | ".join(self._lines[-5:])
                )
            if self.answers():
                return self.url
            time.sleep(0.3)
        self.stop()
        raise BoardError(f"TensorBoard did not answer on {self.url} within {timeout_s:g}s")

    def _stream(self) -> None:
        from trainer.log_noise import is_log_noise

        for line in self.proc.stdout:
            if is_log_noise(line):
                continue
            self._lines.append(line.rstrip("\n"))
            with self.lock:
                self.out.write(f"[tensorboard] {line}")
                self.out.flush()

    def answers(self) -> bool:
        """Whether TensorBoard answers HTTP on its URL now."""
        try:
            with urllib.request.urlopen(self.url + "data/logdir", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM TensorBoard, SIGKILL it after ``grace_s``; reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def serve_until_interrupted(self, say: Callable[[str], None]) -> None:
        """Keep serving until Ctrl-C (KeyboardInterrupt) or until TensorBoard exits."""
        say(f"TensorBoard serving {self.url} (logdir {self.logdir}): Ctrl-C to stop")
        try:
            while self.running():
                time.sleep(0.5)
            say(f"TensorBoard exited with code {self.proc.returncode}")
        except KeyboardInterrupt:
            say("interrupted: stopping TensorBoard")


def newest_run(runs: Path = Path("runs")) -> Path | None:
    """The most recently written run directory under ``runs`` (one holding TensorBoard
    events), or None."""
    candidates = [p.parent for p in runs.glob(f"*/{TRAIN_SUBDIR}") if p.is_dir()]
    if not candidates:
        return None
    return max(candidates, key=lambda p: (p / TRAIN_SUBDIR).stat().st_mtime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.board",
        description="Serve TensorBoard on a run's log directory (loopback) until Ctrl-C.",
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        help="the run's --log_dir, or a directory of runs (default: the newest run under runs/)",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir) if args.run_dir else newest_run()
    if run_dir is None:
        parser.error("no run under runs/: give the run's directory (its --log_dir)")
    if not run_dir.is_dir():
        parser.error(f"{run_dir} is not a directory")
    board = TensorBoardServer(run_dir, args.port, args.host)

    def say(message: str) -> None:
        with board.lock:
            print(f"[board] {message}", flush=True)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        url = board.start()
        say(f"TensorBoard {url} (logdir {run_dir})")
        board.serve_until_interrupted(say)
    except BoardError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        board.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
