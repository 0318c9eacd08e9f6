"""A live cloud stack through the real CLI and pulumi-resource-alicloud: what a changed
``namePrefix``, a stack from before the cloud layer's fixed name, and a stack deployed with the
earlier defaults (Flannel, a Performance NAS in a zone NAS picked, no tags, a fixed GN5 pool) do
to the VPC, the ACK cluster and the NAS.

There is no Alibaba Cloud account here, so the live stack is written into the state: the dev
stack's planned cloud resources (its network, cluster, node pools and NAS components and their
alicloud children) as if `pulumi up` had made them (outputs = inputs plus an id), where
the inputs that were unknown on a fresh stack (a VPC's id in its vSwitch) hold the ids of the
resources in the state. The provider then diffs the new inputs against them, with
its own ForceNew rules, which is what decides update or replace.

Offline, such a preview ends at the program's first call that needs the live cluster
(``cs.getClusterCredential`` of the cluster id now known), after the network, NAS and cluster
steps: the tests assert on the steps the engine planned and on that being the only error.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from .dev_stack import configure
from .engine import PreviewResult, PulumiProject, Toolchain, alicloud_offline_config

pytestmark = pytest.mark.engine

#: The cloud layer's name (infra.target.cloud_name) and the one a stack made before it got its
#: fixed name had: ``<namePrefix>-<stack>`` with the default prefix.
CLOUD_NAME, OLD_NAME = "tf-mnist-dev", "mnist-dev"
COMPONENTS = {f"tf-mnist:index:{name}" for name in ("Network", "Cluster", "NodePools", "NasStorage")}
PROVIDER = "urn:pulumi:dev::tf-mnist::pulumi:providers:alicloud::default_3_95_0"
PROVIDER_ID = "00000000-0000-4000-8000-000000000001"
#: What replacing would lose: the network the cluster's nodes live in, the cluster, the data.
KEPT = (
    "alicloud:vpc/network:Network",
    "alicloud:vpc/switch:Switch",
    "alicloud:cs/managedKubernetes:ManagedKubernetes",
    "alicloud:nas/fileSystem:FileSystem",
    "alicloud:nas/mountTarget:MountTarget",
)
#: The error an offline preview of a live cloud stack ends with (no endpoint to ask).
CREDENTIAL_CALL = "alicloud:cs/getClusterCredential:getClusterCredential"


#: How Alibaba Cloud ids of these types start (the provider validates some, e.g. a vSwitch id).
ID_PREFIX = {
    "alicloud:vpc/network:Network": "vpc-",
    "alicloud:vpc/switch:Switch": "vsw-",
    "alicloud:cs/managedKubernetes:ManagedKubernetes": "c",
    "alicloud:cs/nodePool:NodePool": "np",
}


def _fake_id(type_: str, urn: str) -> str:
    return ID_PREFIX.get(type_, "") + hashlib.sha256(urn.encode()).hexdigest()[:20]


def _cloud(type_: str) -> bool:
    return type_.startswith("alicloud:") or type_ in COMPONENTS


def _renamed(value: Any, rename: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return rename(value)
    if isinstance(value, dict):
        return {k: _renamed(v, rename) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, rename) for v in value]
    return value


#: How the engine shows an unknown value in a preview's JSON (pulumi's UnknownStringValue).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def _known(inputs: dict, depends: dict[str, list[str]], ids: dict[str, str]) -> dict:
    """``inputs`` with each unknown value that comes from one resource's id filled in with that
    id (a vSwitch's vpcId, a pool's clusterId, a mount target's fileSystemId)."""

    def fill(key: str, value: Any) -> Any:
        if isinstance(value, list):
            return [fill(key, v) for v in value]
        if value == UNKNOWN and len(depends.get(key, [])) == 1 and depends[key][0] in ids:
            return ids[depends[key][0]]
        return value

    return {key: fill(key, value) for key, value in inputs.items()}


def _state_entries(planned: PreviewResult, rename: Callable[[str], str]) -> list[dict]:
    """The stack resource, the default alicloud provider and every planned cloud resource as
    state entries, each with an id; URNs, names and input strings passed through ``rename``.

    Raises:
        AssertionError: an input stayed unknown (it comes from something other than an id).
    """
    config = {key.split(":", 1)[1]: value for key, value in alicloud_offline_config().items()}
    entries = [
        {
            "urn": PROVIDER,
            "custom": True,
            "id": PROVIDER_ID,
            "type": "pulumi:providers:alicloud",
            "inputs": {**config, "version": "3.95.0"},
            "outputs": {**config, "version": "3.95.0"},
        }
    ]
    states = [s["newState"] for s in planned.steps if s.get("newState")]
    states = [s for s in states if s["type"] == "pulumi:pulumi:Stack" or _cloud(s["type"])]
    ids = {s["urn"]: _fake_id(s["type"], rename(s["urn"])) for s in states if s.get("custom")}
    for state in states:
        inputs = _known(state.get("inputs", {}), state.get("propertyDependencies", {}), ids)
        assert UNKNOWN not in json.dumps(inputs), (state["urn"], inputs)
        entry = {
            "urn": rename(state["urn"]),
            "custom": bool(state.get("custom")),
            "type": state["type"],
            "inputs": _renamed(inputs, rename),
        }
        if state.get("parent"):
            entry["parent"] = rename(state["parent"])
        if state.get("dependencies"):
            entry["dependencies"] = [rename(d) for d in state["dependencies"]]
        if entry["custom"]:
            entry["id"] = ids[state["urn"]]
            entry["provider"] = f"{PROVIDER}::{PROVIDER_ID}"
            entry["outputs"] = {**entry["inputs"], "id": entry["id"]}
        entries.append(entry)
    return entries


#: The live state's resources besides its provider: the stack, 4 components, 11 alicloud
#: resources (ALICLOUD_COUNTS in dev_stack.py).
LIVE_RESOURCES = 16


def _make_live(
    project: PulumiProject,
    rename: Callable[[str], str] = lambda s: s,
    edit: Callable[[list[dict]], None] | None = None,
) -> int:
    """Write the dev stack's cloud layer into the project's state as if it had been deployed
    (names through ``rename``: how an older program named them; ``edit`` changes the entries
    further). Returns the number of resources besides the provider."""
    fresh = project.preview()
    assert fresh.returncode == 0, fresh.messages()
    exported = json.loads(project.pulumi("stack", "export").stdout)
    entries = _state_entries(fresh, rename)
    if edit is not None:
        edit(entries)
    exported["deployment"]["resources"] = entries
    path = project.dir / "live-state.json"
    path.write_text(json.dumps(exported))
    project.pulumi("stack", "import", "--file", str(path), "--force")
    return len(entries) - 1


def _cloud_steps(preview: PreviewResult) -> dict[tuple[str, str], str]:
    """(type, name) -> op of every planned cloud step (each changed one with the properties it
    changes, for the failure message); asserts the only error is the offline credential call."""
    errors = [d["message"] for d in preview.plan.get("diagnostics", []) if d.get("severity") == "error"]
    assert errors and all(CREDENTIAL_CALL in e for e in errors), preview.messages()[-4000:]
    steps = {}
    for step in preview.steps:
        type_ = step["urn"].split("::")[2].rsplit("$", 1)[-1]
        if _cloud(type_):
            diff = sorted(step.get("detailedDiff") or {})
            steps[(type_, step["urn"].rsplit("::", 1)[1])] = step["op"] + (f" {diff}" if diff else "")
    return steps


def test_a_new_name_prefix_on_a_live_cloud_stack_changes_no_cloud_resource(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """namePrefix renames the Kubernetes objects only: the cloud layer is named after the stack,
    so no input of a live stack's VPC, cluster, pools or NAS changes and nothing is replaced.

    (The provider plans an "update" without any changed input for the cluster: its prior state
    here lacks attributes ACK would have filled in; a real state holds them.)"""
    configure(dev_project, toolchain, "cloud")
    assert _make_live(dev_project) == LIVE_RESOURCES
    dev_project.set_config("namePrefix", "vision")
    preview = dev_project.preview()
    steps = _cloud_steps(preview)
    changed = {k: op for k, op in steps.items() if op not in ("same", "update")}
    assert changed == {}, changed
    # The JSON lists changed steps only: every resource of the live state (the cloud layer and
    # the stack; the Kubernetes layer is not in it) is counted as same or as that one update.
    summary = preview.plan["changeSummary"]
    assert summary.get("same", 0) + len(steps) == LIVE_RESOURCES, summary


def test_a_stack_named_after_its_prefix_keeps_its_network_cluster_and_nas(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """A stack deployed when the cloud layer was named ``<namePrefix>-<stack>``: the aliases
    carry every cloud resource over to its new Pulumi name (nothing created from scratch, nothing
    deleted), and the provider updates the renamed VPC, vSwitch, NAS and cluster in place.

    The provider's own rule shows where a rename costs more: a NAS access group's name is
    ForceNew, so the access group and its rule are replaced (create-before-delete; the file
    system and its data stay)."""
    configure(dev_project, toolchain, "cloud")
    assert _make_live(dev_project, lambda s: s.replace(CLOUD_NAME, OLD_NAME)) == LIVE_RESOURCES
    steps = _cloud_steps(dev_project.preview())
    ops = {k: op.split()[0] for k, op in steps.items()}
    assert set(ops.values()) <= {"same", "update", "replace"}, steps
    for type_ in KEPT:
        assert "replace" not in [op for (t, _), op in ops.items() if t == type_], (type_, steps)
    assert steps[("alicloud:vpc/network:Network", f"{CLOUD_NAME}-vpc")] == "update ['vpcName']"
    assert ops[("alicloud:nas/accessGroup:AccessGroup", f"{CLOUD_NAME}-access")] == "replace"


#: The settings that were the defaults before a new cluster got Terway, the NAS Capacity in the
#: nodes' zone, and the GPU pool fallbacks, a pinned driver and autoscaling from zero; flat values
#: as `pulumi config set` stores them.
EARLIER_DEFAULTS = {
    "cluster.networkPlugin": "flannel",
    "nas.storageType": "Performance",
    "gpuPool.instanceTypes": '["ecs.gn5-c4g1.xlarge"]',
    "gpuPool.driverVersion": "",
    "gpuPool.autoscaling": "false",
}
FS = "alicloud:nas/fileSystem:FileSystem"


def _as_deployed_earlier(entries: list[dict]) -> None:
    """What the earlier program left in the state besides its defaults: no tags, and a NAS file
    system in the zone NAS chose (zone_id is Computed: the provider records it)."""
    for entry in entries:
        for part in ("inputs", "outputs"):
            entry.get(part, {}).pop("tags", None)
        if entry["type"] == FS:
            entry["inputs"].pop("zoneId")
            entry["outputs"]["zoneId"] = "cn-hangzhou-g"


def test_a_stack_deployed_with_the_earlier_defaults_keeps_its_cluster_and_nas(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """A stack deployed when Flannel, a Performance NAS without a zone and a fixed GN5 pool were
    the defaults, none of them set: a plain preview of this program keeps the Flannel cluster
    and the file system (their plugin and type come from the state; the file system's zone is
    ignored after creation), creates no pod vSwitch, and changes the rest in place: tags on
    everything, the GPU pool's fallback types, driver label and scaling from zero, and the
    cluster's autoscaler, the one resource it creates."""
    configure(dev_project, toolchain, "cloud")
    for key, value in EARLIER_DEFAULTS.items():
        dev_project.set_config(key, value)
    earlier = _make_live(dev_project, edit=_as_deployed_earlier)
    assert earlier == LIVE_RESOURCES - 2, "no pod vSwitch, no autoscaler"
    for key in EARLIER_DEFAULTS:
        dev_project.pulumi("config", "rm", key)
    preview = dev_project.preview()
    steps = _cloud_steps(preview)
    ops = {k: op.split()[0] for k, op in steps.items()}
    assert {k: op for k, op in ops.items() if op not in ("same", "update")} == {
        ("alicloud:cs/autoscalingConfig:AutoscalingConfig", f"{CLOUD_NAME}-autoscaler"): "create"
    }, steps
    for kept in (
        ("alicloud:cs/managedKubernetes:ManagedKubernetes", f"{CLOUD_NAME}-ack"),
        (FS, f"{CLOUD_NAME}-fs"),
    ):
        op, changed = steps[kept].split(" ", 1)
        assert op == "update" and all(k.startswith("tags") for k in ast.literal_eval(changed)), (
            kept,
            steps[kept],
        )
    gpu = steps[("alicloud:cs/nodePool:NodePool", f"{CLOUD_NAME}-gpu")]
    for changed in ("desiredSize", "instanceTypes", "labels", "scalingConfig", "tags"):
        assert changed in gpu, gpu
    assert "The cluster tf-mnist-dev uses Flannel" in preview.messages()
