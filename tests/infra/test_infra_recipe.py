"""The training recipe as stack keys: the trainer's own parser accepts every task's args, every
row of the recipe's table reaches the pods and (where it says so) the run key, the program's
defaults are the trainer's and the launcher's, and the run directory follows the configuration."""

from __future__ import annotations

import re

import mock_engine as me
import pytest

from infra import settings as st
from infra.values import parsers
from trainer import flags
from trainer.contract import recipe
from trainer.launcher import cli

JOB = "kubernetes:batch/v1:Job"

#: Stack key -> the trainer flag (argparse dest) it becomes: the recipe's table.
RECIPE_KEYS = {row.key: row.dest for row in recipe.HYPERPARAMETERS}


def _args(job: me.Registration) -> list[str]:
    return job.inputs["spec"]["template"]["spec"]["containers"][0]["args"]


def _without(config: dict, *keys: str) -> dict:
    """``config`` without ``keys`` in either form: as a stack that never set them."""
    out = dict(config)
    for key in keys:
        out = me.set_flat(out, key, "")
        del out[f"tf-mnist:{key}"]
    return out


def _recipe_config(dev_config: dict) -> dict:
    """The dev stack with every hyperparams.* key left unset: the program's defaults."""
    return _without(dev_config, *RECIPE_KEYS)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"ps.number": "0"},
        {"hyperparams.model": "mlp", "hyperparams.optimizer": "sgd"},
        {
            "hyperparams.lrSchedule": "constant",
            "hyperparams.lrScaling": "linear",
            "hyperparams.dropout": "0",
            "hyperparams.augmentShift": "7",
            "hyperparams.seed": "2147483647",
            "hyperparams.learningrate": "1e-05",
            "hyperparams.labelSmoothing": "0",
        },
        {"data.source": '["https://m.example/mnist.npz"]', "job.peerTimeoutSeconds": "60"},
        {"hyperparams.precision": "mixed_bfloat16", "hyperparams.localSteps": "50"},
        {"hyperparams.precision": "float32", "hyperparams.localSteps": "10", "ps.number": "0"},
    ],
)
def test_the_trainers_own_parser_accepts_every_tasks_args(dev_config, changes):
    # A flag the trainer does not define, or a value its choices refuse, fails here: argparse
    # exits 2 (SystemExit), and flags.validate raises FlagError.
    config = dev_config
    for key, value in changes.items():
        config = me.set_flat(config, key, value)
    run = me.run_program(config)
    assert run.error is None, run.error
    jobs = [
        job
        for job in run.of_type(JOB)
        if job.name not in ("mnist-stage-data", "mnist-monitor", "mnist-setup")
    ]
    spec = run.outputs["clusterSpec"]
    assert len(jobs) == 1 + len(spec.get("ps", [])) + len(spec["worker"])
    for job in jobs:
        parsed = flags.build_parser().parse_args(_args(job))
        flags.validate(parsed)
        assert parsed.run_id == run.outputs["runId"], job.name
        assert parsed.log_dir == run.outputs["runDir"] and parsed.data_dir == run.outputs["dataDir"], job.name
        for key, value in changes.items():
            if key in RECIPE_KEYS:
                assert getattr(parsed, RECIPE_KEYS[key]) == st.KEYS_BY_NAME[key].parse(value), (job.name, key)


def test_every_trainer_flag_a_user_tunes_is_a_key():
    tuned = set(RECIPE_KEYS.values())
    # What the stack sets itself (directories, run id, peer timeout) or what only paces the
    # work (steps per tf.function call, log lines) is not a recipe key.
    not_keys = {
        "data_dir",
        "log_dir",
        "run_id",
        "peer_timeout",
        "steps_per_execution",
        "log_interval",
        "help",
    }
    assert {a.dest for a in flags.build_parser()._actions} == tuned | not_keys


def test_the_program_defaults_are_the_trainers_and_the_launchers(dev_config):
    # On CPU workers, as the launcher's (a GPU stack's auto precision is float32: see below).
    run = me.run_program(me.set_flat(_recipe_config(dev_config), "worker.gpuCount", "0"))
    assert run.error is None, run.error
    parsed = flags.build_parser().parse_args(_args(run.one(JOB, "mnist-chief-0")))
    launcher = cli.build_parser().parse_args([])
    trainer = flags.build_parser().parse_args([])
    for args in (parsed, launcher, trainer):
        assert {dest: getattr(args, dest) for dest in RECIPE_KEYS.values()} == recipe.defaults()
    # The measured recipe's values (a row added later pins its own in its tests).
    measured = {
        "epochs": 2,
        "batch_size": 64,
        "learning_rate": 0.004,
        "model": "convnet_fc_slim",
        "optimizer": "adam",
        "lr_schedule": "warmup_cosine",
        "lr_scaling": "sqrt",
        "dropout": 0.1,
        "label_smoothing": 0.1,
        "augment_shift": 0,
        "seed": 42,
        "precision": "auto",
        "local_steps": 50,
    }
    assert {dest: recipe.defaults()[dest] for dest in measured} == measured


def _other_value(row: recipe.Hyperparameter):
    """A value of ``row`` other than its default that its limits take."""
    if row.choices:
        return next(choice for choice in row.choices if choice != row.default)
    if row.type is int:
        return row.default + 1 if row.maximum is None or row.default < row.maximum else row.default - 1
    return row.default / 2 or 0.01


@pytest.mark.parametrize("row", recipe.HYPERPARAMETERS, ids=lambda row: row.key)
def test_every_row_reaches_every_task_and_the_run_key_as_its_table_says(dev_config, row):
    value = _other_value(row)
    assert row.accepts(value) and st.KEYS_BY_NAME[row.key].parse(row.arg(value)) == value
    base = me.run_program(dev_config)
    run = me.run_program(me.set_flat(dev_config, row.key, row.arg(value)))
    assert base.error is None and run.error is None, run.error
    jobs = [
        job
        for job in run.of_type(JOB)
        if job.name not in ("mnist-stage-data", "mnist-monitor", "mnist-setup")
    ]
    assert len(jobs) == 5  # chief, 2 workers, 2 ps: every task's command
    for job in jobs:
        assert getattr(flags.build_parser().parse_args(_args(job)), row.dest) == value, job.name
    assert (run.outputs["runDir"] != base.outputs["runDir"]) == row.run_key


def test_the_recipe_choices_are_the_trainers():
    for dest, choices in {
        "model": recipe.MODELS,
        "optimizer": recipe.OPTIMIZERS,
        "lr_schedule": recipe.LR_SCHEDULES,
        "lr_scaling": recipe.LR_SCALINGS,
        "precision": recipe.PRECISIONS,
    }.items():
        action = next(a for a in flags.build_parser()._actions if a.dest == dest)
        assert tuple(action.choices) == choices, dest
    from trainer.data import ALL_IDX_FILES, NPZ_FILE

    assert recipe.IDX_FILE_NAMES == ALL_IDX_FILES and recipe.NPZ_FILE_NAME == NPZ_FILE


# --- one run directory per configuration -----------------------------------------------------


def _run_dir(config: dict, **changes: str) -> str:
    for key, value in changes.items():
        config = me.set_flat(config, key.replace("__", "."), value)
    run = me.run_program(config)
    assert run.error is None, run.error
    return run.outputs["runDir"]


def test_the_run_dir_holds_stack_namespace_and_prefix(dev_config):
    run = me.run_program(dev_config)
    assert re.fullmatch(r"/data/runs/dev-tf-mnist-mnist/[0-9a-f]{12}", run.outputs["runDir"])
    assert run.outputs["runsDir"] == "/data/runs/dev-tf-mnist-mnist"
    assert run.outputs["exportPath"] == run.outputs["runDir"] + "/export"
    other_stack = me.run_program(dev_config, stack="prod").outputs["runDir"]
    assert other_stack.startswith("/data/runs/prod-tf-mnist-mnist/")
    # The same configuration: the same key, under each stack's own directory.
    assert other_stack.rsplit("/", 1)[1] == run.outputs["runDir"].rsplit("/", 1)[1]
    assert _run_dir(dev_config, namespace="research").startswith("/data/runs/dev-research-mnist/")
    assert _run_dir(dev_config, mountPath="/mnt/shared").startswith("/mnt/shared/runs/dev-tf-mnist-mnist/")


@pytest.mark.parametrize(
    "key,value",
    [
        ("hyperparams.learningrate", "0.002"),
        ("hyperparams.batchsize", "128"),
        ("hyperparams.model", "convnet"),
        ("hyperparams.optimizer", "sgd"),
        ("hyperparams.lrSchedule", "constant"),
        ("hyperparams.lrScaling", "none"),
        ("hyperparams.dropout", "0.5"),
        ("hyperparams.augmentShift", "2"),
        ("hyperparams.seed", "7"),
        ("hyperparams.labelSmoothing", "0.2"),
        ("data.source", "https://m.example/mnist.npz"),
        ("ps.number", "0"),
    ],
)
def test_a_change_of_what_is_learnt_is_a_new_run_dir(dev_config, key, value):
    assert _run_dir(dev_config, **{key: value}) != _run_dir(dev_config)


@pytest.mark.parametrize(
    "changes",
    [
        {"hyperparams.epochs": "200"},
        # With ps each worker's batch is its own update: more workers or ps continue the run.
        {"worker.number": "3"},
        {"ps.number": "1"},
        {"job.backoffLimit": "6"},
        {"worker.memory": "16Gi"},
    ],
)
def test_raising_epochs_or_the_ps_layout_keeps_the_run_dir(dev_config, changes):
    assert _run_dir(dev_config, **changes) == _run_dir(dev_config)


def test_with_synchronous_training_the_replica_count_is_part_of_the_run(dev_config):
    sync = me.set_flat(dev_config, "ps.number", "0")
    assert _run_dir(sync, **{"worker.number": "3"}) != _run_dir(sync)
    assert _run_dir(sync, **{"worker.gpuCount": "0"}) != _run_dir(sync)


def test_a_new_data_source_stages_into_a_new_directory(dev_config):
    default = me.run_program(dev_config)
    url = "https://m.example/mnist/"
    changed = me.run_program(me.set_flat(dev_config, "data.source", url))
    assert re.fullmatch(r"/data/mnist/[0-9a-f]{12}", default.outputs["dataDir"])
    assert changed.outputs["dataDir"] != default.outputs["dataDir"]
    staging = changed.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"][0]
    assert staging["command"][:-4] == [
        "python",
        "-m",
        "trainer.stage",
        "--dest",
        changed.outputs["dataDir"],
        "--source",
        url,
    ]
    # Then the volume hint, and the run directory staging makes for the tasks.
    assert staging["command"][-2:] == ["--run_dir", changed.outputs["runDir"]]


def test_a_url_list_is_one_source_flag_per_file(dev_config):
    urls = [f"https://m.example/{name}" for name in recipe.IDX_FILE_NAMES]
    run = me.run_program(me.set_flat(dev_config, "data.source", '["' + '","'.join(urls) + '"]'))
    assert run.error is None, run.error
    staging = run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"][0]
    assert staging["command"][5:-4] == [a for url in urls for a in ("--source", url)]
    assert staging["command"][-4] == "--volume_hint"


def test_a_structured_url_list_is_accepted():
    # `pulumi config set --path 'data.source[0]' URL` stores a list.
    urls = [f"https://m.example/{name}" for name in reversed(recipe.IDX_FILE_NAMES)]
    assert parsers.data_source(urls) == tuple(urls)
    assert parsers.data_source(["https://m.example/a/mnist.npz?token=x"]) == (
        "https://m.example/a/mnist.npz?token=x",
    )


@pytest.mark.parametrize("key,value", [("hyperparams.precision", "float32"), ("hyperparams.localSteps", "1")])
def test_how_the_steps_compute_and_exchange_continues_the_run(dev_config, key, value):
    # The arithmetic's precision and the exchange period change neither the weights' layout
    # nor what is learnt from which data, so the tasks resume the run's checkpoints.
    assert _run_dir(dev_config, **{key: value}) == _run_dir(dev_config)


@pytest.mark.parametrize(
    "gpus,precision,expected",
    [
        ("0", "auto", "auto"),
        ("1", "auto", "float32"),
        ("1", "mixed_bfloat16", "mixed_bfloat16"),
        ("0", "float32", "float32"),
    ],
)
def test_auto_precision_is_float32_for_every_task_of_a_gpu_stack(dev_config, gpus, precision, expected):
    # With a ps the CPU chief traces what the GPU workers run: every task gets one precision.
    config = me.set_flat(me.set_flat(dev_config, "worker.gpuCount", gpus), "hyperparams.precision", precision)
    run = me.run_program(config)
    assert run.error is None, run.error
    jobs = [
        job
        for job in run.of_type(JOB)
        if job.name not in ("mnist-stage-data", "mnist-monitor", "mnist-setup")
    ]
    assert {flags.build_parser().parse_args(_args(job)).precision for job in jobs} == {expected}
