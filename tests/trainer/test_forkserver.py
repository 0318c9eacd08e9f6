"""trainer.launcher.forkserver: tasks forked from a process that has imported TensorFlow, behaving
like the ``python -m`` / ``python -c`` processes the launcher used to exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from trainer.launcher.forkserver import ForkedProcess


def _run(code: str, *args: str, env: dict | None = None) -> tuple[int, str]:
    proc = ForkedProcess([sys.executable, "-c", code, *args], env or dict(os.environ))
    out = proc.stdout.read()
    return proc.wait(60), out


def test_code_runs_with_its_own_argv_environment_and_exit_code():
    code, out = _run(
        "import os, sys; print(sys.argv[1:], os.environ['TASK_NAME']); "
        "print('to stderr', file=sys.stderr); sys.exit(3)",
        "--flag",
        "value",
        env={"TASK_NAME": "worker-1", "PATH": "/usr/bin"},
    )
    assert code == 3
    assert out.splitlines() == ["['--flag', 'value'] worker-1", "to stderr"]


def test_tensorflow_is_imported_before_the_task_runs_and_the_task_has_its_own_session():
    code, out = _run("import os, sys; print('tensorflow' in sys.modules, os.getsid(0) == os.getpid())")
    assert (code, out.strip()) == (0, "True True")


def test_a_module_runs_as_main_like_python_dash_m():
    proc = ForkedProcess([sys.executable, "-m", "trainer", "--help"], dict(os.environ))
    out = proc.stdout.read()
    assert proc.wait(60) == 0
    assert out.startswith("usage: python -m trainer")


def test_an_uncaught_exception_prints_its_traceback_and_exits_1():
    code, out = _run("raise RuntimeError('boom')")
    assert code == 1
    assert "Traceback (most recent call last)" in out and "RuntimeError: boom" in out


def test_wait_times_out_and_a_killed_task_reports_the_signal():
    proc = ForkedProcess(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], dict(os.environ)
    )
    try:
        assert proc.stdout.readline() == "up\n"
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == -signal.SIGTERM  # at once; 60 s for a loaded machine
        assert proc.returncode == -signal.SIGTERM
        proc.kill()  # a no-op once it has ended: its pid may belong to someone else now
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_only_python_dash_m_and_dash_c_are_supported():
    with pytest.raises(ValueError, match=r"argv \['python', 'train.py'\] is not supported"):
        ForkedProcess(["python", "train.py"], {})


def _fork_server_pid() -> int:
    import psutil

    servers = [
        p for p in psutil.Process().children() if "multiprocessing.forkserver" in " ".join(p.cmdline())
    ]
    assert len(servers) == 1, servers
    return servers[0].pid


def test_the_fork_server_has_its_own_session_and_its_death_leaves_tasks_known_alive():
    # A signal to the launcher's process group (Ctrl-C, timeout, a closed terminal) must not
    # reach the fork server; should it die anyway, a task it forked is still running and
    # still stoppable, and the next task gets a new fork server.
    proc = ForkedProcess(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], dict(os.environ)
    )
    try:
        assert proc.stdout.readline() == "up\n"
        server = _fork_server_pid()
        assert os.getsid(server) == server != os.getsid(0)
        os.kill(server, signal.SIGKILL)
        while _alive_pid(server):  # not reaped here: multiprocessing reaps it, then restarts it
            time.sleep(0.05)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        # Its exit code died with the fork server: multiprocessing reports 255.
        assert proc.wait(60) == 255  # at once; 60 s for a loaded machine
        assert _alive_pid(proc.pid) is False
    finally:
        if _alive_pid(proc.pid):
            os.kill(proc.pid, signal.SIGKILL)
    code, out = _run("print('again')")
    assert (code, out) == (0, "again\n")
    assert _fork_server_pid() != server


def _alive_pid(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped while read (ESRCH)
        return False


def test_the_fork_server_exits_without_tearing_down_what_it_imported():
    # What the preload does in the fork server, in a process of its own: a handler
    # registered before it (as TensorFlow's own are) never runs, and output still buffered
    # at the exit is written.
    code = (
        "import atexit, os, sys\n"
        "atexit.register(print, 'teardown ran', flush=True)\n"
        "os.environ['TRAINER_FORK_SERVER'] = '1'\n"
        "import trainer.launcher.preload\n"
        "sys.stdout.write('buffered, not flushed')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": ""},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "buffered, not flushed"
