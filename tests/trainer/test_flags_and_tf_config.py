"""Flag validation and TF_CONFIG parsing (strategy choice) of ``python -m trainer``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer import flags
from trainer.contract.cluster_spec import (
    MULTI_WORKER_MIRRORED,
    PARAMETER_SERVER,
    SINGLE_PROCESS,
    ClusterSpecError,
    Replicas,
    local_cluster_spec,
    parse_tf_config,
    tf_config_json,
)

REPO = Path(__file__).resolve().parents[2]


def run_trainer(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )


def test_defaults_are_the_recipes():
    args = flags.parse([])
    assert (args.epochs, args.batch_size, args.learning_rate) == (2, 64, 0.004)
    assert Path(args.data_dir) == flags.BUNDLED_DATA_DIR and args.model == "convnet_fc_slim"


def test_the_learning_rate_scales_with_synchronous_replicas_as_asked():
    assert flags.parse([]).lr_scaling == "sqrt"
    assert flags.scaled_learning_rate(0.004, "none", 3) == 0.004
    assert flags.scaled_learning_rate(0.004, "sqrt", 3) == pytest.approx(0.004 * 3**0.5)
    assert flags.scaled_learning_rate(0.004, "linear", 3) == pytest.approx(0.012)
    assert flags.scaled_learning_rate(0.004, "sqrt", 1) == 0.004
    with pytest.raises(
        flags.FlagError,
        match=r"^--learning_rate 1e\+308 is invalid with "
        r"--lr_scaling linear and 2 synchronous "
        r"replicas: the scaled rate inf must be finite$",
    ):
        flags.scaled_learning_rate(1e308, "linear", 2)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch_size", "0"], "--batch_size 0 is invalid: must be an integer >= 1"),
        (["--epochs", "0"], "--epochs 0 is invalid: must be an integer >= 1"),
        (["--learning_rate", "0"], "--learning_rate 0.0 is invalid: must be > 0 and finite"),
        (["--learning_rate", "-0.1"], "--learning_rate -0.1 is invalid: must be > 0 and finite"),
        (["--learning_rate", "inf"], "--learning_rate inf is invalid: must be > 0 and finite"),
        (["--learning_rate", "nan"], "--learning_rate nan is invalid: must be > 0 and finite"),
        (["--steps_per_execution", "0"], "--steps_per_execution 0 is invalid: must be an integer >= 1"),
        (["--augment_shift", "8"], "--augment_shift 8 is invalid: must be an integer from 0 to 7 pixels"),
        (["--augment_shift", "-1"], "--augment_shift -1 is invalid: must be an integer from 0 to 7 pixels"),
        (["--label_smoothing", "1"], "--label_smoothing 1.0 is invalid: must be >= 0 and < 1"),
        (["--label_smoothing", "-0.1"], "--label_smoothing -0.1 is invalid: must be >= 0 and < 1"),
        (["--label_smoothing", "nan"], "--label_smoothing nan is invalid: must be >= 0 and < 1"),
        (["--dropout", "1"], "--dropout 1.0 is invalid: must be >= 0 and < 1"),
        (["--seed", "-1"], "--seed -1 is invalid: must be an integer from 0 to 2147483647"),
        (["--local_steps", "0"], "--local_steps 0 is invalid: must be an integer >= 1"),
    ],
)
def test_invalid_flag_is_named(argv, message):
    args = flags.build_parser().parse_args(argv)
    with pytest.raises(flags.FlagError) as err:
        flags.validate(args)
    assert str(err.value) == message


def test_every_violation_is_listed_at_once():
    args = flags.build_parser().parse_args(["--epochs", "0", "--learning_rate", "0"])
    with pytest.raises(flags.FlagError) as err:
        flags.validate(args)
    assert str(err.value).splitlines() == [
        "--epochs 0 is invalid: must be an integer >= 1",
        "--learning_rate 0.0 is invalid: must be > 0 and finite",
    ]


def test_bad_flags_exit_non_zero_naming_the_flag(tmp_path):
    proc = run_trainer("--batch_size", "0", "--log_dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--batch_size 0 is invalid: must be an integer >= 1" in proc.stderr


def test_batch_larger_than_training_set_exits_non_zero(tmp_path):
    proc = run_trainer("--batch_size", "8001", "--log_dir", str(tmp_path / "logs"))
    assert proc.returncode == 2
    assert (
        "--batch_size 8001 is invalid: larger than the training set (8000 examples in "
        f"{flags.BUNDLED_DATA_DIR})"
    ) in proc.stderr
    assert not (tmp_path / "logs").exists()  # nothing written for a run that never started


def test_bad_data_writes_nothing_to_the_log_dir(tmp_path):
    proc = run_trainer("--data_dir", str(tmp_path / "nowhere"), "--log_dir", str(tmp_path / "logs"))
    assert proc.returncode == 3
    assert f"error: {tmp_path / 'nowhere'}: data directory does not exist" in proc.stderr
    assert not (tmp_path / "logs").exists()


def test_batch_times_replicas_larger_than_training_set_with_ps_0(tmp_path):
    spec = local_cluster_spec(
        Replicas(chief=1, worker=2), {("chief", 0): 2001, ("worker", 0): 2002, ("worker", 1): 2003}
    )
    proc = run_trainer(
        "--batch_size",
        "3000",
        "--log_dir",
        str(tmp_path),
        env_extra={"TF_CONFIG": tf_config_json(spec, "chief", 0)},
    )
    assert proc.returncode == 2
    assert "--batch_size 3000 x 3 replicas is invalid: larger than the training set" in proc.stderr


def test_bad_tf_config_exits_2(tmp_path):
    proc = run_trainer("--log_dir", str(tmp_path), env_extra={"TF_CONFIG": "{not json"})
    assert proc.returncode == 2
    assert "TF_CONFIG is not valid JSON" in proc.stderr


# --- TF_CONFIG ---------------------------------------------------------------------

SPEC = {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]}


def test_no_tf_config_is_a_single_process_chief():
    for text in (None, "", "  "):
        task = parse_tf_config(text)
        assert task.strategy_kind == SINGLE_PROCESS and task.is_chief and task.task_type == "chief"


def test_ps_tasks_mean_parameter_server_strategy():
    task = parse_tf_config(json.dumps({"cluster": SPEC, "task": {"type": "worker", "index": 1}}))
    assert (task.task_type, task.task_index) == ("worker", 1)
    assert task.strategy_kind == PARAMETER_SERVER and not task.is_chief
    assert task.cluster_spec == SPEC


def test_workers_without_ps_mean_multi_worker_mirrored():
    spec = {"chief": ["c:1"], "worker": ["w:2"]}
    task = parse_tf_config(json.dumps({"cluster": spec, "task": {"type": "chief", "index": 0}}))
    assert task.strategy_kind == MULTI_WORKER_MIRRORED and task.is_chief


def test_worker_0_is_chief_without_a_chief_task():
    spec = {"worker": ["w:1", "w:2"]}
    assert parse_tf_config(json.dumps({"cluster": spec, "task": {"type": "worker", "index": 0}})).is_chief
    assert not parse_tf_config(json.dumps({"cluster": spec, "task": {"type": "worker", "index": 1}})).is_chief


def test_round_trip_with_the_stacks_module():
    replicas = Replicas(chief=1, worker=2, ps=1)
    ports = {t: 3000 + i for i, t in enumerate(replicas.tasks())}
    spec = local_cluster_spec(replicas, ports)
    for task_type, index in replicas.tasks():
        task = parse_tf_config(tf_config_json(spec, task_type, index))
        assert (task.task_type, task.task_index, task.cluster_spec) == (task_type, index, spec)


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"cluster": SPEC, "task": {"type": "worker", "index": 2}},
            "task (worker, 2) is not in the cluster spec (2 worker task(s))",
        ),
        (
            {"cluster": SPEC, "task": {"type": "master", "index": 0}},
            "TF_CONFIG task type 'master' is invalid",
        ),
        (
            {"cluster": {"master": ["m:1"]}, "task": {"type": "chief", "index": 0}},
            "TF_CONFIG cluster has unknown task type 'master'",
        ),
        (
            {"cluster": {"chief": ["c"], "ps": ["p:1"]}, "task": {"type": "chief", "index": 0}},
            "entry 'c' must be 'host:port'",
        ),
        (
            {"cluster": {"worker": ["w:1"], "ps": ["p:1"]}, "task": {"type": "ps", "index": 0}},
            "TF_CONFIG has ps tasks but no chief",
        ),
        (
            {"cluster": SPEC, "task": {"type": "ps", "index": "0"}},
            "TF_CONFIG task index '0' must be an integer",
        ),
    ],
)
def test_invalid_tf_config(config, message):
    with pytest.raises(ClusterSpecError) as err:
        parse_tf_config(json.dumps(config))
    assert message in str(err.value)


def test_a_task_outside_the_cluster_is_reported_as_a_tf_config_error(tmp_path):
    config = {"cluster": SPEC, "task": {"type": "worker", "index": 3}}
    proc = run_trainer("--log_dir", str(tmp_path), env_extra={"TF_CONFIG": json.dumps(config)})
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: TF_CONFIG: task (worker, 3) is not in the cluster spec (2 worker task(s))\n"
    )


def test_a_cluster_without_a_task_says_so(tmp_path):
    proc = run_trainer("--log_dir", str(tmp_path), env_extra={"TF_CONFIG": json.dumps({"cluster": SPEC})})
    assert proc.returncode == 2
    assert proc.stderr == (
        'error: TF_CONFIG has a cluster but no task: set "task": {"type": ..., "index": ...}\n'
    )


def test_a_log_dir_that_cannot_be_written_is_a_bad_flag(tmp_path):
    (tmp_path / "afile").write_text("x")
    proc = run_trainer("--log_dir", str(tmp_path / "afile"))
    assert proc.returncode == 2  # permanent: the launcher and a podFailurePolicy do not retry
    assert proc.stderr == (
        f"error: --log_dir {tmp_path / 'afile'} is invalid: cannot create {tmp_path / 'afile'}: File exists\n"
    )
