"""Job policy of the training Jobs (restartPolicy Never, podFailurePolicy, deadline,
peer timeout), the run id every task shares, and the GPU chief of synchronous training (8.3)."""

from __future__ import annotations

import json
import re

import mock_engine as me
import pytest

from trainer.contract import exit_codes

JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
TASKS = ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0", "mnist-ps-1"]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"


@pytest.fixture
def dev_config(dev_config):
    """The dev stack with images of your own (imageRegistry: the images built from
    docker/): the pinned run id below holds the task templates' hash, which on the base image also holds the code's content hash, which every change to trainer/ moves.
    The default, the base image with the code and packages from the stack, is
    tests/infra/test_base_image.py's."""
    return {**dev_config, "tf-mnist:imageRegistry": REGISTRY}


def _set(config: dict, **flat: str) -> dict:
    return {**config, **{f"tf-mnist:{k.replace('__', '.')}": v for k, v in flat.items()}}


def _pod(job: me.Registration) -> dict:
    return job.inputs["spec"]["template"]["spec"]


def _container(job: me.Registration) -> dict:
    (container,) = _pod(job)["containers"]
    return container


def _flag(job: me.Registration, flag: str) -> str:
    args = _container(job)["args"]
    return args[args.index(flag) + 1]


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


# --- restartPolicy Never + podFailurePolicy ------------------------------------------------


def test_task_jobs_replace_failed_pods_under_a_pod_failure_policy(dev_config):
    run = me.run_program(dev_config)
    for name in TASKS:
        spec = run.one(JOB, name).inputs["spec"]
        assert spec["template"]["spec"]["restartPolicy"] == "Never", name
        assert spec["podReplacementPolicy"] == "Failed", name
        assert spec["backoffLimit"] == 4, name
        assert spec["podFailurePolicy"] == {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "tensorflow", "operator": "In", "values": [2, 3, 4, 5]},
                },
                {
                    "action": "Ignore",
                    "onExitCodes": {"containerName": "tensorflow", "operator": "In", "values": [143]},
                },
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]
        }, name
        assert "activeDeadlineSeconds" not in spec, name
    # The staging Job has a policy of its own (tests/infra/test_infra_volume_ownership.py).
    staging = run.one(JOB, "mnist-stage-data").inputs["spec"]
    assert staging["backoffLimit"] == 0 and staging["template"]["spec"]["restartPolicy"] == "Never"


def test_the_policy_follows_the_trainers_exit_codes():
    # The codes a restart cannot cure, and the SIGTERM exit, come from trainer/contract/exit_codes.py.
    assert exit_codes.PERMANENT_EXIT_CODES == (2, 3, 4, 5)
    assert exit_codes.EXIT_SIGTERM == 143
    from infra.components.training import CONTAINER_NAME, pod_failure_policy

    rules = pod_failure_policy().rules
    assert rules[0].on_exit_codes.values == sorted(exit_codes.PERMANENT_EXIT_CODES)
    assert rules[0].on_exit_codes.container_name == CONTAINER_NAME


def test_a_replacement_pod_is_found_by_its_service_and_resumes_the_same_run(dev_config):
    # Every property a new pod gets from the template: the labels its headless Service
    # selects, the TF_CONFIG naming its Service's DNS name, and the log dir (checkpoints)
    # and run id shared by every task.
    run = me.run_program(dev_config)
    run_ids, log_dirs = set(), set()
    for name in TASKS:
        job, service = run.one(JOB, name), run.one(SERVICE, name)
        labels = job.inputs["spec"]["template"]["metadata"]["labels"]
        assert service.inputs["spec"]["selector"].items() <= labels.items(), name
        task = json.loads(_env(_container(job))["TF_CONFIG"])["task"]
        assert f"mnist-{task['type']}-{task['index']}" == name
        run_ids.add(_flag(job, "--run_id"))
        log_dirs.add(_flag(job, "--log_dir"))
    assert run_ids == {run.outputs["runId"]} and log_dirs == {run.outputs["runDir"]}


def test_deadline_is_set_on_every_training_job(dev_config):
    run = me.run_program(_set(dev_config, job__activeDeadlineSeconds="86400"))
    for name in TASKS:
        assert run.one(JOB, name).inputs["spec"]["activeDeadlineSeconds"] == 86400, name
    # The staging Job's deadline is its own: data.startTimeoutSeconds (test_staging_start_timeout).
    assert run.one(JOB, "mnist-stage-data").inputs["spec"]["activeDeadlineSeconds"] == 600


def test_staging_start_timeout(dev_config):
    # A staging pod that never starts fails its Job after data.startTimeoutSeconds (the run
    # monitor raises the deadline to the await's 1200 s once the pod runs); `pulumi up` waits
    # 1200 s at most either way.
    run = me.run_program(_set(dev_config, data__startTimeoutSeconds="45"))
    staging = run.one(JOB, "mnist-stage-data").inputs
    assert staging["spec"]["activeDeadlineSeconds"] == 45
    assert me.own_annotations(staging["metadata"])["pulumi.com/timeoutSeconds"] == "1200"
    for bad, rule in (("0", "between 10 and 1200"), ("1201", "between 10 and 1200")):
        error = str(me.run_program(_set(dev_config, data__startTimeoutSeconds=bad)).error)
        assert (
            f"'tf-mnist:data.startTimeoutSeconds' value '{bad}' is invalid: must be an integer {rule}"
            in error
        )


def test_peer_timeout_reaches_every_task(dev_config):
    run = me.run_program(_set(dev_config, job__peerTimeoutSeconds="900"))
    for name in TASKS:
        assert _flag(run.one(JOB, name), "--peer_timeout") == "900", name
    default = me.run_program(dev_config)
    assert _flag(default.one(JOB, "mnist-ps-0"), "--peer_timeout") == "600"  # the trainer's default


def test_the_peer_timeout_default_is_the_trainers():
    from infra import settings as st
    from trainer import flags

    assert (
        st.KEYS_BY_NAME["job.peerTimeoutSeconds"].default == flags.build_parser().parse_args([]).peer_timeout
    )


@pytest.mark.parametrize(
    "key,value,rule,fix",
    [
        ("job.activeDeadlineSeconds", "0", "must be an integer >= 1", "job.activeDeadlineSeconds 86400"),
        ("job.activeDeadlineSeconds", "1d", "must be an integer >= 1", "job.activeDeadlineSeconds 86400"),
        ("job.peerTimeoutSeconds", "30", "must be an integer >= 60", "job.peerTimeoutSeconds 600"),
        ("job.peerTimeoutSeconds", "10m", "must be an integer >= 60", "job.peerTimeoutSeconds 600"),
    ],
)
def test_bad_job_settings_give_their_exact_message(dev_config, key, value, rule, fix):
    run = me.run_program({**dev_config, f"tf-mnist:{key}": value})
    assert str(run.error) == (
        f"{HEADER_1}\nConfiguration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.\n"
        f"    fix: pulumi config set {fix}"
    )
    assert run.registrations == []


# --- the run id -----------------------------------------------------------------------------


def _run_config_map(run: me.Run) -> me.Registration:
    return run.one("kubernetes:core/v1:ConfigMap", "mnist-run")


def test_every_task_gets_one_run_id_from_the_run_config_map(dev_config):
    run = me.run_program(dev_config)
    config_map = _run_config_map(run)
    uid = config_map.inputs["metadata"].get("uid") or me.mock_uid("mnist-run", config_map.inputs)
    key = run.outputs["runDir"].rsplit("/", 1)[1]
    assert run.outputs["runId"] == f"{key}-{uid}"
    assert re.fullmatch(r"[0-9a-f]{12}-[0-9a-f-]{36}", run.outputs["runId"])
    assert config_map.inputs["data"]["runDir"] == run.outputs["runDir"]
    assert re.fullmatch(r"[0-9a-f]{12}", config_map.inputs["data"]["templates"])
    again = me.run_program(dev_config)
    assert again.outputs["runId"] == run.outputs["runId"], "an update that changes nothing keeps the run id"


def test_the_run_config_map_is_replaced_not_updated(dev_config):
    # Its uid is the run id's random part: a change must make a new object (a new uid).
    config_map = _run_config_map(me.run_program(dev_config))
    assert config_map.inputs["immutable"] is True
    assert config_map.delete_before_replace
    # Task Jobs take the id from it: the engine orders them after it.
    chief = me.run_program(dev_config).one(JOB, "mnist-chief-0")
    assert config_map.urn in chief.dependencies or any(
        config_map.urn in urns for urns in chief.property_dependencies.values()
    )


def test_a_destroy_and_up_gives_the_run_a_fresh_id_in_the_same_directory(dev_config):
    # Before, the id was a hash of the templates: the same after destroy + up, so the new
    # tasks took the old run's done marker for their own and exited.
    first = me.run_program(dev_config)
    recreated = me.run_program(dev_config, creation="after-destroy")
    assert recreated.outputs["runId"] != first.outputs["runId"]
    assert recreated.outputs["runDir"] == first.outputs["runDir"]
    assert _flag(recreated.one(JOB, "mnist-chief-0"), "--run_id") == recreated.outputs["runId"]


def test_a_preview_of_a_new_stack_shows_the_run_id_as_unknown(dev_config):
    # The ConfigMap does not exist yet: its uid (and so every --run_id) is known only once
    # created, and the Jobs are created in that same update anyway.
    preview = me.run_program(dev_config, preview=True)
    assert preview.error is None, preview.error
    assert "runId" not in preview.outputs or preview.outputs["runId"] is None


@pytest.mark.parametrize(
    "changes",
    [
        {"hyperparams.epochs": "200"},
        {"worker.number": "3"},
        {"ps.image": f"{REGISTRY}/trainer:2.21.1-cpu"},
        {"worker.nodeSelector": '{"disk": "ssd"}'},
    ],
)
def test_a_change_that_replaces_the_jobs_is_a_new_run(dev_config, changes):
    before = me.run_program(dev_config).outputs["runId"]
    ((key, value),) = changes.items()
    after = me.run_program(me.set_flat(dev_config, key, value)).outputs["runId"]
    assert after != before


@pytest.mark.parametrize(
    "changes",
    [
        {"job.backoffLimit": "6"},
        {"job.waitForChief": "true"},
        {"job.activeDeadlineSeconds": "3600"},
        {"tensorboard.image": f"{REGISTRY}/tensorboard:2.22.0"},
    ],
)
def test_a_change_that_updates_the_jobs_in_place_keeps_the_run(dev_config, changes):
    # backoffLimit, the deadline and the await annotations do not force replacement
    # (pulumi-kubernetes replaces a Job on spec.template, completions, parallelism, selector).
    before = me.run_program(dev_config).outputs["runId"]
    after = me.run_program({**dev_config, **{f"tf-mnist:{k}": v for k, v in changes.items()}}).outputs[
        "runId"
    ]
    assert after == before


def test_the_templates_hash_refuses_a_template_holding_an_output():
    import pulumi
    import pulumi_kubernetes as k8s

    from infra.components.training import templates_hash

    template = k8s.core.v1.PodTemplateSpecArgs(
        spec=k8s.core.v1.PodSpecArgs(
            containers=[k8s.core.v1.ContainerArgs(name="x", image=pulumi.Output.from_input("y"))]
        )
    )
    with pytest.raises(TypeError, match="has no fixed value"):
        templates_hash({"x": template})


def test_the_dev_stacks_run_id_is_pinned(dev_config):
    """The run id of the committed dev stack, as this code hashes its pod templates. A deployed
    stack's run id changes when its templates do, and with it the run (every task Job replaced,
    a new run directory); so does a change of how they are hashed (field names, JSON form), on
    every user's next `pulumi up`. Update this pin only with a change meant to start new runs
    (a template, the recipe's defaults, the images). The templates hold the base image's
    digest as the mock engine's FakeRegistry gives it (a real stack's is its registry's)."""
    run = me.run_program(dev_config)
    assert run.outputs["runId"] == "5f87efeee257-50c2f5f7-b2ce-ead2-073a-af2dcd35f43f"


# --- the chief of synchronous GPU training ----------------------------------------------------


def test_with_ps_0_and_gpu_workers_the_chief_trains_on_a_gpu_like_the_workers(dev_config):
    run = me.run_program(
        _set(
            dev_config,
            ps__number="0",
            worker__nodeSelector='{"gpu": "p100"}',
            worker__tolerations='[{"key":"team","operator":"Equal","value":"ml"}]',
            chief__nodeSelector='{"tf-mnist/pool": "cpu"}',
        )
    )
    assert run.error is None, run.error
    chief, worker = run.one(JOB, "mnist-chief-0"), run.one(JOB, "mnist-worker-0")
    for job in (chief, worker):
        container, pod = _container(job), _pod(job)
        assert container["image"] == me.pinned(f"{REGISTRY}/trainer:2.21.0-gpu"), job.name
        assert container["resources"]["limits"] == {
            "memory": "8Gi",
            "nvidia.com/gpu": "1",
            **me.EPHEMERAL_LIMIT,
        }, job.name
        assert container["resources"]["requests"] == {"cpu": "2", "memory": "8Gi", **me.EPHEMERAL_REQUEST}, (
            job.name
        )
        assert pod["tolerations"] == [GPU_TOLERATION, {"key": "team", "operator": "Equal", "value": "ml"}], (
            job.name
        )
        assert pod["nodeSelector"] == {"gpu": "p100"}, job.name
        assert "NVIDIA_VISIBLE_DEVICES" not in _env(container) and "CUDA_VISIBLE_DEVICES" not in _env(
            container
        )
    # chief.* then places only the staging Job (CPU, the CPU image).
    staging = run.one(JOB, "mnist-stage-data")
    assert _pod(staging)["nodeSelector"] == {"tf-mnist/pool": "cpu"}
    assert _container(staging)["image"] == me.pinned(f"{REGISTRY}/trainer:2.21.0-cpu")


def test_the_gpu_pool_holds_the_gpu_chief_too(dev_config):
    fixed = _set(dev_config, gpuPool__autoscaling="false")
    gpu = me.run_program(_set(fixed, ps__number="0")).one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert gpu.inputs["desiredSize"] == "3"  # (2 workers + the chief) x 1 GPU / 1 GPU per node
    with_ps = me.run_program(fixed).one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert with_ps.inputs["desiredSize"] == "2"  # the chief of ParameterServerStrategy runs on CPU
    autoscaled = me.run_program(
        _set(
            dev_config, ps__number="0", worker__number="3", worker__gpuCount="2", gpuPool__gpusPerInstance="2"
        )
    )
    assert (
        autoscaled.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu").inputs["scalingConfig"]["maxSize"]
        == 4
    )


@pytest.mark.parametrize("changes", [{"ps.number": "0", "worker.gpuCount": "0"}, {"ps.number": "1"}])
def test_otherwise_the_chief_stays_on_cpu(dev_config, changes):
    run = me.run_program({**dev_config, **{f"tf-mnist:{k}": v for k, v in changes.items()}})
    chief = run.one(JOB, "mnist-chief-0")
    container = _container(chief)
    assert container["image"] == me.pinned(f"{REGISTRY}/trainer:2.21.0-cpu")
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "2Gi", **me.EPHEMERAL_REQUEST}
    assert "tolerations" not in _pod(chief)
    assert _env(container)["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_a_new_failure_policy_is_a_new_run(monkeypatch, dev_config):
    # podFailurePolicy cannot be changed on an existing Job: a stack version that changes it
    # must replace the Jobs, which a new run id (in every template) does.
    from infra.components import training

    before = me.run_program(dev_config).outputs["runId"]
    original = training.pod_failure_policy

    def without_sigterm_rule():
        policy = original()
        return type(policy)(rules=[policy.rules[0], policy.rules[2]])

    monkeypatch.setattr(training, "pod_failure_policy", without_sigterm_rule)
    assert me.run_program(dev_config).outputs["runId"] != before
