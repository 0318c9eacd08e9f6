"""A run that ends for good ends every task at once: the chief's failed marker
(trainer/servers.py), and a full volume as a permanent error (trainer/volume.py)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.contract import recipe
from trainer.contract.exit_codes import (
    EXIT_BAD_DATA,
    EXIT_CHIEF_FAILED,
    EXIT_VOLUME_FULL,
    PERMANENT_EXIT_CODES,
)
from trainer.servers import ClusterFiles, server_decision

REPO = Path(__file__).resolve().parents[2]


def test_a_failed_marker_of_the_run_ends_a_server_at_once(tmp_path):
    files = ClusterFiles(tmp_path, run_id="r1")
    files.touch_heartbeat()  # the chief was alive a moment ago
    now = time.time()
    assert server_decision(files, now - 1, now, 600) is None
    ClusterFiles(tmp_path, run_id="r1").mark_failed(EXIT_BAD_DATA)
    code, message = server_decision(files, now - 1, now, 600)
    assert code == "failed"
    assert message.startswith(
        f"the chief ended for good (exit 3: bad data; its log says why; {files.failed} written); exiting 5"
    )
    assert files.failed_code() == EXIT_BAD_DATA
    assert EXIT_CHIEF_FAILED in PERMANENT_EXIT_CODES  # so the server's Job fails too


def test_another_run_s_failed_marker_is_ignored_and_a_restarted_chief_clears_it(tmp_path):
    ClusterFiles(tmp_path, run_id="old").mark_failed(EXIT_BAD_DATA)
    files = ClusterFiles(tmp_path, run_id="new")
    now = time.time()
    assert files.failed_code() is None
    assert server_decision(files, now - 1, now, 600) is None
    old = ClusterFiles(tmp_path, run_id="old")
    old.clear_failed()
    assert old.failed_code() is None and not old.failed.exists()


def test_without_run_ids_only_a_failed_marker_of_the_server_s_time_counts(tmp_path):
    files = ClusterFiles(tmp_path, run_id="")
    files.mark_failed(EXIT_BAD_DATA)
    os.utime(files.failed, (1000.0, 1000.0))  # left by an earlier run
    assert server_decision(files, 1100.0, 1101.0, 600) is None
    code, _ = server_decision(files, 1002.0, 1003.0, 600)
    assert code == "failed"


def _train_state(tmp_path: Path):
    import tensorflow as tf

    from trainer.contract.cluster_spec import TaskConfig
    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training.checkpoints import TrainState

    args = argparse.Namespace(
        **(
            recipe.defaults()
            | dict(
                log_dir=str(tmp_path / "run"),
                learning_rate=0.01,
                lr_schedule="constant",
                optimizer="sgd",
                epochs=1,
            )
        )
    )
    return TrainState(
        tf.distribute.get_strategy(),
        PackedWeights(build_model("mlp", 0.0)).initial_value(),
        args,
        10,
        TaskConfig({}),
        time.time(),
        learning_rate=args.learning_rate,
    )


def _stop_and_read(proc: subprocess.Popen) -> str:
    """A failed check's message: the task stopped (SIGKILL) and what it wrote to stderr."""
    proc.kill()
    return proc.communicate()[1]


def _raise(err: BaseException):
    def save(*args, **kwargs):
        raise err

    return save


def test_no_space_while_checkpointing_is_a_permanent_error_naming_volume_and_key(tmp_path):
    from trainer.volume import VolumeFull

    state = _train_state(tmp_path)
    assert state.save(1, 0).endswith("ckpt-1")  # the real writer works
    state.manager.save = _raise(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    with pytest.raises(VolumeFull) as caught:
        state.save(1, 5)
    assert str(caught.value) == (
        f"the volume holding --log_dir {tmp_path / 'run'} is full: saving a checkpoint in "
        f"{tmp_path / 'run' / 'checkpoints'} failed ([Errno 28] No space left on device); a "
        "restart cannot cure it: free space there, or give the volume more (on Kubernetes "
        "pulumi config set persistence.pvc.storage <size>, e.g. 10Gi, then pulumi up)"
    )


def test_tensorflow_s_no_space_error_is_the_same_and_a_lost_ps_is_not(tmp_path):
    import tensorflow as tf

    from trainer.volume import VolumeFull

    state = _train_state(tmp_path)
    state.manager.save = _raise(
        tf.errors.ResourceExhaustedError(
            None, None, f"{tmp_path}/run/checkpoints/ckpt-1_temp/part-00000; No space left on device"
        )
    )
    with pytest.raises(VolumeFull, match=r"failed \(.*No space left on device\); a restart"):
        state.save(1, 0)
    lost = tf.errors.UnavailableError(None, None, "Socket closed")
    state.manager.save = _raise(lost)
    with pytest.raises(tf.errors.UnavailableError):  # still read as a lost ps, and retried
        state.save(1, 0)


def test_a_full_volume_exits_4(monkeypatch, tmp_path, capsys):
    from trainer import __main__ as task_main
    from trainer.training import run as run_mod
    from trainer.volume import VolumeFull

    monkeypatch.setattr(run_mod, "run", _raise(VolumeFull("the volume holding ... is full")))
    assert task_main.train(argparse.Namespace(), None) == EXIT_VOLUME_FULL
    assert EXIT_VOLUME_FULL in PERMANENT_EXIT_CODES
    assert capsys.readouterr().err == "error: the volume holding ... is full\n"


def _task(task_type: str, cluster: dict, log_dir: Path, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainer",
            "--log_dir",
            str(log_dir),
            "--run_id",
            "r1",
            "--epochs",
            "1",
            "--peer_timeout",
            "600",
            *extra,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_chief_that_fails_for_good_ends_the_ps_and_the_worker_at_once(tmp_path):
    from trainer.launcher.supervisor import free_ports

    ports = free_ports(3)
    cluster = {t: [f"localhost:{p}"] for t, p in zip(("chief", "worker", "ps"), ports)}
    start = time.monotonic()
    servers = {t: _task(t, cluster, tmp_path) for t in ("ps", "worker")}
    try:
        # Bad data: a permanent error, found before the chief connects to anyone.
        chief = _task("chief", cluster, tmp_path, "--data_dir", str(tmp_path / "nowhere"))
        assert chief.wait() == EXIT_BAD_DATA, chief.stderr.read()
        outputs = {t: p.communicate() for t, p in servers.items()}
    finally:
        for proc in servers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    wall_s = time.monotonic() - start
    for task_type, proc in servers.items():
        assert proc.returncode == EXIT_CHIEF_FAILED, outputs[task_type]
        assert (
            f"{task_type} 0: the chief ended for good (exit 3: bad data; its log says why"
            in outputs[task_type][1]
        ), outputs[task_type]
    assert (tmp_path / "cluster" / "failed").read_text().startswith("run_id=r1\ncode=3\n")
    # Long before the 600 s peer timeout the servers would otherwise have waited.
    assert wall_s < 300, wall_s


@pytest.mark.slow
def test_sigterm_ends_a_chief_waiting_for_its_peers_at_once(tmp_path):
    """A chief whose worker and ps never come up (unschedulable pods) is stuck inside
    TensorFlow's connect; SIGTERM (its Job ended by the run monitor) must end it with 143 at
    once, not leave it to the SIGKILL at the end of the grace period."""
    from trainer.contract.exit_codes import EXIT_SIGTERM
    from trainer.launcher.supervisor import free_ports

    ports = free_ports(3)
    cluster = {t: [f"localhost:{p}"] for t, p in zip(("chief", "worker", "ps"), ports)}
    chief = _task("chief", cluster, tmp_path)
    try:
        heartbeat = tmp_path / "cluster" / "heartbeat"
        while not heartbeat.exists() and chief.poll() is None:  # until it beats or ends
            time.sleep(0.2)
        assert heartbeat.exists(), _stop_and_read(chief)
        time.sleep(15)  # TensorFlow imported, the chief waiting for the absent ps and worker
        assert chief.poll() is None, _stop_and_read(chief)
        sent = time.monotonic()
        chief.terminate()
        _, err = chief.communicate()
        waited_s = time.monotonic() - sent
    finally:
        if chief.poll() is None:
            chief.kill()
            chief.wait()
    assert chief.returncode == EXIT_SIGTERM, err
    assert "chief-0: stopped by SIGTERM before training began (nothing to save)" in err, err
    assert waited_s < 30, waited_s
