"""Who may write the volume, under the mock engine: the pods' uid and gid (pods.runAsUser,
pods.runAsGroup), checked like every key; and the staging Job, which fails at once on a volume
its pods cannot write (exit 6), says why in its termination message, and is replaced by the next
`pulumi up` once the cause is fixed (pulumi.com/replaceUnready). The NAS PV's mode attributes are
in tests/infra/test_infra_volume.py; the real cluster's side in tests/cluster/test_volume_ownership.py."""

from __future__ import annotations

import json
from pathlib import Path

import mock_engine as me
import pytest

from infra.settings import KEYS_BY_NAME
from trainer.contract.exit_codes import EXIT_VOLUME_NOT_WRITABLE

REPO = Path(__file__).resolve().parents[2]
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
HOST_PATH = {
    "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
    "tf-mnist:persistence.volume.type": "hostPath",
    "tf-mnist:hostPath.path": "/srv/tf-mnist",
    "tf-mnist:worker.gpuCount": "0",
}
NFS = {
    "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
    "tf-mnist:persistence.volume.type": "nfs",
    "tf-mnist:nfs.server": "10.0.0.5",
    "tf-mnist:nfs.path": "/exports/tf-mnist",
}
#: The pods that mount the volume, by Pulumi name (the run monitor mounts none).
VOLUME_PODS = ("mnist-stage-data", "mnist-chief-0", "mnist-worker-0", "mnist-ps-0", "mnist-tensorboard")


def _pod(run: me.Run, name: str) -> dict:
    kind = DEPLOYMENT if name.endswith("tensorboard") else JOB
    return run.one(kind, name).inputs["spec"]["template"]["spec"]


def _stage_command(run: me.Run) -> list[str]:
    (container,) = _pod(run, "mnist-stage-data")["containers"]
    return container["command"]


def _hint(run: me.Run) -> str:
    command = _stage_command(run)
    return command[command.index("--volume_hint") + 1]


# --- pods.runAsUser / pods.runAsGroup ------------------------------------------------------


@pytest.mark.parametrize("form", ["flat", "path"])
def test_the_pods_run_as_the_configured_uid_and_gid(dev_config, form):
    ids = {"runAsUser": 2000, "runAsGroup": 3000}
    pods_config = (
        {f"tf-mnist:pods.{k}": str(v) for k, v in ids.items()}
        if form == "flat"
        else {"tf-mnist:pods": json.dumps(ids)}
    )
    run = me.run_program({**dev_config, **HOST_PATH, **pods_config})
    assert run.error is None, run.error
    for name in VOLUME_PODS:
        assert _pod(run, name)["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 2000,
            "runAsGroup": 3000,
            "fsGroup": 3000,
            "seccompProfile": {"type": "RuntimeDefault"},
        }, name
    # The run monitor mounts no volume: it keeps the image's user.
    assert _pod(run, "mnist-monitor")["securityContext"]["runAsUser"] == 10001
    assert "chown -R 2000:3000 /srv/tf-mnist" in _hint(run)


def test_the_default_is_the_images_user_above_10000(dev_config):
    # docker/*.Dockerfile run as USER 10001:10001; the keys' defaults are that user. Above 10000:
    # checkov CKV_K8S_40 and kube-score's container-security-context-user-group-id.
    dockerfiles = sorted((REPO / "docker").glob("*.Dockerfile"))
    assert len(dockerfiles) == 3 and all("\nUSER 10001:10001\n" in f.read_text() for f in dockerfiles), (
        dockerfiles
    )
    assert all("useradd --uid 10001 --gid 10001 " in f.read_text() for f in dockerfiles), dockerfiles
    assert (KEYS_BY_NAME["pods.runAsUser"].default, KEYS_BY_NAME["pods.runAsGroup"].default) == (10001, 10001)
    run = me.run_program({**dev_config, **HOST_PATH})
    assert run.error is None, run.error
    for name in VOLUME_PODS:
        context = _pod(run, name)["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (10001, 10001, 10001), (
            name
        )


@pytest.mark.parametrize(
    "key,value,rule",
    [
        (
            "pods.runAsUser",
            "0",
            "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod Security "
            '"restricted" refuses pods that run as root)',
        ),
        (
            "pods.runAsUser",
            "alice",
            "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod "
            'Security "restricted" refuses pods that run as root)',
        ),
        (
            "pods.runAsUser",
            "2147483648",
            "must be an integer between 1 and 2147483647, a uid other than root's 0 (Pod "
            'Security "restricted" refuses pods that run as root)',
        ),
        ("pods.runAsGroup", "-1", "must be an integer between 0 and 2147483647"),
    ],
    ids=["root", "a-name", "too-large", "negative-gid"],
)
def test_a_bad_uid_or_gid_gives_its_exact_message(dev_config, key, value, rule):
    run = me.run_program({**dev_config, f"tf-mnist:{key}": value})
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            f"Configuration 'tf-mnist:{key}' value '{value}' is invalid: {rule}.",
            f"    fix: pulumi config set {key} 10001",
        ]
    )
    assert run.registrations == [] and run.calls_besides_state == []


def test_gid_0_is_allowed(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH, "tf-mnist:pods.runAsGroup": "0"})
    assert run.error is None, run.error
    assert _pod(run, "mnist-stage-data")["securityContext"]["runAsGroup"] == 0


# --- the staging Job ------------------------------------------------------------------------


def test_staging_fails_at_once_on_an_unwritable_volume_and_says_why(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH})
    assert run.error is None, run.error
    job = run.one(JOB, "mnist-stage-data").inputs
    # The first failed pod (exit 6 on such a volume) fails the Job: `pulumi up` stops within
    # seconds, not after job.backoffLimit (4) restarts, with reason BackoffLimitExceeded, which
    # pulumi-kubernetes' Job await reports (a podFailurePolicy FailJob's reason it ignores).
    # Disruptions get a new pod; podFailurePolicy needs restartPolicy Never.
    assert EXIT_VOLUME_NOT_WRITABLE == 6
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    # The stager's error, its last line, becomes the termination message `pulumi up` prints.
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    # A failed (or cut-off) staging Job is replaced by the next `pulumi up`, a complete one kept.
    assert job["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
    assert _hint(run) == (
        "The volume at /data is hostPath.path /srv/tf-mnist on the node. Fix: on the node, "
        "`chown -R 10001:10001 /srv/tf-mnist`; or, if that directory belongs to a user other than root, run the "
        "pods as that user: `pulumi config set pods.runAsUser <its uid>` and `pulumi config set pods.runAsGroup "
        "<its gid>`. Then run `pulumi up` again: it replaces the failed staging Job."
    )


def test_the_hint_names_where_each_volume_type_lives(dev_config):
    nfs = _hint(me.run_program({**dev_config, **NFS}))
    assert nfs.startswith(
        "The volume at /data is nfs.path /exports/tf-mnist on the NFS server (nfs.server). "
        "Fix: on the NFS server, or as root on a machine that mounts the export without root "
        "squashing, `chown -R 10001:10001 /exports/tf-mnist`;"
    ), nfs
    nas = _hint(me.run_program(dev_config))
    assert nas.startswith(
        "The volume at /data is nas.path /data on the NAS file system, which the CSI driver "
        "makes writable by every uid (mode 1777) but not what is under it."
    ), nas


def test_a_secret_nfs_path_stays_out_of_the_staging_pod(dev_config):
    run = me.run_program({**dev_config, **NFS}, secret_keys=("tf-mnist:nfs.path",))
    assert run.error is None, run.error
    hint = _hint(run)
    assert "/exports/tf-mnist" not in json.dumps(_stage_command(run)), hint
    assert hint.startswith(
        "The volume at /data is nfs.path (a secret) on the NFS server (nfs.server). Fix: "
    ), hint
    assert "`chown -R 10001:10001 <the directory>`" in hint, hint
