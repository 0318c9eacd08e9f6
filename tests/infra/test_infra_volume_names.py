"""The PV's and the claim's names (a change on a live stack): they carry a hash of what
the API server cannot change in place, so such a change makes a new pair, moves every pod to
it and deletes the old pair, instead of an update the API server refuses mid-way."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import mock_engine as me
import pytest
from pulumi.output import Unknown

from infra.components import storage

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
KUBERNETES_VERSION = "1.33.0"  # as tests/infra/test_infra_modes.py
#: An existing cluster with an NFS server: every source field is plain config.
NFS = {
    "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
    "tf-mnist:persistence.volume.type": "nfs",
    "tf-mnist:nfs.server": "10.0.0.5",
    "tf-mnist:nfs.path": "/exports/tf-mnist",
}
#: A DNS subdomain (RFC 1123), which is what the API server asks of PV and claim names.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _nested(config: dict, dotted: str, value) -> dict:
    """``config`` with one sub-value of a structured key (``persistence.pvc.storage``), or a top-level
    key, replaced."""
    head, *path = dotted.split(".")
    out = dict(config)
    if not path:
        out[f"tf-mnist:{head}"] = str(value)
        return out
    obj = json.loads(out.get(f"tf-mnist:{head}", "{}"))
    node = obj
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    out[f"tf-mnist:{head}"] = json.dumps(obj)
    return out


def _run(config: dict, **kwargs) -> me.Run:
    run = me.run_program(config, **kwargs)
    assert run.error is None, run.error
    return run


def _names(run: me.Run) -> tuple[str, str]:
    return (
        run.one(PV, "mnist-data").inputs["metadata"]["name"],
        run.one(PVC, "mnist-data").inputs["metadata"]["name"],
    )


def _claims_in_pod_templates(run: me.Run) -> dict[str, list[str]]:
    """Every Job's and Deployment's pod-template claim names, by Pulumi name."""
    out = {}
    # The run monitor mounts no claim (it reads only the API).
    for obj in [*[j for j in run.of_type(JOB) if j.name != "mnist-monitor"], *run.of_type(DEPLOYMENT)]:
        volumes = obj.inputs["spec"]["template"]["spec"]["volumes"]
        out[obj.name] = [
            v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
        ]
    return out


@pytest.fixture
def nfs_config(dev_config) -> dict:
    return {**dev_config, **NFS}


# Changes the API server cannot make in place: a new pair.
RENAMING = {
    "storage": ("persistence.pvc.storage", "10Gi"),
    "matchLabels-value": ("persistence.pvc.matchLabels", {"train": "mnist-v2"}),
    "matchLabels-extra": ("persistence.pvc.matchLabels", {"train": "mnist", "team": "vision"}),
    "namespace": ("namespace", "research"),
}
# Changes that leave the pair alone (the Jobs may still be replaced, not the volume).
KEEPING = {
    "worker.number": ("worker.number", 4),
    "ps.number": ("ps.number", 1),
    "hyperparams.epochs": ("hyperparams.epochs", 5),
    "hyperparams.learningrate": ("hyperparams.learningrate", "0.01"),
    "worker.image": ("worker.image", "registry.example.com/trainer:other"),
    "tensorboard.serviceType": ("tensorboard.serviceType", "ClusterIP"),
    "mountPath": ("mountPath", "/mnt/shared"),
}


@pytest.mark.parametrize("key", list(RENAMING))
def test_a_change_the_api_server_refuses_in_place_renames_both(nfs_config, key):
    before = _run(nfs_config)
    dotted, value = RENAMING[key]
    after = _run(_nested(nfs_config, dotted, value))
    old, new = _names(before), _names(after)
    assert old[0] == old[1] and new[0] == new[1]
    assert new != old, f"{key}: the PV and claim kept the name {old[0]}"
    # The pods follow: every pod template names the new claim (and the Jobs get a new run id,
    # so the engine replaces them rather than patching a template the API server refuses).
    assert set(sum(_claims_in_pod_templates(after).values(), [])) == {new[1]}
    assert after.outputs["runId"] != before.outputs["runId"]
    assert after.outputs["pvcName"] == new[1] and after.outputs["pvName"] == new[0]


@pytest.mark.parametrize("key", list(KEEPING))
def test_other_changes_keep_the_names(nfs_config, key):
    dotted, value = KEEPING[key]
    assert _names(_run(_nested(nfs_config, dotted, value))) == _names(_run(nfs_config)), key


@pytest.mark.parametrize(
    "change",
    [
        {"tf-mnist:nfs.server": "10.0.0.6"},
        {"tf-mnist:nfs.path": "/exports/other"},
        {
            "tf-mnist:persistence.volume.type": "hostPath",
            "tf-mnist:nfs.server": None,
            "tf-mnist:nfs.path": None,
            "tf-mnist:hostPath.path": "/exports/tf-mnist",
        },
    ],
    ids=["server", "path", "type"],
)
def test_a_new_volume_source_renames_both(nfs_config, change):
    config = {k: v for k, v in {**nfs_config, **change}.items() if v is not None}
    assert _names(_run(config)) != _names(_run(nfs_config))


def test_a_flat_key_and_the_same_value_by_path_give_the_same_name(dev_config):
    flat = {**dev_config, **NFS}
    by_path = _nested(flat, "persistence.volume.type", "nfs")
    by_path.pop("tf-mnist:persistence.volume.type")
    assert _names(_run(by_path)) == _names(_run(flat))


def test_the_stack_nas_is_renamed_with_a_new_file_system_only(dev_config):
    base = _names(_run(dev_config))
    assert _names(_run(_nested(dev_config, "nas.storageType", "Performance"))) != base
    assert _names(_run(_nested(dev_config, "worker.number", 3))) == base
    # The mock's mount target domain is not in the name: it is unknown at preview.
    preview = _run(dev_config, preview=True)
    assert _names(preview) == base
    assert isinstance(
        preview.one(PV, "mnist-data").inputs["spec"]["csi"]["volumeAttributes"]["server"], Unknown
    )


def test_the_claim_is_pre_bound_to_its_pv_and_every_pod_mounts_it(nfs_config):
    run = _run(nfs_config)
    pv, pvc = run.one(PV, "mnist-data"), run.one(PVC, "mnist-data")
    name = pv.inputs["metadata"]["name"]
    assert re.fullmatch(r"mnist-data-[0-9a-f]{8}", name), name
    assert pvc.inputs["spec"]["volumeName"] == name
    assert pvc.inputs["spec"]["selector"] == {"matchLabels": {"train": "mnist"}}
    assert pvc.inputs["spec"]["storageClassName"] == pv.inputs["spec"]["storageClassName"] == ""
    assert pv.urn in pvc.dependencies
    claims = _claims_in_pod_templates(run)
    assert "mnist-tensorboard" in claims and "mnist-chief-0" in claims and "mnist-stage-data" in claims
    assert all(c == [name] for c in claims.values()), claims


def test_the_pulumi_names_stay_so_a_rename_is_a_create_before_delete_replacement(nfs_config):
    # Same URNs before and after: the engine replaces each object; under a new object name
    # pulumi-kubernetes does not ask for delete-before-replace, so the old pair goes last.
    before, after = _run(nfs_config), _run(_nested(nfs_config, "persistence.pvc.storage", "10Gi"))
    for type_ in (PV, PVC):
        assert before.one(type_, "mnist-data").urn == after.one(type_, "mnist-data").urn
        assert not after.one(type_, "mnist-data").delete_before_replace
        assert not after.one(type_, "mnist-data").retain_on_delete


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"persistence.pvc.storage": "10Gi"},
        {"persistence.pvc.matchLabels": {"train": "mnist", "team": "vision"}},
    ],
    ids=["as-is", "storage", "matchLabels"],
)
def test_renamed_pairs_validate_strictly(nfs_config, change):
    config = nfs_config
    for dotted, value in change.items():
        config = _nested(config, dotted, value)
    run = _run(config)
    for obj in (run.one(PV, "mnist-data"), run.one(PVC, "mnist-data")):
        manifest = me.to_manifest(obj.inputs)
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        assert DNS_SUBDOMAIN.fullmatch(manifest["metadata"]["name"])


def test_the_longest_prefix_gives_a_valid_name(nfs_config):
    prefix = "a" * 39 + "z"  # namePrefix allows 40 characters
    run = _run({**nfs_config, "tf-mnist:namePrefix": prefix})
    pv = run.one(PV, f"{prefix}-data")
    name = pv.inputs["metadata"]["name"]
    assert len(name) == 40 + len("-data-") + storage.NAME_HASH_HEX <= 63  # also fits a label value
    assert DNS_SUBDOMAIN.fullmatch(name)
    assert pv.inputs["spec"]["nfs"] == {"server": "10.0.0.5", "path": "/exports/tf-mnist"}


def test_a_secret_server_stays_out_of_the_name(nfs_config):
    run = _run(nfs_config, secret_keys=("tf-mnist:nfs.server",))
    name = run.one(PV, "mnist-data").inputs["metadata"]["name"]
    assert isinstance(name, str) and "10.0.0.5" not in name and not me.is_secret_value(name)
    assert name == _names(_run(nfs_config))[0]  # secrecy changes nothing on the cluster


def test_volume_name_hashes_each_fixed_field():
    base = dict(
        namespace="default",
        volume_type="nfs",
        server_key="10.0.0.5",
        path="/x",
        storage="5Gi",
        match_labels={"train": "mnist"},
    )
    names = {storage.volume_name("mnist", **base)}
    for field_, other in [
        ("namespace", "research"),
        ("volume_type", "nas"),
        ("server_key", "10.0.0.6"),
        ("path", "/y"),
        ("storage", "6Gi"),
        ("match_labels", {"train": "other"}),
    ]:
        names.add(storage.volume_name("mnist", **{**base, field_: other}))
    assert len(names) == 7
    # Label order is not a change.
    reordered = {**base, "match_labels": {"b": "2", "a": "1"}}
    assert storage.volume_name("mnist", **reordered) == storage.volume_name(
        "mnist", **{**base, "match_labels": {"a": "1", "b": "2"}}
    )
