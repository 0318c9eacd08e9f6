"""The local launcher (python -m trainer.local): its flag checks, its tasks' ports and
threads, how it stops them (a second Ctrl-C, a closed terminal, its own death; no restart once
the chief has finished), and the TensorFlow start-up noise it drops from their output."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.contract.cluster_spec import Replicas
from trainer.launcher.supervisor import free_ports, intra_op_threads

REPO = Path(__file__).resolve().parents[2]


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(4)
    assert len(set(ports)) == 4
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("localhost", port))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--workers", "0"], "--workers 0 is invalid: must be an integer >= 1"),
        (["--ps", "-1"], "--ps -1 is invalid: must be an integer >= 0"),
        (["--epochs", "0"], "--epochs 0 is invalid: must be an integer >= 1"),
    ],
)
def test_launcher_rejects_bad_flags(argv, message):
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.local", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and message in proc.stderr


def test_intra_op_threads_share_the_cores_among_computing_tasks():
    assert intra_op_threads(Replicas(chief=1, worker=2, ps=1), cpus=2) == 1
    assert intra_op_threads(Replicas(chief=1, worker=2, ps=1), cpus=16) == 8
    assert intra_op_threads(Replicas(chief=1, worker=2, ps=0), cpus=16) == 5
    assert intra_op_threads(Replicas(chief=1, worker=4, ps=1), cpus=2) == 1
    # With ps the chief evaluates while the workers wait: every core.
    assert intra_op_threads(Replicas(chief=1, worker=2, ps=1), cpus=2, task_type="chief") == 2
    assert intra_op_threads(Replicas(chief=1, worker=2, ps=0), cpus=2, task_type="chief") == 1


# A stand-in task that ignores SIGTERM (like a TensorFlow process stuck in a gRPC call); it
# says so, which tells the test that the launcher is inside its graceful stop.
_STUBBORN_TASK = (
    "import signal, time; signal.signal(signal.SIGTERM, "
    "lambda *_: print('ignored SIGTERM', flush=True)); "
    "print('up', flush=True); time.sleep(120)"
)
# A stand-in task that, like `python -m trainer`, ties its life to the launcher's.
_TIED_TASK = (
    "import time; from trainer.launcher.lifetime import exit_with_launcher; "
    "assert exit_with_launcher(); print('up', flush=True); time.sleep(120)"
)
_DRIVER = """
import sys
from trainer.contract.cluster_spec import Replicas
from trainer.launcher.supervisor import Launcher, install_signal_handlers
launcher = Launcher(Replicas(chief=1, worker=1, ps=1), [], backoff_limit=0)
for task in launcher.tasks.values():
    task.argv = [sys.executable, "-c", sys.argv[1]]
install_signal_handlers()
sys.exit(launcher.run())
"""


def _start_driver(task_code: str):
    """A launcher of three stand-in tasks; returns (launcher process, task pids) once all
    three tasks are up."""
    import re

    proc = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, task_code],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    pids, ups, lines = [], 0, []
    while ups < 3 or len(pids) < 3:  # a task's 'up' can come before its 'started' line
        line = proc.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
        ups += line.rstrip().endswith("] up")
        pids += [int(p) for p in re.findall(r"started \S+ \(pid (\d+)\)", line)]
    assert len(pids) == 3
    return proc, pids


def _wait_gone(pids: list[int]) -> list[int]:
    """Waits until none of ``pids`` is alive (a task the launcher failed to stop keeps the
    test waiting, where its traceback shows it); returns those alive: none."""
    import time

    while any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _kill(pids: list[int]) -> None:
    import signal

    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        # Reaped since the kill above: the read of a vanishing /proc entry fails with ESRCH.
        return False


#: Waits for a task that sleeps for a minute while another thread of the process takes a
#: SIGINT (signal.pthread_kill aims it there), as the kernel may do with a Ctrl-C.
_OTHER_THREAD_DRIVER = """
import signal, sys, threading, time
from trainer.launcher.forkserver import ForkedProcess
from trainer.launcher.supervisor import install_signal_handlers
install_signal_handlers()
proc = ForkedProcess([sys.executable, "-c", "import time; time.sleep(60)"], {}, name="sleeper")
def interrupt_this_thread():
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
threading.Thread(target=interrupt_this_thread, daemon=True).start()
start = time.monotonic()
try:
    proc.wait(60)
    print("the wait ended without the interrupt")
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - start:.1f} s")
finally:
    proc.kill()
    proc.wait()
"""


def test_a_ctrl_c_taken_by_another_thread_still_ends_the_wait_for_a_task():
    # Python runs handlers in the main thread only: taken by another thread, the signal
    # used to wait until the main thread's wait ended (the graceful stop's 30 s).
    import re

    proc = subprocess.run(
        [sys.executable, "-c", _OTHER_THREAD_DRIVER], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"interrupted after ([0-9.]+) s", proc.stdout)
    assert found, proc.stdout + proc.stderr
    # About 0.5 s; the wait itself would last 60 s.
    assert float(found.group(1)) < 30, proc.stdout


def test_a_second_ctrl_c_kills_every_task_at_once(tmp_path):
    # Users press Ctrl-C twice; the tasks run in their own sessions (so the terminal's
    # SIGINT reaches only the launcher), so the launcher must not leave them behind.
    import signal
    import time

    from trainer.launcher.supervisor import STOP_GRACE_S

    proc, pids = _start_driver(_STUBBORN_TASK)
    proc.send_signal(signal.SIGINT)
    # The second Ctrl-C once the launcher is in its graceful stop (the chief got its SIGTERM),
    # not after a guessed pause: on a loaded machine the first may not have been handled yet.
    lines = []
    while "[chief-0] ignored SIGTERM" not in "".join(lines):
        line = proc.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate()
    finally:
        for pid in pids:  # clean up even when the launcher is broken
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
    took = time.monotonic() - start
    out = "".join(lines) + out
    assert proc.returncode == 130, out
    assert "interrupted again: killing every task" in out
    # Killed by the second Ctrl-C, not by the graceful stop's SIGKILL after STOP_GRACE_S.
    assert "ignored SIGTERM for" not in out, out
    assert took < STOP_GRACE_S, f"took {took:.1f} s"
    assert [pid for pid in pids if _alive(pid)] == []


def test_closing_the_terminal_stops_every_task(tmp_path):
    import signal

    proc, pids = _start_driver(_TIED_TASK)
    proc.send_signal(signal.SIGHUP)
    try:
        out, _ = proc.communicate()
    finally:
        _kill(pids)
        proc.kill()
    assert proc.returncode == 130, out
    assert "interrupted: stopping every task" in out
    assert _wait_gone(pids) == []


def test_tasks_exit_when_the_launcher_is_killed(tmp_path):
    # Even a task that would not end on SIGTERM (a chief waiting on its dead peers).
    import signal

    proc, pids = _start_driver("import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + _TIED_TASK)
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    try:
        assert _wait_gone(pids) == []
    finally:
        _kill(pids)


_AFTER_CHIEF_DRIVER = """
import sys
from trainer.launcher import supervisor
from trainer.contract.cluster_spec import Replicas
# worker-0's restart stays pending for as long as the test runs: only the chief's end cancels it.
supervisor.BACKOFF_BASE_S = supervisor.BACKOFF_MAX_S = 3600.0
launcher = supervisor.Launcher(Replicas(chief=1, worker=2, ps=0), [], backoff_limit=3)
until_go = "import os, time\\nwhile not os.path.exists(%r): time.sleep(0.05)" % sys.argv[1]
code = {"chief-0": until_go, "worker-0": "raise SystemExit(1)", "worker-1": until_go}
for task in launcher.tasks.values():
    task.argv = [sys.executable, "-c", code[task.name]]
sys.exit(launcher.run())
"""


def test_no_task_is_restarted_after_the_chief_has_finished(tmp_path):
    # The chief and worker-1 end when the test creates `go`, which it does once the launcher
    # has scheduled worker-0's restart: the order is the test's, not the scheduler's (with
    # timed sleeps a loaded machine could see the chief's and worker-0's exits in one poll).
    import threading

    go = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-c", _AFTER_CHIEF_DRIVER, str(go)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    guard = threading.Timer(300, proc.kill)  # a launcher that never says so must not hang the suite
    guard.start()
    lines = []
    try:
        while "worker-0 exited with code 1; restart 1 of 3" not in "".join(lines):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        go.touch()
        out, _ = proc.communicate()
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines) + out
    assert proc.returncode == 0, out
    assert out.count("started worker-0") == 1, out
    assert "worker-0: restart cancelled, the chief has finished" in out
    assert "every task ended; non-zero: worker-0=1" in out
    assert out.count("worker-0 exited") == 1, out


def test_tensorflow_start_up_noise_is_dropped_and_real_messages_kept():
    from trainer.log_noise import is_log_noise

    # Lines printed by every task of a real run (TensorFlow 2.21, 2 workers + 1 ps).
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        "I0000 00:00:1796008922.813621   22302 port.cc:153] oneDNN custom operations are on. "
        "You may see slightly different numerical results due to floating-point round-off "
        "errors from different computation orders. To turn them off, set the environment "
        "variable `TF_ENABLE_ONEDNN_OPTS=0`.\n",
        "WARNING:tensorflow:5 out of the last 5 calls to <function MultiDeviceSaver.save."
        "<locals>.tf_function_save at 0x7f2c182e6660> triggered tf.function retracing. "
        "Tracing is expensive\n",
    ]
    kept = [
        "Step: 50,  Epoch: 1,  Batch: 50 of 250,  Cost: 1.6910,  AvgTime: 49.27ms\n",
        "E0000 00:00:1796008922.813621   22302 grpc_server_lib.cc:1] Failed to start server\n",
        "WARNING:tensorflow:5 out of the last 5 calls to <function train_steps at 0x7f> "
        "triggered tf.function retracing.\n",
        "error: /data/mnist/train-images-idx3-ubyte.gz: file is missing\n",
    ]
    assert [is_log_noise(line) for line in noise] == [True] * 3
    assert [is_log_noise(line) for line in kept] == [False] * 4


class _ExitsOnSecondPoll:
    """A task process that is still running at the first poll and has exited 0 at every later
    one: what the launcher sees when a task exits between two of its polls in one pass."""

    pid = 0

    def __init__(self, running_polls: int) -> None:
        self.polls = 0
        self.running_polls = running_polls
        self.returncode: int | None = None

    def poll(self) -> int | None:
        self.polls += 1
        if self.polls > self.running_polls:
            self.returncode = 0
        return self.returncode


def test_a_task_that_exits_during_the_final_check_is_reported_before_the_end():
    import io

    from trainer.launcher.supervisor import Launcher

    out = io.StringIO()
    launcher = Launcher(Replicas(chief=1, worker=2, ps=1), [], backoff_limit=0, out=out)
    for task in launcher.tasks.values():
        task.proc = _ExitsOnSecondPoll(running_polls=1 if task.name == "worker-0" else 0)
    assert launcher._watch(launcher.tasks["chief-0"]) == 0
    lines = out.getvalue().splitlines()
    assert any(line.endswith("worker-0 exited 0") for line in lines), lines
    assert lines[-1].endswith("every task exited 0"), lines
    for name in ("ps-0", "worker-0", "worker-1"):
        assert sum(line.endswith(f"{name} exited 0") for line in lines) == 1, lines
