"""Cross-key rules of the cloud layer: keys that mean nothing in the chosen mode, the keys of
the chosen network plugin, the stack's state where an unset key needs it, the GPU pool's
instance types against its disk and driver, an existing NAS, the lifetime of the cluster
credential, and the cloud layer's names."""

from __future__ import annotations

from collections.abc import Iterator

from infra.settings.config import Config, section_keys
from infra.settings.constants import PROJECT
from infra.settings.model import Derived
from infra.settings.problems import MISSING, NOT_APPLICABLE, Problem
from infra.settings.read import Reading
from infra.values.alicloud import CREDENTIAL_MINUTES, driver_branch
from infra.values.gpu_families import GPU_DRIVER_VERSION, SYSTEM_DISK_CATEGORIES, known_families

#: Every key of the cloud layer the stack creates without kubeconfig: with kubeconfig they
#: would shape nothing, so they are refused there. Not zone: the committed Pulumi.dev.yaml sets
#: it, and a kubeconfig stack is that file plus kubeconfig.
CLOUD_KEYS = section_keys("vpc", "vswitch", "cluster", "gpu_pool", "cpu_pool", "node_pools")
GPU_POOL_KEYS = section_keys("gpu_pool")
#: Keys that shape the NAS file system the stack creates (refused when it creates none).
NAS_CREATE_KEYS = ("nas.storageType", "nas.zoneCheck", "nas.retainOnDestroy")
#: What shapes only a cluster the stack creates: every cluster.* key but the one naming an
#: existing cluster and the lifetime of the credential read from either.
CREATED_CLUSTER_KEYS = tuple(
    k for k in section_keys("cluster") if k not in ("cluster.id", "cluster.credentialMinutes")
)
#: ACK add-ons the stack installs, only on a cluster it creates: it owns that cluster's add-ons,
#: and removing the key or destroying the stack uninstalls them, which on a cluster it does not
#: own would remove what others may use (infra/components/observability.py).
OBSERVABILITY_KEYS = section_keys("observability")
#: The keys of a Terway cluster's pod vSwitch (refused with Flannel).
POD_VSWITCH_KEYS = ("cluster.podVswitchId", "cluster.podVswitchCidr")


def _refused(r: Reading, names: tuple[str, ...], rule: str) -> Iterator[Problem]:
    """A NOT_APPLICABLE problem for each of ``names`` that is set."""
    return (Problem(name, rule, NOT_APPLICABLE) for name in names if r.is_set(name))


def mode_keys(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """With kubeconfig the stack creates no cloud layer: its keys would shape nothing. Without
    GPU pods (worker.gpuCount 0) the stack creates no GPU pool: gpuPool.* would shape nothing.
    On a cluster the stack does not create (kubeconfig, cluster.id) it installs no add-on:
    observability.* is refused there (``OBSERVABILITY_KEYS``)."""
    if c.kubeconfig is not None:
        # NAS keys with another volume type: the volume rule refuses them already.
        nas = ("nas.fileSystemId", *NAS_CREATE_KEYS) if c.volume.type == "nas" else ()
        yield from _refused(
            r,
            (*CLOUD_KEYS, *nas, *OBSERVABILITY_KEYS),
            "applies only without kubeconfig (with kubeconfig the stack deploys into that cluster and "
            "creates no VPC, cluster, node pool or NAS)",
        )
        return
    if c.worker.gpu_count == 0:
        rule = "applies only with worker.gpuCount > 0 (without GPU pods the stack creates no GPU pool)"
        yield from _refused(r, GPU_POOL_KEYS, rule)
    if c.cluster.id is not None:
        rule = "applies only when the stack creates the ACK cluster (cluster.id names an existing one)"
        yield from _refused(r, (*CREATED_CLUSTER_KEYS, *OBSERVABILITY_KEYS), rule)
    if c.vswitch.id is not None:
        rule = "applies only when the stack creates the vSwitch (vswitch.id names an existing one, in its own VPC)"
        yield from _refused(r, ("vpc.id", "vpc.cidr"), rule)


def network_plugin(c: Config, d: Derived, r: Reading) -> Iterator[Problem]:
    """A new cluster's pod addresses come from what its plugin uses: cluster.podCidr with
    Flannel, a pod vSwitch with Terway (ACK CreateCluster takes PodVswitchIds instead of a
    container CIDR), and a created pod vSwitch needs the VPC, which vswitch.id hides. The plugin
    is the resolved one: cluster.networkPlugin, or what the stack's state records."""
    if c.kubeconfig is not None or c.cluster.id is not None:
        return  # mode_keys refuses these keys there
    if d.target.network_plugin != "terway":
        rule = (
            "applies only with cluster.networkPlugin terway (a Flannel cluster gives pods addresses of "
            "cluster.podCidr, not of a vSwitch)"
        )
        yield from _refused(r, POD_VSWITCH_KEYS, rule)
        return
    rule = (
        "applies only with cluster.networkPlugin flannel (a Terway cluster gives pods addresses of its pod "
        "vSwitch: cluster.podVswitchId or cluster.podVswitchCidr)"
    )
    yield from _refused(r, ("cluster.podCidr",), rule)
    if c.cluster.pod_vswitch_id is not None:
        rule = (
            "applies only without cluster.podVswitchId (that vSwitch gives the pods their addresses, so the "
            "stack creates none)"
        )
        yield from _refused(r, ("cluster.podVswitchCidr",), rule)
        return
    if c.vswitch.id is not None:
        rule = (
            "applies only when the stack creates the node vSwitch (vswitch.id names an existing one, whose VPC "
            "the stack does not know)"
        )
        yield from _refused(r, ("cluster.podVswitchCidr",), rule)
        rule = (
            "required with cluster.networkPlugin terway and vswitch.id (the stack does not know the VPC of "
            "that vSwitch, so it cannot create the pod vSwitch there: give an existing vSwitch of that VPC "
            "and zone)"
        )
        yield Problem("cluster.podVswitchId", rule, MISSING)


def unread_state(c: Config, d: Derived, _: Reading) -> Iterator[Problem]:
    """An unset cluster.networkPlugin or nas.storageType of a resource the stack creates takes
    the value the stack's state records for it (the resource may exist, and the value cannot
    change without replacing it): when the state cannot be read, the key must be set."""
    if d.target.state_error is None:
        return
    why = (
        f"this stack's state could not be read ({d.target.state_error}), and the default depends on whether the stack "
        "already has {what} (a change replaces it): set the value it has, or {new} for a new one"
    )
    if c.creates_cluster and c.cluster.network_plugin is None:
        yield Problem("cluster.networkPlugin", why.format(what="its ACK cluster", new="terway"), MISSING)
    if c.creates_file_system and c.nas.storage_type is None:
        yield Problem("nas.storageType", why.format(what="its NAS file system", new="Capacity"), MISSING)


def gpu_pool(c: Config, _: Derived, __: Reading) -> Iterator[Problem]:
    """Every GPU instance type of a family the rules know (infra/values/gpu_families.py) takes
    gpuPool.systemDiskCategory, and runs gpuPool.driverVersion (Pascal and Volta end at R580):
    ACK would otherwise fail the pool, or its nodes, only at `pulumi up`."""
    if c.kubeconfig is not None or c.worker.gpu_count == 0:
        return  # no GPU pool (mode_keys refuses the keys)
    families = known_families(c.gpu_pool.instance_types)
    common = [
        disk for disk in SYSTEM_DISK_CATEGORIES if all(disk in f.system_disks for f in families.values())
    ]
    disks = "; ".join(f"{t} takes {', '.join(f.system_disks)}" for t, f in families.items())
    if not common:
        yield Problem(
            "gpuPool.instanceTypes",
            f"must share a system disk category, and these do not ({disks}): list types of families that "
            "do, such as the default's GN5, gn6i and gn6v (all cloud_efficiency)",
        )
    elif c.gpu_pool.system_disk_category not in common:
        rule = f"must be a category every type of gpuPool.instanceTypes takes ({disks})"
        yield Problem("gpuPool.systemDiskCategory", rule, fix=common[0])
    version = c.gpu_pool.driver_version
    if version is not None:
        old = [
            f"{t} ({f.gpu}, R{f.last_driver_branch} at most)"
            for t, f in families.items()
            if f.last_driver_branch is not None and driver_branch(version) > f.last_driver_branch
        ]
        if old:
            rule = f"must be a driver branch that still supports {', '.join(old)}"
            yield Problem("gpuPool.driverVersion", rule, fix=GPU_DRIVER_VERSION)


def zone_in_region(c: Config, region: str | None) -> Iterator[Problem]:
    """A new vSwitch's zone is one of the provider's region (``cn-hangzhou-i`` in
    ``cn-hangzhou``): ACK and VPC refuse another region's zone only at create."""
    zone = c.zone
    if c.kubeconfig is None and c.vswitch.id is None and zone and region:
        if not zone.startswith(f"{region}-"):
            rule = f"must be a zone of region {region} (alicloud:region), such as {region}-a"
            yield Problem("zone", rule, fix=f"{region}-a")


def existing_nas(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """nas.mountTargetDomain or nas.fileSystemId without kubeconfig: one NAS, named once, in
    a VPC the cluster's nodes are in, and no keys of a file system the stack does not create."""
    if c.kubeconfig is not None or c.volume.type != "nas":
        return
    domain, file_system = c.nas.mount_target_domain, c.nas.file_system_id
    if domain is not None and file_system is not None:
        rule = (
            "applies only without nas.mountTargetDomain (that mount target already names the NAS, so the "
            "stack creates no NAS resource)"
        )
        yield Problem("nas.fileSystemId", rule, NOT_APPLICABLE)
    if domain is not None and c.vpc.id is None and c.vswitch.id is None:
        # A mount target answers only inside its own VPC, and without vpc.id or vswitch.id
        # the stack creates a new VPC for the nodes.
        rule = (
            "needs vpc.id or vswitch.id of the VPC that mount target is in (a NAS mount target serves only "
            "its own VPC; without them the stack creates a new one)"
        )
        yield Problem("nas.mountTargetDomain", rule, fix_key="vpc.id")
    if domain is not None or file_system is not None:
        existing = "nas.mountTargetDomain" if domain is not None else "nas.fileSystemId"
        rule = f"applies only when the stack creates the NAS file system ({existing} names an existing one)"
        yield from _refused(r, NAS_CREATE_KEYS, rule)


def credential_lifetime(c: Config, _: Derived, __: Reading) -> Iterator[Problem]:
    """The temporary kubeconfig must outlast a `pulumi up` that waits for the chief."""
    if c.kubeconfig is not None or not c.job.wait_for_chief:
        return
    wait, minutes = c.job.wait_timeout_minutes, c.cluster.credential_minutes
    if minutes <= wait:
        rule = (
            f"must exceed job.waitTimeoutMinutes ({wait}) with job.waitForChief: the kubeconfig would expire "
            "while `pulumi up` waits for the chief"
        )
        yield Problem("cluster.credentialMinutes", rule, fix=str(min(wait + 60, CREDENTIAL_MINUTES[1])))


#: ACK's longest names: a cluster's 63 characters (terraform-provider-alicloud's
#: cs_managed_kubernetes name check) and a node pool's, which is the cloud name plus "-gpu".
ACK_NAME_MAX = 63
NODE_POOL_SUFFIX = "-gpu"


def stack_name(c: Config, stack: str) -> Iterator[Problem]:
    """The cloud layer's names (``tf-mnist-<stack>``, infra.target.cloud_name) fit ACK's."""
    name = f"{PROJECT}-{stack}{NODE_POOL_SUFFIX}"
    if c.kubeconfig is None and len(name) > ACK_NAME_MAX:
        longest = ACK_NAME_MAX - len(f"{PROJECT}-{NODE_POOL_SUFFIX}")
        yield Problem(
            stack,
            f"its GPU node pool would be named {name} ({len(name)} characters; ACK allows {ACK_NAME_MAX}), so "
            f"the stack name may have at most {longest}",
            "is invalid for the cloud layer",
            command=f"pulumi stack rename {stack[:longest]}",
            subject=f"Stack name '{stack}'",
        )


#: The rules of this module, in the order their violations are reported.
CLOUD_RULES = (mode_keys, network_plugin, unread_state, gpu_pool, existing_nas, credential_lifetime)
