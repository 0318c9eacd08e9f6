"""persistence.volume.type: NAS through CSI (the default), a plain NFS server, or a
node directory; each key checked, keys of another type refused, nothing registered on bad config."""

from __future__ import annotations

import json
import re

import mock_engine as me
import pytest

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
#: An existing cluster (kubeconfig mode), where nfs and hostPath are allowed.
EXISTING = {"tf-mnist:kubeconfig": me.secret(me.kubeconfig_content())}
DOMAIN = {"tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com"}
NFS = {
    **EXISTING,
    "tf-mnist:persistence.volume.type": "nfs",
    "tf-mnist:nfs.server": "10.0.0.5",
    "tf-mnist:nfs.path": "/exports/tf-mnist",
}
HOST_PATH = {**EXISTING, "tf-mnist:persistence.volume.type": "hostPath"}


def _rejected(run: me.Run, *lines: str) -> None:
    assert run.error is not None, "the configuration was accepted"
    count = len(lines) // 2
    header = HEADER_1 if count == 1 else f"{count} invalid configuration values; nothing was deployed:"
    assert str(run.error) == "\n".join([header, *lines])
    assert run.registrations == [] and run.calls_besides_state == []


def _assert_binds_like_nas(run: me.Run) -> dict:
    """What every volume type shares with the NAS PV; returns the PV's spec."""
    pv, pvc = run.one(PV, "mnist-data"), run.one(PVC, "mnist-data")
    spec = pv.inputs["spec"]
    assert pv.inputs["metadata"]["labels"]["train"] == "mnist"
    assert spec["storageClassName"] == pvc.inputs["spec"]["storageClassName"] == ""
    assert spec["accessModes"] == pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["capacity"] == {"storage": "5Gi"}
    assert pvc.inputs["spec"]["selector"] == {"matchLabels": {"train": "mnist"}}
    name = pv.inputs["metadata"]["name"]
    assert re.fullmatch(r"mnist-data-[0-9a-f]{8}", name), name
    assert pvc.inputs["metadata"]["name"] == pvc.inputs["spec"]["volumeName"] == name
    return spec


def test_nas_is_the_default_and_its_directory_is_made_writable_for_any_uid(dev_config):
    run = me.run_program({**dev_config, **EXISTING, **DOMAIN})
    assert run.error is None, run.error
    spec = _assert_binds_like_nas(run)
    # mode/modeType: the CSI driver chmods the mounted path (not recursively), which it creates
    # itself root-owned 0755 when missing; a pod's fsGroup it ignores (no fsGroupPolicy).
    assert spec["csi"] == {
        "driver": "nasplugin.csi.alibabacloud.com",
        "volumeHandle": run.one(PV, "mnist-data").inputs["metadata"]["name"],
        "volumeAttributes": {
            "server": "abc.cn-hangzhou.nas.aliyuncs.com",
            "path": "/data",
            "mode": "1777",
            "modeType": "non-recursive",
        },
    }
    assert spec["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]
    assert run.outputs["mountTargetDomain"] == "abc.cn-hangzhou.nas.aliyuncs.com"


def test_the_nas_the_stack_creates_gets_the_same_mode(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    attributes = run.one(PV, "mnist-data").inputs["spec"]["csi"]["volumeAttributes"]
    assert (attributes["path"], attributes["mode"], attributes["modeType"]) == (
        "/data",
        "1777",
        "non-recursive",
    )


def test_nfs_is_the_in_tree_nfs_volume_with_the_same_mount_options(dev_config):
    run = me.run_program({**dev_config, **NFS})
    assert run.error is None, run.error
    spec = _assert_binds_like_nas(run)
    assert spec["nfs"] == {"server": "10.0.0.5", "path": "/exports/tf-mnist"}
    assert spec["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]
    assert "csi" not in spec and "hostPath" not in spec
    assert run.outputs["mountTargetDomain"] is None
    assert not [r for r in run.registrations if r.type.startswith("alicloud:")]


def test_nfs_by_path_and_an_export_root(dev_config):
    config = {
        **dev_config,
        **EXISTING,
        "tf-mnist:persistence": json.dumps(
            {**json.loads(dev_config["tf-mnist:persistence"]), "volume": {"type": "nfs"}}
        ),
        "tf-mnist:nfs": json.dumps({"server": "nfs.lab.internal", "path": "/"}),
    }
    run = me.run_program(config)
    assert run.error is None, run.error
    assert run.one(PV, "mnist-data").inputs["spec"]["nfs"] == {"server": "nfs.lab.internal", "path": "/"}


def test_host_path_is_a_directory_or_create_volume_without_mount_options(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH, "tf-mnist:hostPath.path": "/srv/tf-mnist"})
    assert run.error is None, run.error
    spec = _assert_binds_like_nas(run)
    assert spec["hostPath"] == {"path": "/srv/tf-mnist", "type": "DirectoryOrCreate"}
    assert "mountOptions" not in spec  # the API server refuses mount options on hostPath
    assert "csi" not in spec and "nfs" not in spec


def test_host_path_has_a_default_directory(dev_config):
    run = me.run_program({**dev_config, **HOST_PATH})
    assert run.error is None, run.error
    assert run.one(PV, "mnist-data").inputs["spec"]["hostPath"]["path"] == "/var/lib/tf-mnist"


def test_a_secret_nfs_server_stays_secret(dev_config):
    run = me.run_program({**dev_config, **NFS}, secret_keys=("tf-mnist:nfs.server",))
    assert run.error is None, run.error
    spec = run.one(PV, "mnist-data").inputs["spec"]
    assert me.is_secret_value(spec) and spec["value"]["nfs"]["server"] == "10.0.0.5"


@pytest.mark.parametrize(
    "extra,lines",
    [
        (
            {**HOST_PATH, "tf-mnist:hostPath.path": "var/lib/tf-mnist"},
            [
                "Configuration 'tf-mnist:hostPath.path' value 'var/lib/tf-mnist' is invalid: must be an absolute path "
                "other than '/', such as /data.",
                "    fix: pulumi config set hostPath.path /var/lib/tf-mnist",
            ],
        ),
        (
            {**EXISTING, "tf-mnist:persistence.volume.type": "nfs"},
            [
                "Configuration 'tf-mnist:nfs.server' is missing: required with persistence.volume.type nfs.",
                "    fix: pulumi config set nfs.server nfs.example.internal",
                "Configuration 'tf-mnist:nfs.path' is missing: required with persistence.volume.type nfs.",
                "    fix: pulumi config set nfs.path /exports/tf-mnist",
            ],
        ),
        (
            {**NFS, "tf-mnist:nfs.server": "10.0.0.5:/exports", "tf-mnist:nfs.path": "exports"},
            [
                "Configuration 'tf-mnist:nfs.server' value '10.0.0.5:/exports' is invalid: must be a host name or IPv4 "
                "address of the NFS server, without ':' or a path (the exported directory goes in nfs.path).",
                "    fix: pulumi config set nfs.server nfs.example.internal",
                "Configuration 'tf-mnist:nfs.path' value 'exports' is invalid: must be an absolute path such as "
                "/exports/tf-mnist.",
                "    fix: pulumi config set nfs.path /exports/tf-mnist",
            ],
        ),
        (
            {**EXISTING, "tf-mnist:persistence.volume.type": "NFS"},
            [
                "Configuration 'tf-mnist:persistence.volume.type' value 'NFS' is invalid: must be one of nas, nfs, "
                "hostPath.",
                "    fix: pulumi config set persistence.volume.type nas",
                "Configuration 'tf-mnist:nas.mountTargetDomain' is missing: required with kubeconfig (the stack then "
                "creates no NAS).",
                "    fix: pulumi config set nas.mountTargetDomain xxxx.cn-hangzhou.nas.aliyuncs.com",
            ],
        ),
    ],
    ids=["hostPath-relative", "nfs-without-server-and-path", "nfs-server-with-colon", "type-misspelt"],
)
def test_bad_volume_settings_give_their_exact_message(dev_config, extra, lines):
    _rejected(me.run_program({**dev_config, **extra}), *lines)


def test_nas_keys_are_refused_with_another_volume_type(dev_config):
    # A bad nas.path is reported as not applying (its own rule does not matter then): one fix.
    run = me.run_program(
        {
            **dev_config,
            **NFS,
            "tf-mnist:nas.path": "relative",
            "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
        }
    )
    _rejected(
        run,
        "Configuration 'tf-mnist:nas.path' value 'relative' is invalid: applies only with "
        "persistence.volume.type nas (this stack's is nfs).",
        "    fix: pulumi config rm nas.path",
        "Configuration 'tf-mnist:nas.mountTargetDomain' value 'abc.cn-hangzhou.nas.aliyuncs.com' is invalid: "
        "applies only with persistence.volume.type nas (this stack's is nfs).",
        "    fix: pulumi config rm nas.mountTargetDomain",
    )


def test_a_nas_key_set_with_path_is_refused_with_the_path_fix(dev_config):
    nas = {**json.loads(dev_config["tf-mnist:nas"]), "storageType": "Capacity"}
    run = me.run_program({**dev_config, **HOST_PATH, "tf-mnist:nas": json.dumps(nas)})
    _rejected(
        run,
        "Configuration 'tf-mnist:nas.storageType' value 'Capacity' is invalid: applies only with "
        "persistence.volume.type nas (this stack's is hostPath).",
        "    fix: pulumi config rm --path nas.storageType",
    )


def test_the_nas_defaults_the_cli_writes_are_not_taken_for_settings(dev_config):
    # Pulumi.yaml declares nas.zoneCheck, nas.retainOnDestroy and nas.path with defaults: the CLI
    # writes them into tf-mnist:nas for every stack (dev_config has them). Not nas.storageType,
    # whose default comes from the stack's state.
    assert json.loads(dev_config["tf-mnist:nas"]) == {
        "zoneCheck": "up",
        "retainOnDestroy": True,
        "path": "/data",
    }
    assert me.run_program({**dev_config, **NFS}).error is None


def test_nfs_and_host_path_keys_are_refused_with_nas(dev_config):
    run = me.run_program(
        {
            **dev_config,
            **EXISTING,
            **DOMAIN,
            "tf-mnist:nfs.server": "10.0.0.5",
            "tf-mnist:hostPath.path": "/srv/x",
        }
    )
    _rejected(
        run,
        "Configuration 'tf-mnist:nfs.server' value '10.0.0.5' is invalid: applies only with "
        "persistence.volume.type nfs (this stack's is nas).",
        "    fix: pulumi config rm nfs.server",
        "Configuration 'tf-mnist:hostPath.path' value '/srv/x' is invalid: applies only with "
        "persistence.volume.type hostPath (this stack's is nas).",
        "    fix: pulumi config rm hostPath.path",
    )


@pytest.mark.parametrize(
    "volume_type,reason",
    [
        (
            "hostPath",
            "a directory of one node is not shared by the several nodes of the cluster the stack creates",
        ),
        (
            "nfs",
            "the stack creates the cluster in a VPC of its own, where it creates NAS and no NFS server runs",
        ),
    ],
)
def test_nfs_and_host_path_need_an_existing_cluster(dev_config, volume_type, reason):
    extra = (
        {"tf-mnist:nfs.server": "10.0.0.5", "tf-mnist:nfs.path": "/exports"} if volume_type == "nfs" else {}
    )
    run = me.run_program({**dev_config, "tf-mnist:persistence.volume.type": volume_type, **extra})
    _rejected(
        run,
        f"Configuration 'tf-mnist:persistence.volume.type' value '{volume_type}' is invalid: must be nas "
        f"without kubeconfig ({reason}); {volume_type} needs an existing cluster (kubeconfig).",
        "    fix: pulumi config set persistence.volume.type nas",
    )


def test_claim_and_tensorboard_name_the_volume_in_plain_text_ordered_by_depends_on(dev_config):
    """On a cluster the stack is still to create, every Kubernetes output is unknown at
    preview: the claim's volumeName and TensorBoard's claimName are the plain volume name (no
    property dependency on the PV or the claim), and explicit depends_on keeps the order."""
    run = me.run_program(dev_config, preview=True)
    assert run.error is None, run.error
    pv, pvc = run.one(PV, "mnist-data"), run.one(PVC, "mnist-data")
    deployment = run.one("kubernetes:apps/v1:Deployment", "mnist-tensorboard")
    name = pv.inputs["metadata"]["name"]
    assert pvc.inputs["spec"]["volumeName"] == name
    # The data volume, beside the emptyDir at /tmp that the read-only root filesystem needs.
    (volume,) = [
        v for v in deployment.inputs["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v
    ]
    assert volume["persistentVolumeClaim"]["claimName"] == name
    assert pv.urn not in pvc.property_dependencies.get("spec", [])
    assert pvc.urn not in deployment.property_dependencies.get("spec", [])
    assert pv.urn in pvc.dependencies and pvc.urn in deployment.dependencies
