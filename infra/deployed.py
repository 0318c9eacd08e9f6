"""The network plugin of the stack's ACK cluster and the storage type of its NAS file system:
the choices, the default of a new resource, and what this stack's state says of the ones it
already created.

Both are fixed once the resource exists (the provider replaces the cluster for another
pod_cidr, the file system for another storage_type), so while their keys are unset, a stack
that already has the resource keeps what it has, and only a new resource gets the current
default (NEW_CLUSTER_NETWORK_PLUGIN, NEW_NAS_STORAGE_TYPE). A default that changes
between versions of this program therefore never replaces a deployed cluster or file system.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.stack_state import read_stack_resources

#: ACK network plugins (cluster.networkPlugin): only Terway enforces Kubernetes NetworkPolicy.
NETWORK_PLUGINS = ("flannel", "terway")
#: The plugin of a cluster the stack creates while cluster.networkPlugin is unset: Terway, which
#: enforces the stack's NetworkPolicies. A cluster the stack already created keeps the plugin its
#: state records instead (``Deployed``): ACK cannot change the plugin of a cluster,
#: and pod_cidr is ForceNew (terraform-provider-alicloud cs_managed_kubernetes), so a new default
#: must not reach a stack deployed with the old one.
NEW_CLUSTER_NETWORK_PLUGIN = "terway"
#: Standard (general-purpose) NAS storage types.
NAS_STORAGE_TYPES = ("Performance", "Capacity", "Premium")
#: The storage type of a NAS file system the stack creates while nas.storageType is unset.
#: Capacity: general-purpose NAS bills the used GiB by the hour and Capacity has the lowest
#: price per GiB (Alibaba's billing example; Performance and Premium cost more per GiB for lower
#: latency), while this job moves megabytes (the data set staged once, checkpoints and event
#: files), far below what any of them serves. Extreme NAS is no candidate: it bills a provisioned capacity whether used or not and
#: mounts over NFSv3 only. A file system the stack already created keeps its type (its state
#: says which; storage_type is ForceNew, and a new file system would start empty).
NEW_NAS_STORAGE_TYPE = "Capacity"

CLUSTER_TYPE = "alicloud:cs/managedKubernetes:ManagedKubernetes"
FILE_SYSTEM_TYPE = "alicloud:nas/fileSystem:FileSystem"


@dataclass(frozen=True)
class Deployed:
    """The fixed choices of the cloud resources in this stack's state.

    Attributes:
        network_plugin: ``flannel`` or ``terway`` for the ACK cluster the stack created; None
            when the state holds none.
        nas_storage_type: the storage type of the NAS file system the stack created; None when
            the state holds none.
    """

    network_plugin: str | None = None
    nas_storage_type: str | None = None


def network_plugin_of(outputs: Mapping[str, Any]) -> str:
    """The plugin of a ManagedKubernetes in the state, from its outputs: ``terway`` when it has
    pod vSwitches or a Terway addon (the provider keeps both as they were given; ACK creates a
    Terway cluster from PodVswitchIds), else ``flannel`` (pod_cidr, and ACK's own default)."""
    addons = [a.get("name", "") for a in outputs.get("addons") or [] if isinstance(a, Mapping)]
    if outputs.get("podVswitchIds") or any(str(name).startswith("terway") for name in addons):
        return "terway"
    return "flannel"


def deployed_from(resources: Mapping[str, Any]) -> Deployed:
    """``Deployed`` from this stack's resources (infra.stack_state.read_stack_resources: urn ->
    {"type", "outputs"})."""
    plugin: str | None = None
    storage_type: str | None = None
    for entry in resources.values():
        if not isinstance(entry, Mapping):
            continue
        outputs = entry.get("outputs") or {}
        if entry.get("type") == CLUSTER_TYPE and plugin is None:
            plugin = network_plugin_of(outputs)
        elif entry.get("type") == FILE_SYSTEM_TYPE and storage_type is None and outputs.get("storageType"):
            storage_type = str(outputs["storageType"])
    return Deployed(network_plugin=plugin, nas_storage_type=storage_type)


def read_deployed() -> Deployed:
    """``deployed_from`` this stack's state, through the engine (infra/stack_state.py).

    Raises:
        StateUnreadable: the engine or backend has no such function, or it failed.
    """
    return deployed_from(read_stack_resources())
