"""`pulumi preview --json` of the dev stack with the real CLI, language host and providers.

Each test previews a fresh copy of the project (see conftest.dev_project), so `pulumi config
set` edits only the copy. Two ways of running the stack are previewed:

* ``cloud``: the dev stack as committed, which creates the whole cloud layer (VPC, ACK cluster,
  node pools, NAS) and the Kubernetes layer on it. Needs pulumi-resource-alicloud, configured
  with fake static keys and the settings that keep its configure step off the network.
* ``cluster``: the same stack given an existing cluster (``kubeconfig``, pointing at a closed
  local port, and ``nas.mountTargetDomain``): the program skips the cloud layer and the
  kubernetes provider previews every Kubernetes object from its inputs.

Every preview here runs the platform's policy pack (policy/, docs/policy.md) with
``--policy-pack``: the stacks previewed break none of its rules, so a mandatory violation fails
the test's exit-status assertion (test_policy_pack.py shows each rule's violations).

The last tests preview a pull Secret made from ``--secret`` registry credentials,
and a second ``pulumi config set kubeconfig`` after a targeted ``pulumi up`` of the kubernetes
provider alone (which needs no cluster), to see the engine's update-or-replace decision.

What a preview must plan, and how a test configures each way, is in dev_stack.py.
"""

from __future__ import annotations

import json

import pytest

from infra import bundle

from .cloud_layer import inputs_of
from .conftest import REPO
from .dev_stack import (
    COMMITTED_WORKERS,
    PREFIX,
    PS,
    PV,
    PVC,
    assert_topology,
    assert_volume,
    configure,
    names_of,
    stack_config,
)
from .engine import UNREACHABLE_KUBECONFIG, PreviewResult, PulumiProject, Toolchain

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _policy_pack(dev_project: PulumiProject) -> None:
    dev_project.policy_packs = [REPO / "policy"]


MODES = ["cloud", "cluster"]
#: The region's base image by a made-up digest, for the targeted `pulumi up`s below: an up runs
#: the whole program, which resolves a tag at its registry (infra/image_pins.py), and no
#: registry is reachable here.
OFFLINE_BASE_IMAGE = f"{bundle.ALINUX_PYTHON_IMAGE}@sha256:{'0' * 64}"


@pytest.mark.parametrize("mode", MODES)
def test_dev_stack_as_committed(dev_project: PulumiProject, toolchain: Toolchain, mode: str) -> None:
    configure(dev_project, toolchain, mode)
    preview = dev_project.preview()
    assert_topology(preview, COMMITTED_WORKERS, mode)
    # The committed stack's volume is NAS through the CSI driver, so assert_volume checked its mode.
    (pv,) = [r for r in preview.resources(PV) if r["type"] == PV]
    assert "csi" in pv["inputs"]["spec"], pv["inputs"]["spec"]


@pytest.mark.parametrize("mode", MODES)
def test_config_set_worker_number_4(dev_project: PulumiProject, toolchain: Toolchain, mode: str) -> None:
    """`pulumi config set worker.number 4` stores the flat key tf-mnist:worker.number = "4"."""
    configure(dev_project, toolchain, mode)
    dev_project.set_config("worker.number", "4")
    config = stack_config(dev_project)
    assert config["tf-mnist:worker.number"] == "4"
    assert config["tf-mnist:worker"]["number"] == COMMITTED_WORKERS  # the committed structured value stays
    assert_topology(dev_project.preview(), 4, mode)


@pytest.mark.parametrize("mode", MODES)
def test_config_set_path_worker_number_4(dev_project: PulumiProject, toolchain: Toolchain, mode: str) -> None:
    """`pulumi config set --path worker.number 4` stores tf-mnist:worker = {number: 4, ...}."""
    configure(dev_project, toolchain, mode)
    dev_project.set_config("worker.number", "4", path=True)
    config = stack_config(dev_project)
    assert "tf-mnist:worker.number" not in config
    assert config["tf-mnist:worker"]["number"] == 4
    assert_topology(dev_project.preview(), 4, mode)


def test_cloud_mode_autoscaler_existing_file_system_and_a_new_name_prefix(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """gpuPool.autoscaling (the default): the pool scales 0..2 and the cluster's autoscaler (which
    ACK needs to scale a pool from zero) is configured after it; nas.fileSystemId: a mount target
    on that file system and no new one; namePrefix vision: the Kubernetes objects are renamed, no
    cloud resource is (their Pulumi names are tf-mnist-<stack>-...)."""
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("nas.fileSystemId", "0a1b2c3d4e")
    dev_project.set_config("namePrefix", "vision")
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    (autoscaler,) = inputs_of(preview, "alicloud:cs/autoscalingConfig:AutoscalingConfig")
    assert autoscaler["scaleUpFromZero"] is True and autoscaler["scalerType"] == "cluster-autoscaler"
    (gpu,) = [
        p for p in inputs_of(preview, "alicloud:cs/nodePool:NodePool") if p["nodePoolName"].endswith("-gpu")
    ]
    assert {k: gpu["scalingConfig"][k] for k in ("enable", "minSize", "maxSize")} == {
        "enable": True,
        "minSize": 0,
        "maxSize": COMMITTED_WORKERS,
    }
    assert inputs_of(preview, "alicloud:nas/fileSystem:FileSystem") == []
    (mount,) = inputs_of(preview, "alicloud:nas/mountTarget:MountTarget")
    assert mount["fileSystemId"] == "0a1b2c3d4e"
    cloud = [
        s["urn"].rsplit("::", 1)[1]
        for s in preview.steps
        if s["urn"].split("::")[2].rsplit("$", 1)[-1].startswith("alicloud:")
    ]
    assert cloud and all(name.startswith("tf-mnist-dev-") for name in cloud), cloud
    assert "vision-chief-0" in names_of(preview, "kubernetes:batch/v1:Job")


@pytest.mark.parametrize(
    "key,value,message",
    [
        (
            "cluster.version",
            "1.33",
            "Configuration 'tf-mnist:cluster.version' value '1.33' is invalid: must be an "
            "ACK version <major>.<minor>.<patch>-aliyun.<n>",
        ),
        (
            "cluster.podCidr",
            "192.168.128.0/17",
            "Configuration 'tf-mnist:cluster.podCidr' value '192.168.128.0/17' is "
            "invalid: must not overlap vpc.cidr (192.168.0.0/16)",
        ),
        (
            "zone",
            "cn-beijing-a",
            "Configuration 'tf-mnist:zone' value 'cn-beijing-a' is invalid: must be a zone of "
            "region cn-hangzhou (alicloud:region)",
        ),
    ],
    ids=["version", "podCidr", "zone"],
)
def test_cloud_values_ack_would_refuse_fail_at_preview_with_the_programs_message(
    dev_project: PulumiProject, key: str, value: str, message: str
) -> None:
    """ACK refuses these only when it creates the cluster (the provider does not check them at
    preview), after the VPC and NAS exist: the program refuses them before anything is planned.
    (Flannel, which cluster.podCidr is for.)"""
    dev_project.set_config("cluster.networkPlugin", "flannel")
    dev_project.set_config(key, value)
    preview = dev_project.preview()
    output = preview.refused_output()
    assert message in output, output


def test_bad_worker_number_fails_with_the_programs_message(dev_project: PulumiProject) -> None:
    """worker.number four: the program's own ConfigError, no traceback, nothing planned.

    The program validates its whole configuration before it registers any resource, so this
    needs no provider plugin.
    """
    dev_project.set_config("worker.number", "four")
    preview = dev_project.preview()
    output = preview.refused_output()
    assert "invalid configuration value" in output, output
    assert "worker.number" in output and "four" in output, output


def test_a_key_set_flat_and_then_with_path_fails_with_the_programs_message(
    dev_project: PulumiProject,
) -> None:
    """`config set worker.number 4` then `config set --path worker.number 6`: the CLI keeps both.

    The program must not silently preview 4 workers (the flat value) after the user's latest
    command asked for 6; it names both values and both ways out.
    """
    dev_project.set_config("worker.number", "4")
    dev_project.set_config("worker.number", "6", path=True)
    config = stack_config(dev_project)
    assert (config["tf-mnist:worker.number"], config["tf-mnist:worker"]["number"]) == ("4", 6)
    preview = dev_project.preview()
    output = preview.refused_output()
    assert (
        "Configuration 'tf-mnist:worker.number' is set twice, to '4' (flat) and to '6' (--path)" in output
    ), output
    assert "pulumi config rm worker.number (keeps '6')" in output, output


def test_secret_config_never_appears_in_plain_text_in_the_plan(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """kubeconfig (content) and nas.mountTargetDomain set with --secret stay secret in `preview --json`.

    Before the program carried nas.mountTargetDomain as a secret, its plaintext showed in the
    PV's csi.volumeAttributes.server of the JSON plan.
    """
    configure(dev_project, toolchain, "cluster")
    domain = "s3cr3t0a1b-abc12.cn-hangzhou.nas.aliyuncs.com"
    dev_project.set_config("tf-mnist:nas.mountTargetDomain", domain, secret=True)
    preview = dev_project.preview()
    assert_topology(preview, COMMITTED_WORKERS, "cluster")
    for plaintext in (domain, "not-a-credential"):  # the kubeconfig's token
        assert plaintext not in preview.stdout and plaintext not in preview.stderr


def test_a_secret_the_stack_cannot_keep_secret_is_refused(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """`pulumi config set --secret --path worker.memory 9Gi`: the value would go into pod specs in plain text."""
    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("worker.memory", "9Gi", path=True, secret=True)
    preview = dev_project.preview()
    output = preview.refused_output()
    assert "Configuration 'tf-mnist:worker' holds a secret" in output, output
    assert "fix: pulumi config set --path worker.<key> <value> (again, without --secret)" in output, output


def test_a_misspelt_key_fails_with_the_programs_message(dev_project: PulumiProject) -> None:
    """`pulumi config set worker.numbr 4` used to preview the default 2 workers without a word."""
    dev_project.set_config("worker.numbr", "4")
    preview = dev_project.preview()
    output = preview.refused_output()
    assert (
        "Configuration 'tf-mnist:worker.numbr' value '4' is not a setting of this stack "
        "(did you mean worker.number?)"
    ) in output, output
    assert "fix: pulumi config rm worker.numbr" in output, output


# --- registries and kubeconfig updates with the real engine -----------------------------------------------------------

#: Registry credentials of the pull-Secret tests (fake; what must never show in clear).
REGISTRY_USERNAME = "ml-team@1234567890123456"
REGISTRY_PASSWORD = "s3cr3t-Registry-Pa55"


def test_registry_credentials_stay_secret_and_make_a_dockerconfigjson_secret(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """`pulumi config set --secret registryCredentials.password ...`: the plan holds the Secret
    (type kubernetes.io/dockerconfigjson) that every pod pulls with, and no plain credential."""
    import base64

    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("registryCredentials.username", REGISTRY_USERNAME)
    dev_project.set_config("registryCredentials.password", REGISTRY_PASSWORD, secret=True)
    stack_file = (dev_project.dir / "Pulumi.dev.yaml").read_text()
    assert REGISTRY_PASSWORD not in stack_file  # the CLI stored it encrypted
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    (secret,) = preview.resources("kubernetes:core/v1:Secret")
    assert secret["inputs"]["type"] == "kubernetes.io/dockerconfigjson"
    assert secret["inputs"]["metadata"]["name"] == f"{PREFIX}-registry"
    pods = [r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:batch/v1:Job")]
    pods += [
        r["inputs"]["spec"]["template"]["spec"] for r in preview.resources("kubernetes:apps/v1:Deployment")
    ]
    assert (
        len(pods) == 1 + COMMITTED_WORKERS + PS + 4
    )  # + staging, the run monitor, the setup Job, TensorBoard
    assert all(pod["imagePullSecrets"] == [{"name": f"{PREFIX}-registry"}] for pod in pods)
    auth = base64.b64encode(f"{REGISTRY_USERNAME}:{REGISTRY_PASSWORD}".encode()).decode()
    assert secret["inputs"]["data"] == "[secret]"  # the whole .dockerconfigjson, base64 and all
    for plaintext in (REGISTRY_PASSWORD, auth, base64.b64encode(REGISTRY_PASSWORD.encode()).decode()):
        assert plaintext not in preview.stdout and plaintext not in preview.stderr


def _provider_op(preview: PreviewResult) -> str:
    (step,) = [
        s for s in preview.steps if s.get("urn", "").endswith("pulumi:providers:kubernetes::mnist-k8s")
    ]
    return step["op"]


@pytest.mark.parametrize(
    "server,ops",
    [
        ("https://127.0.0.1:1", {"update", "same"}),  # the same cluster: never a replacement
        ("https://127.0.0.2:1", {"replace", "create-replacement"}),  # another cluster: everything moves
    ],
    ids=["same-server", "other-server"],
)
def test_a_kubeconfig_edit_that_keeps_the_cluster_replaces_nothing(
    dev_project: PulumiProject, toolchain: Toolchain, server: str, ops: set
) -> None:
    """The provider is created (a targeted `pulumi up`, which needs no cluster), then the
    kubeconfig is set a second time with a new token and CA setting: with the same API server
    the provider is updated, not replaced (its cluster_identifier is the server URL; without
    one, pulumi-kubernetes replaces the provider, and every object with it, whenever the active
    cluster entry changes). A kubeconfig for another server does replace it."""
    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("tf-mnist:baseImage", OFFLINE_BASE_IMAGE)
    provider = "urn:pulumi:dev::tf-mnist::pulumi:providers:kubernetes::mnist-k8s"
    dev_project.pulumi("up", "--yes", "--target", provider)
    edited = UNREACHABLE_KUBECONFIG.replace(
        'cluster: {server: "https://127.0.0.1:1"}',
        f'cluster: {{server: "{server}", insecure-skip-tls-verify: true}}',
    ).replace("not-a-credential", "a-new-token")
    assert "a-new-token" in edited and "insecure-skip-tls-verify" in edited
    dev_project.set_config("tf-mnist:kubeconfig", edited, secret=True)
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    assert _provider_op(preview) in ops


def test_nfs_volume_job_policy_and_gpu_chief_with_the_real_provider(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """An NFS volume, a deadline, placement set with --path and ps.number 0 (the chief
    then trains on a GPU), through the real CLI and kubernetes provider."""
    configure(dev_project, toolchain, "cluster")
    dev_project.pulumi("config", "rm", "tf-mnist:nas.mountTargetDomain")  # a NAS key: refused with nfs
    dev_project.set_config("persistence.volume.type", "nfs")
    dev_project.set_config("nfs.server", "10.0.0.5")
    dev_project.set_config("nfs.path", "/exports/tf-mnist")
    dev_project.set_config("job.activeDeadlineSeconds", "86400")
    dev_project.set_config("worker.nodeSelector.disktype", "ssd", path=True)
    dev_project.set_config("ps.number", "0", path=True)
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    (pv,) = [
        r
        for r in preview.resources("kubernetes:core/v1:PersistentVolume")
        if r["type"] == "kubernetes:core/v1:PersistentVolume"
    ]  # not the claim
    assert pv["inputs"]["spec"]["nfs"] == {"server": "10.0.0.5", "path": "/exports/tf-mnist"}
    jobs = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["spec"]
        for r in preview.resources("kubernetes:batch/v1:Job")
    }
    assert sorted(jobs) == [
        f"{PREFIX}-{name}" for name in ("chief-0", "monitor", "setup", "stage-data", "worker-0", "worker-1")
    ]
    chief = jobs[f"{PREFIX}-chief-0"]
    assert chief["activeDeadlineSeconds"] == 86400
    assert [r["action"] for r in chief["podFailurePolicy"]["rules"]] == ["FailJob", "Ignore", "Ignore"]
    pod = chief["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["nodeSelector"] == {"disktype": "ssd"}
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


# --- a volume change on a live stack --------------------------------------------------------


def _adopt_planned_objects(project: PulumiProject, preview: PreviewResult) -> None:
    """Write every object ``preview`` plans into the stack's state as if `pulumi up` had made it
    (outputs = inputs, id = [namespace/]name, no live status), so a second preview diffs against a live stack
    without any cluster. The provider must already be in the state (a targeted `pulumi up`)."""
    exported = json.loads(project.pulumi("stack", "export").stdout)
    resources = exported["deployment"]["resources"]
    known = {r["urn"] for r in resources}
    for state in (s.get("newState") for s in preview.steps):
        if not state or state["urn"] in known or state["type"].startswith("pulumi:providers:"):
            continue
        entry = {
            k: state[k]
            for k in ("urn", "custom", "type", "parent", "dependencies", "provider", "propertyDependencies")
            if state.get(k) not in (None, "", [], {})
        }
        entry["inputs"] = state.get("inputs", {})
        # pulumi-kubernetes keeps the inputs it applied under __inputs in its outputs and diffs
        # new inputs against those (its checkpoint format).
        entry["outputs"] = {**entry["inputs"], "__inputs": entry["inputs"]} if state.get("custom") else {}
        if state.get("custom"):
            meta = entry["inputs"].get("metadata", {})
            entry["id"] = "/".join(p for p in (meta.get("namespace"), meta["name"]) if p)
        resources.append(entry)
    path = project.dir / "adopted-state.json"
    path.write_text(json.dumps(exported))
    project.pulumi("stack", "import", "--file", str(path))


@pytest.mark.parametrize(
    "key,value",
    [("persistence.pvc.storage", "10Gi"), ("persistence.pvc.matchLabels.team", "vision")],
    ids=["storage", "matchLabels"],
)
def test_a_volume_change_on_a_live_stack_makes_a_new_pair_first_and_deletes_the_old_last(
    dev_project: PulumiProject, toolchain: Toolchain, key: str, value: str
) -> None:
    """persistence.pvc.storage 5Gi -> 10Gi, or one more matchLabels label, on a stack whose
    objects exist: the engine plans a new PV and claim under a new name (create-before-delete),
    replaces the Jobs and updates TensorBoard onto the new claim, and deletes the old claim and
    then the old PV at the end (the API server would refuse the resize of a static claim, and a
    claim re-made under its old name would stay Pending on the Released old PV)."""
    configure(dev_project, toolchain, "cluster")
    dev_project.set_config("tf-mnist:baseImage", OFFLINE_BASE_IMAGE)
    dev_project.pulumi(
        "up", "--yes", "--target", "urn:pulumi:dev::tf-mnist::pulumi:providers:kubernetes::mnist-k8s"
    )
    first = dev_project.preview()
    old_name = assert_volume(first)
    _adopt_planned_objects(dev_project, first)
    dev_project.set_config(key, value, path=True)
    # --show-replacement-steps: each replacement as its create-replacement and delete-replaced
    # steps, in the order the engine will run them.
    proc = dev_project.pulumi("preview", "--json", "--show-replacement-steps", check=False)
    preview = PreviewResult(proc.returncode, json.loads(proc.stdout or "{}"), proc.stdout, proc.stderr)
    assert preview.returncode == 0, preview.messages()
    new_objects = {"steps": [s for s in preview.steps if s["op"] in ("create-replacement", "update")]}
    new_name = assert_volume(PreviewResult(0, new_objects, "", ""))
    assert new_name != old_name
    steps = [
        (s["op"], s["urn"].rsplit("::", 1)[1], s["urn"].split("::")[2].rsplit("$", 1)[-1])
        for s in preview.steps
    ]
    order = {(op, name, type_): i for i, (op, name, type_) in enumerate(steps)}

    def at(op: str, name: str, type_: str) -> int:
        assert (op, name, type_) in order, f"no {op} of {type_} {name}: {steps}"
        return order[(op, name, type_)]

    new_pv = at("create-replacement", f"{PREFIX}-data", PV)
    new_pvc = at("create-replacement", f"{PREFIX}-data", PVC)
    old_pvc = at("delete-replaced", f"{PREFIX}-data", PVC)
    old_pv = at("delete-replaced", f"{PREFIX}-data", PV)
    assert new_pv < new_pvc
    pods = [
        at("create-replacement", f"{PREFIX}-{task}", "kubernetes:batch/v1:Job")
        for task in ("setup", "stage-data", "chief-0", "worker-0", "worker-1", "ps-0", "ps-1")
    ]
    pods.append(at("update", f"{PREFIX}-tensorboard", "kubernetes:apps/v1:Deployment"))
    assert new_pvc < min(pods) and max(pods) < old_pvc < old_pv, steps
    # The Jobs keep their names, so each old Job (and, with it, its pods) goes before its
    # replacement is made (the setup Job too: it mounts the claim). The run's ConfigMap is
    # replaced with them (new templates, a new run id); nothing else moves (Services, the
    # cluster-spec ConfigMap, the code ConfigMaps, TensorBoard's Service).
    for task in ("setup", "stage-data", "chief-0", "worker-0", "worker-1", "ps-0", "ps-1"):
        job = (f"{PREFIX}-{task}", "kubernetes:batch/v1:Job")
        assert at("delete-replaced", *job) < at("create-replacement", *job)
    assert {type_ for _, _, type_ in steps} == {
        "pulumi:pulumi:Stack",
        PV,
        PVC,
        "kubernetes:batch/v1:Job",
        "kubernetes:apps/v1:Deployment",
        "kubernetes:core/v1:ConfigMap",
    }
    assert {name for _, name, type_ in steps if type_ == "kubernetes:core/v1:ConfigMap"} == {f"{PREFIX}-run"}
