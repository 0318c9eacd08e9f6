"""The dev stack as the preview tests configure it and what its preview must plan.

``configure`` sets up either way of running it (test_preview.py's module docstring): ``cloud``
(the whole cloud layer, under pulumi-resource-alicloud kept off the network) or ``cluster``
(an existing cluster's kubeconfig, pointing at a closed local port). The counts follow the
stack's topology (infra/components/training.py and the committed Pulumi.dev.yaml: ps.number 2,
worker.number 2, worker.gpuCount 1, name prefix ``mnist`` in the stack's own namespace
``tf-mnist``, which it creates): the Namespace, one Job and one headless Service per task
(chief, workers, ps), a data-staging Job, the cluster-spec ConfigMap, a PV and its PVC, and
TensorBoard's Deployment and Service; and, the dev stack having no image of its own, the base
image on every pod, the code, sample and requirement ConfigMaps and the setup Job
(infra/components/setup.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter

import yaml

from infra import bundle

from .cloud_layer import assert_cloud_layer
from .conftest import require_binary
from .engine import UNREACHABLE_KUBECONFIG, PreviewResult, PulumiProject, Toolchain, alicloud_offline_config

PREFIX = "mnist"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "tf-mnist"  # namespace's default, created (createNamespace unset)
#: How the engine writes a value unknown until the resource it comes from is created.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
PS = 2  # Pulumi.dev.yaml ps.number
COMMITTED_WORKERS = 2  # Pulumi.dev.yaml worker.number
WORKER_PORT = 8000
PS_PORT = 9000
#: The ConfigMaps the bundled sample is cut into (infra/bundle.py split_parts).
SAMPLE_PIECES = len(bundle.split_parts(bundle.sample_files()))

#: Cloud layer of the dev stack (infra/components: network, cluster, node_pools, nas). Two
#: vSwitches because a new cluster gets Terway (nodes' and pods'); two node pools because
#: worker.gpuCount is 1 (a CPU pool and a GPU pool), and the cluster's autoscaler for the GPU pool
#: that scales from zero; no SLB ACL because tensorboard.allowedSourceRanges is empty.
ALICLOUD_COUNTS = {
    "alicloud:vpc/network:Network": 1,
    "alicloud:vpc/switch:Switch": 2,
    "alicloud:cs/managedKubernetes:ManagedKubernetes": 1,
    "alicloud:cs/nodePool:NodePool": 2,
    "alicloud:cs/autoscalingConfig:AutoscalingConfig": 1,
    "alicloud:nas/fileSystem:FileSystem": 1,
    "alicloud:nas/accessGroup:AccessGroup": 1,
    "alicloud:nas/accessRule:AccessRule": 1,
    "alicloud:nas/mountTarget:MountTarget": 1,
}


def kubernetes_counts(workers: int) -> dict[str, int]:
    """Kubernetes objects of the training topology with ``workers`` workers and PS ps."""
    tasks = 1 + workers + PS  # the chief, the workers, the ps
    return {
        "kubernetes:core/v1:Namespace": 1,  # the stack's own, "restricted"
        "kubernetes:batch/v1:Job": tasks + 3,  # + the data-staging Job, the run monitor, the setup Job
        "kubernetes:core/v1:Service": tasks + 1,  # + TensorBoard's Service
        # The cluster spec, the run's identity, the monitor's script; the code, the sample's
        # pieces and the requirement files.
        "kubernetes:core/v1:ConfigMap": 3 + 1 + SAMPLE_PIECES + 1,
        # The run monitor's identity and its rights on the run's Jobs and pods.
        "kubernetes:core/v1:ServiceAccount": 1,
        "kubernetes:rbac.authorization.k8s.io/v1:Role": 1,
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 1,
        "kubernetes:core/v1:PersistentVolume": 1,
        "kubernetes:core/v1:PersistentVolumeClaim": 1,
        "kubernetes:apps/v1:Deployment": 1,
        # The run's tasks', TensorBoard's, the staging Job's, the monitor's and the setup Job's
        # (networkPolicy.enabled).
        "kubernetes:networking.k8s.io/v1:NetworkPolicy": 5,
    }


def configure(project: PulumiProject, toolchain: Toolchain, mode: str) -> None:
    """Stack settings for ``mode`` (``cloud`` or ``cluster``), on the project copy only."""
    if mode == "cloud":
        require_binary(toolchain, "pulumi-resource-alicloud")
        for key, value in alicloud_offline_config().items():
            project.set_config(key, value, secret=key.endswith("Key"))
    else:
        project.set_config("tf-mnist:kubeconfig", UNREACHABLE_KUBECONFIG, secret=True)
        project.set_config("tf-mnist:nas.mountTargetDomain", "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com")


def stack_config(project: PulumiProject) -> dict:
    """The copy's Pulumi.dev.yaml ``config`` section, as the CLI wrote it."""
    return yaml.safe_load((project.dir / "Pulumi.dev.yaml").read_text())["config"]


def names_of(preview: PreviewResult, rtype: str) -> list[str]:
    return sorted(r["inputs"]["metadata"]["name"] for r in preview.resources(rtype))


def assert_topology(preview: PreviewResult, workers: int, mode: str) -> None:
    """Exit status, every resource type with its count, worker names and the cluster spec."""
    assert preview.returncode == 0, preview.messages()
    errors = [d for d in preview.plan.get("diagnostics", []) if d.get("severity") == "error"]
    assert errors == [], errors
    assert {s["op"] for s in preview.steps} == {"create"}, "a fresh stack only creates"

    expected = Counter(kubernetes_counts(workers))
    if mode == "cloud":
        expected.update(ALICLOUD_COUNTS)
    counts = preview.type_counts()
    assert counts == expected, {
        t: (counts.get(t), expected.get(t)) for t in {*counts, *expected} if counts.get(t) != expected.get(t)
    }

    worker_names = [f"{PREFIX}-worker-{i}" for i in range(workers)]
    jobs = names_of(preview, "kubernetes:batch/v1:Job")
    services = names_of(preview, "kubernetes:core/v1:Service")
    assert [n for n in jobs if n.startswith(f"{PREFIX}-worker-")] == worker_names
    assert [n for n in services if n.startswith(f"{PREFIX}-worker-")] == worker_names
    assert f"{PREFIX}-chief-0" in jobs and f"{PREFIX}-chief-0" in services

    assert_volume(preview)
    assert_base_image(preview)
    if mode == "cloud":
        assert_cloud_layer(preview, workers)
    assert_namespace_and_identity(preview, mode)

    (config_map,) = [
        r
        for r in preview.resources("kubernetes:core/v1:ConfigMap")
        if r["inputs"]["metadata"]["name"] == f"{PREFIX}-cluster-spec"
    ]
    spec = json.loads(config_map["inputs"]["data"]["cluster_spec.json"])
    assert spec["worker"] == [f"{PREFIX}-worker-{i}.{NAMESPACE}.svc:{WORKER_PORT}" for i in range(workers)]
    assert spec["ps"] == [f"{PREFIX}-ps-{i}.{NAMESPACE}.svc:{PS_PORT}" for i in range(PS)]
    assert spec["chief"] == [f"{PREFIX}-chief-0.{NAMESPACE}.svc:{WORKER_PORT}"]


def assert_base_image(preview: PreviewResult) -> None:
    """Every pod runs the region's base image (Pulumi.dev.yaml: cn-hangzhou), the code is one
    immutable ConfigMap named by its hash, and the setup Job installs the three package sets."""
    pods = [r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:batch/v1:Job")]
    pods += [
        r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:apps/v1:Deployment")
    ]
    assert {c["image"] for p in pods for c in p["containers"]} == {bundle.ALINUX_PYTHON_IMAGE}
    maps = {
        r["inputs"]["metadata"]["name"]: r["inputs"]
        for r in preview.resources("kubernetes:core/v1:ConfigMap")
    }
    code = maps[f"{PREFIX}-code-{bundle.code_hash()}"]
    assert code["immutable"] is True and "trainer.__main__.py" in code["data"]
    (setup,) = [
        r
        for r in preview.resources("kubernetes:batch/v1:Job")
        if r["inputs"]["metadata"]["name"] == f"{PREFIX}-setup"
    ]
    command = setup["inputs"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "trainer.install"], command
    assert [command[i + 1].split("=")[0] for i, a in enumerate(command) if a == "--lock"] == [
        "cpu",
        "gpu",
        "tensorboard",
    ]


def assert_namespace_and_identity(preview: PreviewResult, mode: str) -> None:
    """The objects are in the stack's own namespace, which it creates enforcing "restricted",
    and every pod runs as a uid and gid above 10000 (checkov CKV_K8S_21 and CKV_K8S_40). In
    ``cloud`` mode the Namespace's provider is the cluster's, yet to be created, so the name the
    objects take from it is unknown at preview (the engine's UNKNOWN)."""
    (namespace,) = preview.resources("kubernetes:core/v1:Namespace")
    labels = namespace["inputs"]["metadata"]["labels"]
    assert namespace["inputs"]["metadata"]["name"] == NAMESPACE, namespace["inputs"]["metadata"]
    assert all(
        labels[f"pod-security.kubernetes.io/{m}"] == "restricted" for m in ("enforce", "warn", "audit")
    )
    placed = [
        r
        for r in preview.resources()
        if r["type"].startswith("kubernetes:")
        and "metadata" in r["inputs"]
        and r["type"] not in ("kubernetes:core/v1:Namespace", PV)
    ]
    expected = {NAMESPACE, UNKNOWN} if mode == "cloud" else {NAMESPACE}
    assert placed and {r["inputs"]["metadata"]["namespace"] for r in placed} <= expected, placed
    pods = [r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:batch/v1:Job")]
    pods += [
        r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:apps/v1:Deployment")
    ]
    assert pods and all(
        min(p["securityContext"][k] for k in ("runAsUser", "runAsGroup", "fsGroup")) > 10000 for p in pods
    ), [p["securityContext"] for p in pods]


def assert_volume(preview: PreviewResult) -> str:
    """The PV and its claim share one name with the hash of their fixed fields (infra/components/
    storage.py volume_name), the claim is pre-bound to the PV, and every pod mounts it; the name.
    A NAS PV (the CSI driver's) carries the ``mode`` the driver applies to the mount point after
    each mount, 1777 not recursively (NAS_MODE_ATTRIBUTES), as the real provider checked it."""
    (pv,) = [r for r in preview.resources(PV) if r["type"] == PV]
    (pvc,) = preview.resources(PVC)
    name = pv["inputs"]["metadata"]["name"]
    csi = pv["inputs"]["spec"].get("csi")
    if csi is not None:
        assert csi["driver"] == "nasplugin.csi.alibabacloud.com", csi
        attributes = csi["volumeAttributes"]
        assert (attributes["mode"], attributes["modeType"]) == ("1777", "non-recursive"), attributes
    assert re.fullmatch(rf"{PREFIX}-data-[0-9a-f]{{8}}", name), name
    assert pvc["inputs"]["metadata"]["name"] == pvc["inputs"]["spec"]["volumeName"] == name
    templates = [
        r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:batch/v1:Job")
    ]
    templates += [
        r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:apps/v1:Deployment")
    ]
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for t in templates
        for v in t["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {name}
    return name
