"""trainer.tasklog (every task's output also in <log_dir>/logs/<task>.log) and the one
TensorBoard pin; real processes, no TensorFlow."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TASK = """
import os, sys
from trainer import tasklog
tasklog.start(sys.argv[1], "worker-3", " run_id r1")
print("from python", flush=True)
print("to stderr", file=sys.stderr, flush=True)
os.write(2, b"from C, fd 2\\n")
if sys.argv[2] == "mkdir":
    os.makedirs(sys.argv[1])
os._exit(7)  # abruptly: no stop(), as a crash would
"""


def run_task(log_dir: Path, mkdir: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", TASK, str(log_dir), "mkdir" if mkdir else "-"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def test_output_reaches_the_terminal_and_the_file_even_after_an_abrupt_exit(tmp_path):
    log_dir = tmp_path / "run"
    proc = run_task(log_dir, mkdir=True)
    assert proc.returncode == 7
    assert proc.stdout == "from python\n"  # stdout and stderr stay apart
    assert proc.stderr == "to stderr\nfrom C, fd 2\n"
    for _ in range(50):  # the helper writes the file after the task has gone
        text = (
            (log_dir / "logs" / "worker-3.log").read_text()
            if (log_dir / "logs" / "worker-3.log").exists()
            else ""
        )
        if "from C" in text:
            break
        time.sleep(0.1)
    assert re.match(r"==== worker-3 started \S+Z \(pid \d+\) run_id r1 ====\n", text)
    assert set(text.splitlines()[1:]) == {"from python", "to stderr", "from C, fd 2"}
    # a restarted task appends
    run_task(log_dir, mkdir=False)
    time.sleep(1)
    assert (log_dir / "logs" / "worker-3.log").read_text().count("==== worker-3 started") == 2


def test_a_task_whose_log_dir_never_appears_writes_nothing(tmp_path):
    proc = run_task(tmp_path / "never", mkdir=False)
    assert proc.stdout == "from python\n" and "from C, fd 2" in proc.stderr
    time.sleep(1)
    assert not (tmp_path / "never").exists()


#: Two stops at once, as when the launcher's SIGTERM reaches a task that is exiting: the
#: SIGTERM watcher's stop starts while the main thread's first one waits for the helper.
RACE = """
import sys, threading
from trainer import tasklog
tasklog.start(sys.argv[1], "chief-0")
helper = tasklog._state["helper"]
real_wait, second = helper.wait, {}
def call():
    try:
        tasklog.stop()
        second["error"] = None
    except Exception as e:
        second["error"] = repr(e)
def racing_wait(timeout=None):
    second["thread"] = threading.Thread(target=call)
    second["thread"].start()
    second["thread"].join(0.5)
    second["waited"] = second["thread"].is_alive()
    return real_wait(timeout)
helper.wait = racing_wait
tasklog.stop()
second["thread"].join(10)
print("second stop waited:", second["waited"], "error:", second["error"])
"""


def test_a_stop_during_another_waits_for_it_and_does_nothing(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", RACE, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "second stop waited: True error: None", proc.stdout + proc.stderr


def pin(path: Path) -> str:
    return next(
        line.split("#")[0].strip()
        for line in path.read_text().splitlines()
        if line.startswith("tensorboard==")
    )


def test_one_tensorboard_pin_for_the_trainer_the_venv_and_the_image():
    assert pin(REPO / "trainer" / "requirements.txt") == "tensorboard==2.21.0"
    assert pin(REPO / "requirements.txt") == "tensorboard==2.21.0"
    # The image installs the hash-pinned file docker/pin_requirements.py makes from that pin.
    assert pin(REPO / "docker" / "tensorboard-requirements.txt").split(" ")[0] == "tensorboard==2.21.0"
    dockerfile = (REPO / "docker" / "tensorboard.Dockerfile").read_text()
    assert "COPY docker/tensorboard-requirements.txt /tmp/requirements.txt" in dockerfile
    assert (
        "!docker/tensorboard-requirements.txt"
        in (REPO / "docker" / "tensorboard.Dockerfile.dockerignore").read_text()
    )
