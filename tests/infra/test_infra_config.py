"""Configuration: both CLI forms, Pulumi.yaml in step with the code, and every bad value
reported at once, exactly, before any resource is registered. (A key set both ways, secret
values and unknown keys: test_infra_config_cli_forms.py.)"""

from __future__ import annotations

import json

import mock_engine as me
import pulumi
import pytest
import yaml

from infra import schema
from infra import settings as st
from infra.values import parsers

HEADER_1 = "1 invalid configuration value; nothing was deployed:"


def _line(key: str, value: str, rule: str, fix: str) -> str:
    return (
        f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.\n"
        f"    fix: pulumi config set {fix}"
    )


DATA_SOURCE_RULE = (
    "must be an http(s) URL (of mnist.npz, or of a directory holding the four MNIST IDX files), an absolute "
    "path (a directory on the volume under mountPath, or inside the trainer image), or a list of http(s) URLs "
    "of the four IDX .gz files or of one mnist.npz"
)
DATA_SOURCE_FIX = "data.source https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"

BAD = [
    # (key, value as the CLI stores a flat key, rule, fix command arguments)
    ("worker.number", "four", "must be an integer between 1 and 32", "worker.number 2"),
    ("worker.number", "0", "must be an integer between 1 and 32", "worker.number 2"),
    ("worker.number", "-1", "must be an integer between 1 and 32", "worker.number 2"),
    ("worker.number", "4.5", "must be an integer between 1 and 32", "worker.number 2"),
    ("worker.number", "200", "must be an integer between 1 and 32", "worker.number 2"),
    ("ps.number", "9", "must be an integer between 0 and 8", "ps.number 2"),
    ("worker.gpuCount", "-1", "must be an integer between 0 and 8", "worker.gpuCount 1"),
    ("worker.gpuCount", "1.5", "must be an integer between 0 and 8", "worker.gpuCount 1"),
    ("worker.gpuCount", "9", "must be an integer between 0 and 8", "worker.gpuCount 1"),
    ("gpuPool.gpusPerInstance", "16", "must be an integer between 1 and 8", "gpuPool.gpusPerInstance 1"),
    ("gpuPool.size", "0", "must be an integer between 1 and 33", "gpuPool.size 2"),
    ("gpuPool.size", "200", "must be an integer between 1 and 33", "gpuPool.size 2"),
    ("cpuPool.size", "34", "must be an integer between 1 and 33", "cpuPool.size 2"),
    ("worker.port", "0", "must be an integer between 1 and 65535", "worker.port 8000"),
    ("worker.port", "65536", "must be an integer between 1 and 65535", "worker.port 8000"),
    ("ps.port", "70000", "must be an integer between 1 and 65535", "ps.port 9000"),
    ("ps.port", "8000", "must differ from worker.port (8000)", "ps.port 9000"),
    ("hyperparams.batchsize", "0", "must be an integer >= 1", "hyperparams.batchsize 64"),
    ("hyperparams.learningrate", "0", "must be a number > 0", "hyperparams.learningrate 0.004"),
    ("hyperparams.learningrate", "-0.01", "must be a number > 0", "hyperparams.learningrate 0.004"),
    ("hyperparams.learningrate", "fast", "must be a number > 0", "hyperparams.learningrate 0.004"),
    ("hyperparams.learningrate", "nan", "must be a number > 0", "hyperparams.learningrate 0.004"),
    ("hyperparams.epochs", "0", "must be an integer >= 1", "hyperparams.epochs 2"),
    (
        "hyperparams.model",
        "resnet",
        "must be one of convnet, convnet_fc, convnet_fc_slim, mlp",
        "hyperparams.model convnet_fc_slim",
    ),
    ("hyperparams.optimizer", "Adam", "must be one of adam, sgd", "hyperparams.optimizer adam"),
    (
        "hyperparams.lrSchedule",
        "cosine",
        "must be one of constant, warmup_cosine",
        "hyperparams.lrSchedule warmup_cosine",
    ),
    ("hyperparams.lrScaling", "square", "must be one of none, sqrt, linear", "hyperparams.lrScaling sqrt"),
    ("hyperparams.dropout", "1", "must be a number >= 0 and < 1", "hyperparams.dropout 0.1"),
    ("hyperparams.dropout", "-0.1", "must be a number >= 0 and < 1", "hyperparams.dropout 0.1"),
    ("hyperparams.dropout", "nan", "must be a number >= 0 and < 1", "hyperparams.dropout 0.1"),
    ("hyperparams.augmentShift", "8", "must be an integer between 0 and 7", "hyperparams.augmentShift 0"),
    ("hyperparams.augmentShift", "1.5", "must be an integer between 0 and 7", "hyperparams.augmentShift 0"),
    ("hyperparams.localSteps", "51", "must be an integer between 1 and 50", "hyperparams.localSteps 50"),
    ("hyperparams.labelSmoothing", "1", "must be a number >= 0 and < 1", "hyperparams.labelSmoothing 0.1"),
    (
        "hyperparams.precision",
        "float16",
        "must be one of auto, float32, mixed_bfloat16",
        "hyperparams.precision auto",
    ),
    ("hyperparams.seed", "-1", "must be an integer between 0 and 2147483647", "hyperparams.seed 42"),
    ("hyperparams.seed", "2147483648", "must be an integer between 0 and 2147483647", "hyperparams.seed 42"),
    (
        "persistence.pvc.storage",
        "5 GB",
        "must be a Kubernetes quantity such as 5Gi, 500Mi or 2 (no spaces)",
        "persistence.pvc.storage 5Gi",
    ),
    (
        "persistence.pvc.matchLabels",
        "{}",
        'must be a non-empty map of Kubernetes labels such as {"train": "mnist"}',
        'persistence.pvc.matchLabels \'{"train":"mnist"}\'',
    ),
    (
        "worker.image",
        "Registry.example.com/Trainer:latest!",
        "must be an image reference such as registry.example.com/team/trainer:2.21.0-cpu",
        "worker.image registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu",
    ),
    (
        "ps.image",
        "trainer:",
        "must be an image reference such as registry.example.com/team/trainer:2.21.0-cpu",
        "ps.image registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu",
    ),
    (
        "tensorboard.serviceType",
        "External",
        "must be one of ClusterIP, NodePort, LoadBalancer",
        "tensorboard.serviceType ClusterIP",
    ),
    ("data.source", "ftp://mirror.example.com/mnist.npz", DATA_SOURCE_RULE, DATA_SOURCE_FIX),
    ("data.source", "mnist", DATA_SOURCE_RULE, DATA_SOURCE_FIX),
    # A list must name the four IDX files (or one mnist.npz): here one is missing.
    (
        "data.source",
        '["https://m.example/train-images-idx3-ubyte.gz","https://m.example/train-labels-idx1-ubyte.gz",'
        '"https://m.example/t10k-images-idx3-ubyte.gz"]',
        DATA_SOURCE_RULE,
        DATA_SOURCE_FIX,
    ),
    ("data.source", '["/data/mnist.npz"]', DATA_SOURCE_RULE, DATA_SOURCE_FIX),
    ("data.source", "[not json", DATA_SOURCE_RULE, DATA_SOURCE_FIX),
]


@pytest.mark.parametrize("key,value,rule,fix", BAD, ids=[f"{k}={v}" for k, v, _, _ in BAD])
def test_bad_value_gives_its_exact_message_and_registers_nothing(dev_config, key, value, rule, fix):
    run = me.run_program(me.set_flat(dev_config, key, value))
    assert isinstance(run.error, st.ConfigError)
    assert isinstance(run.error, pulumi.RunError)
    assert str(run.error) == f"{HEADER_1}\n{_line(key, value, rule, fix)}"
    assert run.registrations == []
    assert run.calls_besides_state == []


def test_bad_structured_value_is_reported_as_the_cli_stored_it(dev_config):
    worker = json.loads(dev_config["tf-mnist:worker"])
    worker["number"] = -1  # `pulumi config set --path worker.number -- -1` stores an integer
    run = me.run_program({**dev_config, "tf-mnist:worker": json.dumps(worker)})
    assert (
        str(run.error)
        == f"{HEADER_1}\n{_line('worker.number', '-1', 'must be an integer between 1 and 32', '--path worker.number 2')}"
    )
    assert run.registrations == []


def test_every_violation_is_reported_at_once_in_key_order(dev_config):
    config = me.set_flat(dev_config, "hyperparams.batchsize", "0")
    config.update(
        {
            "tf-mnist:worker.number": "four",
            "tf-mnist:tensorboard.serviceType": "External",
            "tf-mnist:persistence.pvc.storage": "5 GB",
        }
    )
    run = me.run_program(config)
    assert str(run.error) == "\n".join(
        [
            "4 invalid configuration values; nothing was deployed:",
            _line("worker.number", "four", "must be an integer between 1 and 32", "worker.number 2"),
            _line("hyperparams.batchsize", "0", "must be an integer >= 1", "hyperparams.batchsize 64"),
            _line(
                "tensorboard.serviceType",
                "External",
                "must be one of ClusterIP, NodePort, LoadBalancer",
                "tensorboard.serviceType ClusterIP",
            ),
            _line(
                "persistence.pvc.storage",
                "5 GB",
                "must be a Kubernetes quantity such as 5Gi, 500Mi or 2 (no spaces)",
                "persistence.pvc.storage 5Gi",
            ),
        ]
    )
    assert run.registrations == []


def test_missing_zone_when_the_stack_creates_the_vswitch(dev_config):
    config = {k: v for k, v in dev_config.items() if k != "tf-mnist:zone"}
    run = me.run_program(config)
    assert str(run.error) == (
        f"{HEADER_1}\nConfiguration 'tf-mnist:zone' is missing: required when the stack creates the vSwitch.\n"
        "    fix: pulumi config set zone cn-hangzhou-i"
    )
    assert run.registrations == []


def _topology(run: me.Run) -> list:
    return sorted(
        (r.type, r.name, json.dumps(r.inputs, sort_keys=True), tuple(sorted(r.dependencies)))
        for r in run.registrations
    )


def test_flat_and_path_config_give_the_same_topology():
    structured = me.stack_config("dev")
    flat = me.flatten(structured)
    assert "tf-mnist:worker.number" in flat and "tf-mnist:worker" not in flat
    assert flat["tf-mnist:persistence.pvc.matchLabels"] == {"train": "mnist"}
    changed = {"tf-mnist:worker.number": 4, "tf-mnist:ps.number": 1}
    by_path = dict(structured)
    by_path["tf-mnist:worker"] = {**structured["tf-mnist:worker"], "number": 4}
    by_path["tf-mnist:ps"] = {**structured["tf-mnist:ps"], "number": 1}
    runs = [me.run_program(me.engine_form(me.with_cli_defaults(c))) for c in ({**flat, **changed}, by_path)]
    assert all(r.error is None for r in runs)
    # + staging, the monitor, the setup Job
    assert len(runs[0].of_type("kubernetes:batch/v1:Job")) == 1 + 4 + 1 + 1 + 1 + 1
    assert _topology(runs[0]) == _topology(runs[1])


def test_flat_key_wins_over_the_default_the_cli_writes_through_the_path():
    # The CLI fills Pulumi.yaml's default worker.number=2 into tf-mnist:worker even when the
    # flat tf-mnist:worker.number exists (it looks keys up as paths).
    config = me.with_cli_defaults({**me.flatten(me.stack_config("dev")), "tf-mnist:worker.number": 3})
    assert config["tf-mnist:worker"]["number"] == 2
    run = me.run_program(me.engine_form(config))
    assert run.outputs["jobNames"] == [
        "mnist-chief-0",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-worker-2",
        "mnist-ps-0",
        "mnist-ps-1",
    ]


def test_defaults_alone_are_the_guide_example():
    # No stack config but the zone: the code's defaults give the chart's GPU example.
    run = me.run_program({"tf-mnist:zone": "cn-hangzhou-i"})
    assert run.error is None
    assert run.outputs["jobNames"] == [
        "mnist-chief-0",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-ps-0",
        "mnist-ps-1",
    ]


def test_pulumi_yaml_declares_the_code_defaults():
    project = yaml.safe_load((me.REPO / "Pulumi.yaml").read_text())
    assert project["name"] == "tf-mnist"
    assert project["main"] == "infra"
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    assert project["config"] == schema.project_config_schema()
    for key, spec in project["config"].items():
        assert spec["type"] in ("string", "integer", "boolean"), key
        assert spec["default"] == st.KEYS_BY_NAME[key].default, key
        # Every declared default passes the code's own rule.
        assert st.KEYS_BY_NAME[key].parse(spec["default"]) == spec["default"], key


def test_pulumi_dev_yaml_is_the_guide_gpu_example():
    config = me.stack_config("dev")
    assert config["alicloud:region"] == "cn-hangzhou"
    assert config["tf-mnist:worker"]["number"] == 2 and config["tf-mnist:worker"]["gpuCount"] == 1
    assert config["tf-mnist:ps"]["number"] == 2
    # No hyperparams: the dev stack trains the program's one recipe (see the file's comment).
    assert "tf-mnist:hyperparams" not in config and not any(
        key.startswith("tf-mnist:hyperparams.") for key in config
    )
    assert config["tf-mnist:persistence"]["pvc"] == {"storage": "5Gi", "matchLabels": {"train": "mnist"}}
    assert config["tf-mnist:mountPath"] == "/data"


@pytest.mark.parametrize("raw,expected", [("4", 4), (4, 4), (" 7 ", 7), ("+3", 3)])
def test_integer_accepts_both_cli_forms(raw, expected):
    assert parsers.integer(1)(raw) == expected


@pytest.mark.parametrize("raw", [True, 4.0, "4.0", "", "1e3", None])
def test_integer_rejects_non_integers(raw):
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        parsers.integer(1)(raw)


@pytest.mark.parametrize(
    "image",
    [
        "trainer",
        "trainer:2.21.0-cpu",
        "registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu",
        "localhost:5000/a/b_c__d-e:v1",
        "busybox@sha256:" + "a" * 64,
    ],
)
def test_image_reference_accepts_valid_references(image):
    assert parsers.image_reference(image) == image


@pytest.mark.parametrize("image", ["UPPER/case", "a//b", "trainer:", ":tag", "trainer:bad tag", "-lead/x"])
def test_image_reference_rejects_invalid_references(image):
    with pytest.raises(ValueError):
        parsers.image_reference(image)


def test_schema_tool_reproduces_pulumi_yaml():
    from infra import schema

    text = (me.REPO / "Pulumi.yaml").read_text()
    assert schema.render(text) == text


# --- the fix command works in the form the bad value was set ---------------------------------
# The program reads a flat key before the structured one, so a fix given in the other form
# would leave the bad value in force (found by running the suggested command with the real CLI).


def test_fix_for_a_flat_label_map_is_a_flat_value_that_replaces_it(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:persistence.pvc.matchLabels": "{}"})
    assert str(run.error).endswith(
        '    fix: pulumi config set persistence.pvc.matchLabels \'{"train":"mnist"}\''
    )
    # ... and that value, set flat as the CLI stores it, is accepted.
    fixed = me.run_program({**dev_config, "tf-mnist:persistence.pvc.matchLabels": '{"train":"mnist"}'})
    assert fixed.error is None


def test_fix_for_a_flat_list_is_a_flat_value_that_replaces_it(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:gpuPool.instanceTypes": "[]"})
    assert str(run.error).endswith(
        "    fix: pulumi config set gpuPool.instanceTypes "
        '\'["ecs.gn5-c4g1.xlarge","ecs.gn6i-c4g1.xlarge","ecs.gn6i-c8g1.2xlarge","ecs.gn6v-c8g1.2xlarge"]\''
    )


def test_fix_for_a_structured_value_uses_path(dev_config):
    worker = json.loads(dev_config["tf-mnist:worker"])
    worker["number"] = 0
    labels = json.loads(dev_config["tf-mnist:persistence"])
    labels["pvc"]["matchLabels"] = {}
    run = me.run_program(
        {**dev_config, "tf-mnist:worker": json.dumps(worker), "tf-mnist:persistence": json.dumps(labels)}
    )
    assert str(run.error).splitlines()[2] == "    fix: pulumi config set --path worker.number 2"
    assert (
        str(run.error).splitlines()[4]
        == "    fix: pulumi config set --path persistence.pvc.matchLabels.train mnist"
    )


def test_fix_for_equal_structured_ports_uses_path(dev_config):
    ps = json.loads(dev_config["tf-mnist:ps"])
    ps["port"] = 8000
    run = me.run_program({**dev_config, "tf-mnist:ps": json.dumps(ps)})
    assert str(run.error).endswith("    fix: pulumi config set --path ps.port 9000")


def test_worker_gpus_must_fit_on_one_gpu_node(dev_config):
    # worker.gpuCount 2 on the default 1-GPU ecs.gn5-c4g1.xlarge: the stack used to create 4 GPU
    # nodes on which no worker pod (2 GPUs each) could ever be scheduled.
    run = me.run_program({**dev_config, "tf-mnist:worker.gpuCount": "2"})
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:worker.gpuCount' value '2' is invalid: must be at most "
            "gpuPool.gpusPerInstance (1), the GPUs of one node (or choose larger gpuPool.instanceTypes "
            "and set gpuPool.gpusPerInstance).",
            "    fix: pulumi config set worker.gpuCount 1",
        ]
    )
    assert run.registrations == []
    fits = me.run_program(
        {
            **dev_config,
            "tf-mnist:worker.gpuCount": "2",
            "tf-mnist:gpuPool.gpusPerInstance": "2",
            "tf-mnist:gpuPool.instanceTypes": "ecs.gn5-c4g1.2xlarge",
        }
    )
    assert fits.error is None


def test_worker_gpus_are_not_checked_against_a_pool_the_stack_does_not_create(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:worker.gpuCount": "4",
            "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
            "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
        }
    )
    assert run.error is None
