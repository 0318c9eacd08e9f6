"""What every pod gets from config: image pull Secrets (an existing one, or one the
stack creates from registry credentials kept secret) and placement per role."""

from __future__ import annotations

import base64
import json

import mock_engine as me
import pytest

REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"

JOB = "kubernetes:batch/v1:Job"
SECRET = "kubernetes:core/v1:Secret"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
TASKS = ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0", "mnist-ps-1"]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PASSWORD = "s3cr3t-Registry-Pa55"
USERNAME = "ml-team@1234567890123456"
CREDENTIALS = {
    "tf-mnist:registryCredentials.username": USERNAME,
    "tf-mnist:registryCredentials.password": PASSWORD,
}
SECRET_PASSWORD = ("tf-mnist:registryCredentials.password",)


@pytest.fixture
def dev_config(dev_config):
    """The dev stack with images of your own (imageRegistry: the images built from
    docker/): the pull Secret logs in to imageRegistry's host.
    The default, the base image with the code and packages from the stack, is
    tests/infra/test_base_image.py's."""
    return {**dev_config, "tf-mnist:imageRegistry": REGISTRY}


def _pods(run: me.Registration) -> dict[str, dict]:
    """Pod spec of every workload: the task and staging Jobs and TensorBoard's Deployment."""
    pods = {j.name: j.inputs["spec"]["template"]["spec"] for j in run.of_type(JOB)}
    pods["mnist-tensorboard"] = run.one(DEPLOYMENT, "mnist-tensorboard").inputs["spec"]["template"]["spec"]
    return pods


def _rejected(run: me.Run, *lines: str) -> None:
    count = len(lines) // 2
    header = HEADER_1 if count == 1 else f"{count} invalid configuration values; nothing was deployed:"
    assert str(run.error) == "\n".join([header, *lines])
    assert run.registrations == [] and run.calls_besides_state == []


def _plain_parts(value):
    """Every value of engine-form inputs outside secrets (what a plan shows in clear)."""
    if me.is_secret_value(value):
        return
    if isinstance(value, dict):
        for v in value.values():
            yield from _plain_parts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _plain_parts(v)
    else:
        yield value


# --- image pull Secrets ----------------------------------------------------------------------


def test_an_existing_pull_secret_is_used_by_every_pod(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:imagePullSecret": "acr-pull"})
    assert run.error is None, run.error
    pods = _pods(run)
    assert len(pods) == len(TASKS) + 3  # staging, TensorBoard, the run monitor
    for name, pod in pods.items():
        assert pod["imagePullSecrets"] == [{"name": "acr-pull"}], name
    assert run.of_type(SECRET) == []


def test_no_pull_secret_by_default(dev_config):
    for name, pod in _pods(me.run_program(dev_config)).items():
        assert "imagePullSecrets" not in pod, name


def test_the_stack_creates_a_dockerconfigjson_secret_from_secret_credentials(dev_config, caplog):
    run = me.run_program({**dev_config, **CREDENTIALS}, secret_keys=SECRET_PASSWORD)
    assert run.error is None, run.error
    secret = run.one(SECRET, "mnist-registry")
    assert secret.inputs["type"] == "kubernetes.io/dockerconfigjson"
    assert secret.inputs["metadata"]["name"] == "mnist-registry"
    assert secret.inputs["metadata"]["namespace"] == "tf-mnist"
    data = secret.inputs["data"]
    assert me.is_secret_value(data), "the Secret's data must be a Pulumi secret"
    config = json.loads(base64.b64decode(data["value"][".dockerconfigjson"]))
    auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    assert config == {
        "auths": {
            "registry.cn-hangzhou.aliyuncs.com": {"username": USERNAME, "password": PASSWORD, "auth": auth}
        }
    }
    for name, pod in _pods(run).items():
        assert pod["imagePullSecrets"] == [{"name": "mnist-registry"}], name
    # Pods pull only once the Secret exists: staging and TensorBoard wait for it, the tasks
    # for staging.
    assert secret.urn in run.one(JOB, "mnist-stage-data").dependencies
    assert secret.urn in run.one(DEPLOYMENT, "mnist-tensorboard").dependencies


def test_registry_credentials_appear_nowhere_in_plain_text(dev_config, caplog):
    run = me.run_program({**dev_config, **CREDENTIALS}, secret_keys=SECRET_PASSWORD)
    auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    forbidden = [PASSWORD, auth]
    for registration in run.registrations:
        for part in _plain_parts(registration.inputs):
            assert not any(f in str(part) for f in forbidden), f"{registration.type} {registration.name}"
    assert not any(f in json.dumps(run.outputs, default=str) for f in forbidden)
    assert not any(f in caplog.text for f in forbidden)


def test_credentials_set_with_path_and_secret_are_accepted(dev_config):
    # `pulumi config set --secret --path registryCredentials.password ...` makes the whole
    # tf-mnist:registryCredentials object secret: all of it can stay secret.
    config = {
        **dev_config,
        "tf-mnist:registryCredentials": json.dumps(
            {"username": USERNAME, "password": PASSWORD, "server": "registry-vpc.cn-hangzhou.aliyuncs.com"}
        ),
        "tf-mnist:worker.image": "registry-vpc.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu",
        "tf-mnist:imagePullSecret": "acr-vpc",
    }
    run = me.run_program(config, secret_keys=("tf-mnist:registryCredentials",))
    assert run.error is None, run.error
    secret = run.one(SECRET, "acr-vpc")
    config_json = json.loads(base64.b64decode(secret.inputs["data"]["value"][".dockerconfigjson"]))
    assert list(config_json["auths"]) == ["registry-vpc.cn-hangzhou.aliyuncs.com"]
    assert _pods(run)["mnist-worker-0"]["imagePullSecrets"] == [{"name": "acr-vpc"}]


def test_a_password_set_without_secret_is_refused_without_its_value(dev_config):
    run = me.run_program({**dev_config, **CREDENTIALS})
    _rejected(
        run,
        "Configuration 'tf-mnist:registryCredentials.password' is not a secret: the stack file would hold "
        "the registry password in plain text.",
        "    fix: pulumi config set --secret registryCredentials.password <password>",
    )
    assert PASSWORD not in str(run.error)


def test_a_password_set_with_path_without_secret_gets_the_path_fix(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:registryCredentials": json.dumps({"username": USERNAME, "password": PASSWORD}),
        }
    )
    assert (
        str(run.error).splitlines()[-1]
        == "    fix: pulumi config set --secret --path registryCredentials.password <password>"
    )


@pytest.mark.parametrize(
    "extra,secret_keys,lines",
    [
        (
            {"tf-mnist:registryCredentials.username": USERNAME},
            (),
            [
                "Configuration 'tf-mnist:registryCredentials.password' is missing: required with "
                "registryCredentials.username (the stack creates the pull Secret from both).",
                "    fix: pulumi config set --secret registryCredentials.password <password>",
            ],
        ),
        (
            {"tf-mnist:registryCredentials.password": PASSWORD},
            SECRET_PASSWORD,
            [
                "Configuration 'tf-mnist:registryCredentials.username' is missing: required with "
                "registryCredentials.password (the stack creates the pull Secret from both).",
                "    fix: pulumi config set registryCredentials.username <username>",
            ],
        ),
        (
            {**CREDENTIALS, "tf-mnist:registryCredentials.server": "docker.io"},
            SECRET_PASSWORD,
            [
                "Configuration 'tf-mnist:registryCredentials.server' value 'docker.io' is invalid: names registry "
                "docker.io, which no image of the stack comes from (registry.cn-hangzhou.aliyuncs.com), so the pull "
                "Secret would never be used.",
                "    fix: pulumi config set registryCredentials.server registry.cn-hangzhou.aliyuncs.com",
            ],
        ),
        (
            {**CREDENTIALS, "tf-mnist:registryCredentials.server": "https://registry.example.com/v2/"},
            SECRET_PASSWORD,
            [
                "Configuration 'tf-mnist:registryCredentials.server' value '[secret]' is invalid: must be a registry host "
                "such as registry.cn-hangzhou.aliyuncs.com (no scheme, no path).",
                "    fix: pulumi config set registryCredentials.server registry.cn-hangzhou.aliyuncs.com",
            ],
        ),
        (
            {"tf-mnist:registryCredentials.server": "registry.cn-hangzhou.aliyuncs.com"},
            (),
            [
                "Configuration 'tf-mnist:registryCredentials.server' value 'registry.cn-hangzhou.aliyuncs.com' is "
                "invalid: applies only with registryCredentials.username and registryCredentials.password.",
                "    fix: pulumi config rm registryCredentials.server",
            ],
        ),
        (
            {"tf-mnist:imagePullSecret": "ACR_pull"},
            (),
            [
                "Configuration 'tf-mnist:imagePullSecret' value 'ACR_pull' is invalid: must be a Kubernetes object name "
                "(lowercase letters, digits, '-' and '.', at most 253 characters).",
                "    fix: pulumi config set imagePullSecret acr-pull",
            ],
        ),
    ],
    ids=[
        "username-only",
        "password-only",
        "server-of-no-image",
        "server-url",
        "server-alone",
        "bad-secret-name",
    ],
)
def test_bad_registry_settings_give_their_exact_message(dev_config, extra, secret_keys, lines):
    secret_keys = (*secret_keys, *(("tf-mnist:registryCredentials.server",) if "https" in str(extra) else ()))
    _rejected(me.run_program({**dev_config, **extra}, secret_keys=secret_keys), *lines)


# --- placement per role ----------------------------------------------------------------------


def test_node_selectors_tolerations_and_priority_per_role(dev_config):
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:worker.nodeSelector": '{"aliyun.accelerator/nvidia_name": "Tesla-P100-PCIE-16GB"}',
            "tf-mnist:worker.tolerations": json.dumps([dedicated, GPU_TOLERATION]),
            "tf-mnist:ps.nodeSelector": '{"tf-mnist/pool": "cpu"}',
            "tf-mnist:ps.tolerations": json.dumps([{"key": "spot", "operator": "Exists"}]),
            "tf-mnist:chief.nodeSelector": '{"node-role": "coordinator"}',
            "tf-mnist:tensorboard.nodeSelector": '{"tf-mnist/pool": "cpu"}',
            "tf-mnist:tensorboard.tolerations": json.dumps(
                [{"key": "viewer", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
            ),
            "tf-mnist:job.priorityClassName": "training-high",
        }
    )
    assert run.error is None, run.error
    pods = _pods(run)
    for name in ("mnist-worker-0", "mnist-worker-1"):
        assert pods[name]["nodeSelector"] == {"aliyun.accelerator/nvidia_name": "Tesla-P100-PCIE-16GB"}
        # The GPU taint's toleration stays first and is not repeated.
        assert pods[name]["tolerations"] == [GPU_TOLERATION, dedicated]
    for name in ("mnist-ps-0", "mnist-ps-1"):
        assert pods[name]["nodeSelector"] == {"tf-mnist/pool": "cpu"}
        assert pods[name]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    for name in ("mnist-chief-0", "mnist-stage-data", "mnist-monitor"):
        assert pods[name]["nodeSelector"] == {"node-role": "coordinator"}, name
        assert "tolerations" not in pods[name], name
    assert pods["mnist-tensorboard"]["nodeSelector"] == {"tf-mnist/pool": "cpu"}
    assert pods["mnist-tensorboard"]["tolerations"] == [
        {"key": "viewer", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]
    for name, pod in pods.items():
        # Training and staging pods get the priority class; TensorBoard, a viewer, preempts nothing.
        assert pod.get("priorityClassName") == (None if name == "mnist-tensorboard" else "training-high"), (
            name
        )


def test_placement_set_with_path(dev_config):
    worker = {
        **json.loads(dev_config["tf-mnist:worker"]),
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "value": "training"}],
    }  # operator Equal by default
    run = me.run_program({**dev_config, "tf-mnist:worker": json.dumps(worker)})
    assert run.error is None, run.error
    pod = _pods(run)["mnist-worker-0"]
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"] == [
        GPU_TOLERATION,
        {"key": "dedicated", "operator": "Equal", "value": "training"},
    ]


def test_no_placement_by_default(dev_config):
    for name, pod in _pods(me.run_program(dev_config)).items():
        assert "nodeSelector" not in pod and "priorityClassName" not in pod, name
        assert ("tolerations" in pod) == name.startswith("mnist-worker-"), name


TOLERATIONS_RULE = (
    "must be a list of tolerations such as "
    '[{"key":"dedicated","operator":"Equal","value":"training","effect":"NoSchedule"}]'
)


@pytest.mark.parametrize(
    "key,value,rule,fix",
    [
        (
            "worker.nodeSelector",
            '{"bad key": "x"}',
            'must be a map of Kubernetes node labels such as {"tf-mnist/pool": "cpu"}',
            "worker.nodeSelector '{}'",
        ),
        (
            "tensorboard.nodeSelector",
            '["cpu"]',
            'must be a map of Kubernetes node labels such as {"tf-mnist/pool": "cpu"}',
            "tensorboard.nodeSelector '{}'",
        ),
        (
            "ps.tolerations",
            '[{"key":"a","operator":"Exists","value":"b"}]',
            TOLERATIONS_RULE,
            "ps.tolerations '[]'",
        ),
        ("ps.tolerations", '[{"operator":"Equal","value":"b"}]', TOLERATIONS_RULE, "ps.tolerations '[]'"),
        (
            "chief.tolerations",
            '[{"key":"a","effect":"NoSchedule","tolerationSeconds":30}]',
            TOLERATIONS_RULE,
            "chief.tolerations '[]'",
        ),
        ("chief.tolerations", '[{"key":"a","effect":"Never"}]', TOLERATIONS_RULE, "chief.tolerations '[]'"),
        ("worker.tolerations", '[{"key":"a","colour":"blue"}]', TOLERATIONS_RULE, "worker.tolerations '[]'"),
        (
            "job.priorityClassName",
            "High_Priority",
            "must be a Kubernetes object name (lowercase letters, digits, '-' "
            "and '.', at most 253 characters)",
            "job.priorityClassName high-priority",
        ),
    ],
    ids=[
        "selector-key",
        "selector-list",
        "exists-with-value",
        "equal-without-key",
        "seconds-without-noexecute",
        "bad-effect",
        "unknown-field",
        "priority-class",
    ],
)
def test_bad_placement_gives_its_exact_message(dev_config, key, value, rule, fix):
    run = me.run_program({**dev_config, f"tf-mnist:{key}": value})
    _rejected(
        run,
        f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.",
        f"    fix: pulumi config set {fix}",
    )


def test_bad_placement_set_with_path_gets_the_path_fix(dev_config):
    ps = {**json.loads(dev_config["tf-mnist:ps"]), "tolerations": [{"key": "a", "operator": "Sometimes"}]}
    run = me.run_program({**dev_config, "tf-mnist:ps": json.dumps(ps)})
    _rejected(
        run,
        'Configuration \'tf-mnist:ps.tolerations\' value \'[{"key":"a","operator":"Sometimes"}]\' '
        f"is invalid: {TOLERATIONS_RULE}.",
        "    fix: pulumi config set --path ps.tolerations '[]'",
    )


def test_the_fix_values_are_accepted(dev_config):
    # What the fixes set ('{}' and '[]', flat or with --path, both as strings) is valid.
    worker = {**json.loads(dev_config["tf-mnist:worker"]), "tolerations": "[]"}
    run = me.run_program(
        {**dev_config, "tf-mnist:worker": json.dumps(worker), "tf-mnist:ps.nodeSelector": "{}"}
    )
    assert run.error is None, run.error


def test_a_misspelt_placement_key_is_unknown(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:worker.nodeSelecter": '{"a": "b"}'})
    assert (
        "Configuration 'tf-mnist:worker.nodeSelecter' value '{\"a\": \"b\"}' is not a setting of this stack "
        "(did you mean worker.nodeSelector?)" in str(run.error)
    )


def test_credentials_for_images_from_another_registry_need_their_server(dev_config):
    images = {
        f"tf-mnist:{role}.image": f"docker.io/team/{name}"
        for role, name in (("worker", "trainer:gpu"), ("ps", "trainer:cpu"), ("tensorboard", "tensorboard:2"))
    }
    run = me.run_program({**dev_config, **CREDENTIALS, **images}, secret_keys=SECRET_PASSWORD)
    _rejected(
        run,
        "Configuration 'tf-mnist:registryCredentials.server' is missing: required when no image comes from "
        "the host of imageRegistry (registry.cn-hangzhou.aliyuncs.com): the images come from docker.io.",
        "    fix: pulumi config set registryCredentials.server docker.io",
    )
    fixed = me.run_program(
        {**dev_config, **CREDENTIALS, **images, "tf-mnist:registryCredentials.server": "docker.io"},
        secret_keys=SECRET_PASSWORD,
    )
    assert fixed.error is None, fixed.error
