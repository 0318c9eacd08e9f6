"""Who may write the volume, under the mock engine: the pods' uid and gid (pods.runAsUser,
pods.runAsGroup), checked like every key. The NAS PV's mode attributes are in
tests/infra/test_infra_volume.py."""

from __future__ import annotations

import json

import pytest

import mock_engine as me

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
HOST_PATH = {"tf-mnist:kubeconfig": me.kubeconfig_content(), "tf-mnist:persistence.volume.type": "hostPath",
             "tf-mnist:hostPath.path": "/srv/tf-mnist", "tf-mnist:worker.gpuCount": "0"}
#: The pods that mount the volume, by Pulumi name (the run monitor mounts none).
VOLUME_PODS = ("mnist-stage-data", "mnist-chief-0", "mnist-worker-0", "mnist-ps-0", "mnist-tensorboard")


def _pod(run: me.Run, name: str) -> dict:
    kind = DEPLOYMENT if name.endswith("tensorboard") else JOB
    return run.one(kind, name).inputs["spec"]["template"]["spec"]


# --- pods.runAsUser / pods.runAsGroup ------------------------------------------------------


@pytest.mark.parametrize("form", ["flat", "path"])
def test_the_pods_run_as_the_configured_uid_and_gid(dev_config, form):
    ids = {"runAsUser": 2000, "runAsGroup": 3000}
    pods_config = ({f"tf-mnist:pods.{k}": str(v) for k, v in ids.items()} if form == "flat"
                   else {"tf-mnist:pods": json.dumps(ids)})
    run = me.run_program({**dev_config, **HOST_PATH, **pods_config})
    assert run.error is None, run.error
    for name in VOLUME_PODS:
        assert _pod(run, name)["securityContext"] == {
            "runAsNonRoot": True, "runAsUser": 2000, "runAsGroup": 3000, "fsGroup": 3000,
            "seccompProfile": {"type": "RuntimeDefault"}}, name
    # The run monitor mounts no volume: it keeps the image's user.
    assert _pod(run, "mnist-monitor")["securityContext"]["runAsUser"] == 1000


def test_the_default_is_the_images_user(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH})
    assert run.error is None, run.error
    for name in VOLUME_PODS:
        context = _pod(run, name)["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (1000, 1000, 1000), name


@pytest.mark.parametrize("key,value,rule", [
    ("pods.runAsUser", "0", "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod Security "
                            "\"restricted\" refuses pods that run as root)"),
    ("pods.runAsUser", "alice", "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod "
                                "Security \"restricted\" refuses pods that run as root)"),
    ("pods.runAsUser", "2147483648", "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod "
                                     "Security \"restricted\" refuses pods that run as root)"),
    ("pods.runAsGroup", "-1", "must be an integer between 0 and 2147483647"),
], ids=["root", "a-name", "too-large", "negative-gid"])
def test_a_bad_uid_or_gid_gives_its_exact_message(dev_config, key, value, rule):
    run = me.run_program({**dev_config, f"tf-mnist:{key}": value})
    assert str(run.error) == "\n".join([
        HEADER_1, f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.",
        f"    fix: pulumi config set {key} 1000"])
    assert run.registrations == [] and run.calls == []


def test_gid_0_is_allowed(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH, "tf-mnist:pods.runAsGroup": "0"})
    assert run.error is None, run.error
    assert _pod(run, "mnist-stage-data")["securityContext"]["runAsGroup"] == 0
