"""The run monitor's objects under the mock engine: its Job, script, ServiceAccount and the
namespaced Role it may use, and the keys that shape it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mock_engine as me
import pytest

REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"

JOB = "kubernetes:batch/v1:Job"
NAME = "mnist-monitor"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
SCRIPT = Path(me.REPO, "infra", "run_monitor.py").read_text(encoding="utf-8")
MODULE = Path(me.REPO, "infra", "pod_progress.py").read_text(encoding="utf-8")
API_MODULE = Path(me.REPO, "infra", "monitor_api.py").read_text(encoding="utf-8")
TRAINER_STATUS = Path(me.REPO, "infra", "trainer_status.py").read_text(encoding="utf-8")
RUN_COST = Path(me.REPO, "infra", "run_cost.py").read_text(encoding="utf-8")
PROGRESS = Path(me.REPO, "trainer", "contract", "progress.py").read_text(encoding="utf-8")
#: The ConfigMap's files: the script and the modules it loads from beside it.
FILES = {
    "run_monitor.py": SCRIPT,
    "pod_progress.py": MODULE,
    "monitor_api.py": API_MODULE,
    "trainer_status.py": TRAINER_STATUS,
    "run_cost.py": RUN_COST,
    "progress.py": PROGRESS,
}


@pytest.fixture
def dev_config(dev_config):
    """The dev stack with images of your own (imageRegistry: the images built from
    docker/): the monitor runs the CPU trainer image.
    The default, the base image with the code and packages from the stack, is
    tests/infra/test_base_image.py's."""
    return {**dev_config, "tf-mnist:imageRegistry": REGISTRY}


def _pod(run: me.Run) -> dict:
    return run.one(JOB, NAME).inputs["spec"]["template"]["spec"]


def _env(run: me.Run) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _pod(run)["containers"][0]["env"]}


def test_the_monitor_job_runs_the_script_from_its_config_map_with_its_own_account(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    config_map = run.one("kubernetes:core/v1:ConfigMap", NAME).inputs
    assert config_map["data"] == FILES
    job = run.one(JOB, NAME)
    assert job.inputs["metadata"]["namespace"] == "tf-mnist"
    assert job.inputs["metadata"]["labels"]["app.kubernetes.io/component"] == "monitor"
    assert job.inputs["spec"]["backoffLimit"] == 2
    pod = _pod(run)
    assert pod["serviceAccountName"] == NAME and pod["automountServiceAccountToken"] is True
    # Never: under OnFailure each in-place restart counts against backoffLimit (two kills of the
    # node's processes failed the Job of a run that trained to the end); kills get new pods.
    assert pod["restartPolicy"] == "Never"
    assert job.inputs["spec"]["podFailurePolicy"] == {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "monitor", "operator": "In", "values": [2]},
            },
            {
                "action": "Ignore",
                "onExitCodes": {"containerName": "monitor", "operator": "In", "values": [137, 143]},
            },
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]
    }
    (container,) = pod["containers"]
    assert container["image"] == me.pinned("registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu")
    assert container["command"] == ["python", "/monitor/run_monitor.py"]
    # A pod that gives up says why in its status (the log's last lines): which API server, which port.
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "script", "configMap": {"name": NAME}} in pod["volumes"]
    assert {"name": "script", "mountPath": "/monitor", "readOnly": True} in container["volumeMounts"]
    assert container["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi", **me.EPHEMERAL_REQUEST},
        "limits": {"cpu": "500m", "memory": "128Mi", **me.EPHEMERAL_LIMIT},
    }
    env = _env(run)
    chief_args = run.one(JOB, "mnist-chief-0").inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    assert env["MONITOR_RUN_ID"] == run.outputs["runId"] == chief_args[chief_args.index("--run_id") + 1]
    assert (
        env["MONITOR_NAMESPACE"],
        env["MONITOR_PREFIX"],
        env["MONITOR_SCHEDULE_TIMEOUT_S"],
        env["MONITOR_START_TIMEOUT_S"],
    ) == ("tf-mnist", "mnist", "1800", "900")
    assert "MONITOR_API_SERVER" not in env
    # What its NetworkPolicy opens to the API server (a cluster the stack creates: ACK's 6443),
    # named when it cannot reach the server; a change of it starts a new monitor Job.
    assert env["MONITOR_EGRESS_PORTS"] == "6443"
    # The staging Job's deadline, raised once its pod runs (run_monitor.staging_deadline).
    assert (env["MONITOR_STAGING_JOB"], env["MONITOR_STAGING_DEADLINE_S"]) == ("mnist-stage-data", "1200")
    # While the staging pod progresses toward starting, its deadline follows it from
    # data.startTimeoutSeconds (run_monitor.staging_deadline).
    assert env["MONITOR_WATCHED_START_TIMEOUT_S"] == "600"
    assert run.outputs["monitorJobName"] == NAME
    # Ready once created, like the task Jobs: `pulumi up` does not wait for the run.
    assert me.own_annotations(job.inputs["metadata"]) == {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}


def test_the_role_grants_only_what_the_script_calls_in_the_runs_namespace(dev_config):
    run = me.run_program(dev_config)
    account = run.one("kubernetes:core/v1:ServiceAccount", NAME).inputs
    assert account["automountServiceAccountToken"] is False
    role = run.one("kubernetes:rbac.authorization.k8s.io/v1:Role", NAME)
    assert role.inputs["metadata"]["namespace"] == "tf-mnist"
    # run_monitor.py lists Jobs and pods by label and the pods' Events, reads the chief pod's log
    # (its progress: get on pods/log alone, no resourceNames since pod names are random, no
    # exec, no attach, no get of a pod), patches a task Job to end it or write the chief's
    # progress, and the staging Job to raise its deadline: the patch names the run's own Jobs, so
    # no other Job in the namespace can be changed.
    assert role.inputs["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "verbs": ["patch"],
            "resourceNames": [
                "mnist-chief-0",
                "mnist-worker-0",
                "mnist-worker-1",
                "mnist-ps-0",
                "mnist-ps-1",
                "mnist-stage-data",
            ],
        },
    ]
    binding = run.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", NAME)
    assert binding.inputs["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": NAME,
    }
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "tf-mnist"}]
    # No ClusterRole: the monitor sees nothing outside its namespace.
    assert not [r for r in run.registrations if "ClusterRole" in r.type]
    # The pod starts only once its calls are allowed.
    assert binding.urn in run.one(JOB, NAME).dependencies


def test_a_new_run_gets_a_new_monitor(dev_config):
    # The run id is in the monitor's pod template: a change that replaces the task Jobs (a
    # new run id) replaces the monitor Job too, so a finished monitor never outlives its run.
    before = me.run_program(dev_config)
    after = me.run_program(me.set_flat(dev_config, "hyperparams.epochs", "7"))
    assert before.outputs["runId"] != after.outputs["runId"]
    assert (_env(before)["MONITOR_RUN_ID"], _env(after)["MONITOR_RUN_ID"]) == (
        before.outputs["runId"],
        after.outputs["runId"],
    )


def test_schedule_timeout_and_api_server_reach_the_script(dev_config):
    config = me.set_flat(
        me.set_flat(dev_config, "job.scheduleTimeoutSeconds", "45"),
        "monitor.apiServer",
        "https://10.244.0.1:6443",
    )
    env = _env(me.run_program(config))
    assert (env["MONITOR_SCHEDULE_TIMEOUT_S"], env["MONITOR_API_SERVER"]) == ("45", "https://10.244.0.1:6443")


def test_the_egress_ports_reach_the_script_only_with_the_policies(dev_config):
    with_port = _env(me.run_program(me.set_flat(dev_config, "monitor.apiServerPort", "16443")))
    assert with_port["MONITOR_EGRESS_PORTS"] == "16443"
    without = _env(me.run_program(me.set_flat(dev_config, "networkPolicy.enabled", "false")))
    assert "MONITOR_EGRESS_PORTS" not in without


def test_bad_monitor_keys_are_refused_with_the_fix(dev_config):
    run = me.run_program(me.set_flat(dev_config, "job.scheduleTimeoutSeconds", "-5"))
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:job.scheduleTimeoutSeconds' value '-5' is invalid: must be an integer >= 0.",
            "    fix: pulumi config set job.scheduleTimeoutSeconds 1800",
        ]
    )
    run = me.run_program(me.set_flat(dev_config, "monitor.apiServer", "http://10.244.0.1:6443"))
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:monitor.apiServer' value 'http://10.244.0.1:6443' is invalid: must be "
            "an https URL of a host and an optional port, such as https://10.244.0.1:6443 (no path).",
            "    fix: pulumi config set monitor.apiServer https://10.244.0.1:6443",
        ]
    )
    assert run.registrations == []


def test_the_config_maps_files_run_on_their_own(tmp_path):
    """The pod has the ConfigMap's files and the image's Python, no infra or trainer package:
    the script imports its modules from beside it (here it gets as far as its environment
    check)."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "run_monitor.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "run monitor: bad environment: KeyError('MONITOR_NAMESPACE')\n"
