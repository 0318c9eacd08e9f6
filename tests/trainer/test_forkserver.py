"""trainer.forkserver: tasks forked from a process that has imported TensorFlow, behaving
like the ``python -m`` / ``python -c`` processes the launcher used to exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from trainer.forkserver import ForkedProcess


def _run(code: str, *args: str, env: dict | None = None) -> tuple[int, str]:
    proc = ForkedProcess([sys.executable, "-c", code, *args], env or dict(os.environ))
    out = proc.stdout.read()
    return proc.wait(60), out


def test_code_runs_with_its_own_argv_environment_and_exit_code():
    code, out = _run("import os, sys; print(sys.argv[1:], os.environ['TASK_NAME']); "
                     "print('to stderr', file=sys.stderr); sys.exit(3)",
                     "--flag", "value", env={"TASK_NAME": "worker-1", "PATH": "/usr/bin"})
    assert code == 3
    assert out.splitlines() == ["['--flag', 'value'] worker-1", "to stderr"]


def test_tensorflow_is_imported_before_the_task_runs_and_the_task_has_its_own_session():
    code, out = _run("import os, sys; print('tensorflow' in sys.modules, "
                     "os.getsid(0) == os.getpid())")
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
    proc = ForkedProcess([sys.executable, "-c", "import time; print('up', flush=True); "
                          "time.sleep(60)"], dict(os.environ))
    try:
        assert proc.stdout.readline() == "up\n"
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM
        assert proc.returncode == -signal.SIGTERM
        proc.kill()  # a no-op once it has ended: its pid may belong to someone else now
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_only_python_dash_m_and_dash_c_are_supported():
    with pytest.raises(ValueError, match=r"argv \['python', 'train.py'\] is not supported"):
        ForkedProcess(["python", "train.py"], {})
