"""Cross-key rules of the cloud layer: keys that mean nothing in the chosen mode, the keys of
the chosen network plugin, the stack's state where an unset key needs it, the GPU pool's
instance types against its disk and driver, an existing NAS, and the lifetime of the cluster
credential."""

from __future__ import annotations

from infra.settings.cloud_parsers import driver_branch
from infra.settings.derive import Resolved, creates_cluster, creates_file_system
from infra.settings.gpu_families import known_families
from infra.settings.key_values import PROJECT
from infra.settings.keys import CLOUD_KEY_PREFIXES, KEYS, KEYS_BY_NAME, NAS_CREATE_KEYS
from infra.settings.read import Reading

#: Every key of the cloud layer (CLOUD_KEY_PREFIXES), in table order.
CLOUD_KEYS = tuple(k.name for k in KEYS if k.name.startswith(CLOUD_KEY_PREFIXES))
GPU_POOL_KEYS = tuple(name for name in CLOUD_KEYS if name.startswith("gpuPool."))
#: What shapes only a cluster the stack creates.
CREATED_CLUSTER_KEYS = (
    "cluster.version",
    "cluster.networkPlugin",
    "cluster.podCidr",
    "cluster.podVswitchId",
    "cluster.podVswitchCidr",
    "cluster.serviceCidr",
    "cluster.apiServerPublic",
)
#: The keys of a Terway cluster's pod vSwitch (refused with Flannel).
POD_VSWITCH_KEYS = ("cluster.podVswitchId", "cluster.podVswitchCidr")


def mode_keys(r: Reading, _: Resolved) -> None:
    """With kubeconfig the stack creates no cloud layer: its keys would shape nothing. Without
    GPU pods (worker.gpuCount 0) the stack creates no GPU pool: gpuPool.* would shape nothing."""
    v = r.values
    if v["kubeconfig"] is not None:
        # NAS keys with another volume type: the volume rule refuses them already.
        nas = ("nas.fileSystemId", *NAS_CREATE_KEYS) if v["persistence.volume.type"] == "nas" else ()
        for name in (*CLOUD_KEYS, *nas):
            if r.is_set(name):
                r.refuse(
                    name,
                    "applies only without kubeconfig (with kubeconfig the stack deploys into that "
                    "cluster and creates no VPC, cluster, node pool or NAS)",
                )
        return
    if v["worker.gpuCount"] == 0:
        for name in GPU_POOL_KEYS:
            if r.is_set(name):
                r.refuse(
                    name,
                    "applies only with worker.gpuCount > 0 (without GPU pods the stack creates no GPU pool)",
                )
    if v["cluster.id"] is not None:
        for name in CREATED_CLUSTER_KEYS:
            if r.is_set(name):
                r.refuse(
                    name,
                    "applies only when the stack creates the ACK cluster (cluster.id names an existing one)",
                )
    if v["vswitch.id"] is not None:
        for name in ("vpc.id", "vpc.cidr"):
            if r.is_set(name):
                r.refuse(
                    name,
                    "applies only when the stack creates the vSwitch (vswitch.id names an existing "
                    "one, in its own VPC)",
                )


def network_plugin(r: Reading, d: Resolved) -> None:
    """A new cluster's pod addresses come from what its plugin uses: cluster.podCidr with
    Flannel, a pod vSwitch with Terway (ACK CreateCluster takes PodVswitchIds instead of a
    container CIDR), and a created pod vSwitch needs the VPC, which vswitch.id hides. The plugin
    is the resolved one: cluster.networkPlugin, or what the stack's state records."""
    v = r.values
    if v["kubeconfig"] is not None or v["cluster.id"] is not None:
        return  # mode_keys refuses these keys there
    if d.network_plugin != "terway":
        for name in POD_VSWITCH_KEYS:
            if r.is_set(name):
                r.refuse(
                    name,
                    "applies only with cluster.networkPlugin terway (a Flannel cluster gives pods "
                    "addresses of cluster.podCidr, not of a vSwitch)",
                )
        return
    if r.is_set("cluster.podCidr"):
        r.refuse(
            "cluster.podCidr",
            "applies only with cluster.networkPlugin flannel (a Terway cluster gives pods "
            "addresses of its pod vSwitch: cluster.podVswitchId or cluster.podVswitchCidr)",
        )
    if v["cluster.podVswitchId"] is not None:
        if r.is_set("cluster.podVswitchCidr"):
            r.refuse(
                "cluster.podVswitchCidr",
                "applies only without cluster.podVswitchId (that vSwitch gives the "
                "pods their addresses, so the stack creates none)",
            )
        return
    if v["vswitch.id"] is not None:
        if r.is_set("cluster.podVswitchCidr"):
            r.refuse(
                "cluster.podVswitchCidr",
                "applies only when the stack creates the node vSwitch (vswitch.id "
                "names an existing one, whose VPC the stack does not know)",
            )
        r.missing(
            "cluster.podVswitchId",
            "required with cluster.networkPlugin terway and vswitch.id (the stack "
            "does not know the VPC of that vSwitch, so it cannot create the pod vSwitch there: give an "
            "existing vSwitch of that VPC and zone)",
        )


def unread_state(r: Reading, d: Resolved) -> None:
    """An unset cluster.networkPlugin or nas.storageType of a resource the stack creates takes
    the value the stack's state records for it (the resource may exist, and the value cannot
    change without replacing it): when the state cannot be read, the key must be set."""
    if d.state_error is None:
        return
    why = (
        f"this stack's state could not be read ({d.state_error}), and the default depends on whether the stack "
        "already has {what} (a change replaces it): set the value it has, or {new} for a new one"
    )
    if creates_cluster(r.values) and r.values["cluster.networkPlugin"] is None:
        r.missing("cluster.networkPlugin", why.format(what="its ACK cluster", new="terway"))
    if creates_file_system(r.values) and r.values["nas.storageType"] is None:
        r.missing("nas.storageType", why.format(what="its NAS file system", new="Capacity"))


def gpu_pool(r: Reading, _: Resolved) -> None:
    """Every GPU instance type of a family the rules know (gpu_families.py) takes
    gpuPool.systemDiskCategory, and runs gpuPool.driverVersion (Pascal and Volta end at R580):
    ACK would otherwise fail the pool, or its nodes, only at `pulumi up`."""
    v = r.values
    if v["kubeconfig"] is not None or v["worker.gpuCount"] == 0:
        return  # no GPU pool (mode_keys refuses the keys)
    families = known_families(v["gpuPool.instanceTypes"])
    common = [
        c
        for c in ("cloud_efficiency", "cloud_ssd", "cloud_essd")
        if all(c in f.system_disks for f in families.values())
    ]
    disks = "; ".join(f"{t} takes {', '.join(f.system_disks)}" for t, f in families.items())
    if not common:
        r.bad(
            "gpuPool.instanceTypes",
            f"must share a system disk category, and these do not ({disks}): list "
            "types of families that do, such as the default's GN5, gn6i and gn6v (all cloud_efficiency)",
        )
    elif v["gpuPool.systemDiskCategory"] not in common:
        r.bad(
            "gpuPool.systemDiskCategory",
            f"must be a category every type of gpuPool.instanceTypes takes ({disks})",
            fix_value=common[0],
        )
    version = v["gpuPool.driverVersion"]
    if version is not None:
        old = [
            f"{t} ({f.gpu}, R{f.last_driver_branch} at most)"
            for t, f in families.items()
            if f.last_driver_branch is not None and driver_branch(version) > f.last_driver_branch
        ]
        if old:
            r.bad(
                "gpuPool.driverVersion",
                f"must be a driver branch that still supports {', '.join(old)}",
                fix_value=KEYS_BY_NAME["gpuPool.driverVersion"].default,
            )


def zone_in_region(r: Reading, region: str | None) -> None:
    """A new vSwitch's zone is one of the provider's region (``cn-hangzhou-i`` in
    ``cn-hangzhou``): ACK and VPC refuse another region's zone only at create."""
    zone = r.values["zone"]
    if r.values["kubeconfig"] is None and r.values["vswitch.id"] is None and zone and region:
        if not zone.startswith(f"{region}-"):
            r.bad(
                "zone",
                f"must be a zone of region {region} (alicloud:region), such as {region}-a",
                "zone",
                fix_value=f"{region}-a",
            )


def existing_nas(r: Reading, _: Resolved) -> None:
    """nas.mountTargetDomain or nas.fileSystemId without kubeconfig: one NAS, named once, in
    a VPC the cluster's nodes are in, and no keys of a file system the stack does not create."""
    v = r.values
    if v["kubeconfig"] is not None or v["persistence.volume.type"] != "nas":
        return
    domain, file_system = v["nas.mountTargetDomain"], v["nas.fileSystemId"]
    if domain is not None and file_system is not None:
        r.refuse(
            "nas.fileSystemId",
            "applies only without nas.mountTargetDomain (that mount target already "
            "names the NAS, so the stack creates no NAS resource)",
        )
    if domain is not None and v["vpc.id"] is None and v["vswitch.id"] is None:
        # A mount target answers only inside its own VPC, and without vpc.id or vswitch.id
        # the stack creates a new VPC for the nodes.
        r.bad(
            "nas.mountTargetDomain",
            "needs vpc.id or vswitch.id of the VPC that mount target is in (a NAS "
            "mount target serves only its own VPC; without them the stack creates a new one)",
            "vpc.id",
        )
    if domain is not None or file_system is not None:
        existing = "nas.mountTargetDomain" if domain is not None else "nas.fileSystemId"
        for name in NAS_CREATE_KEYS:
            if r.is_set(name):
                r.refuse(
                    name,
                    f"applies only when the stack creates the NAS file system ({existing} names an "
                    "existing one)",
                )


def credential_lifetime(r: Reading, _: Resolved) -> None:
    """The temporary kubeconfig must outlast a `pulumi up` that waits for the chief."""
    v = r.values
    if v["kubeconfig"] is not None or not v["job.waitForChief"]:
        return
    wait, minutes = v["job.waitTimeoutMinutes"], v["cluster.credentialMinutes"]
    if minutes <= wait:
        r.bad(
            "cluster.credentialMinutes",
            f"must exceed job.waitTimeoutMinutes ({wait}) with job.waitForChief: "
            "the kubeconfig would expire while `pulumi up` waits for the chief",
            fix_value=str(min(wait + 60, 4320)),
        )


#: ACK's longest names: a cluster's 63 characters (terraform-provider-alicloud's
#: cs_managed_kubernetes name check) and a node pool's, which is the cloud name plus "-gpu".
ACK_NAME_MAX = 63
NODE_POOL_SUFFIX = "-gpu"


def stack_name(r: Reading, stack: str) -> None:
    """The cloud layer's names (``tf-mnist-<stack>``, infra.target.cloud_name) fit ACK's."""
    name = f"{PROJECT}-{stack}{NODE_POOL_SUFFIX}"
    if r.values["kubeconfig"] is None and len(name) > ACK_NAME_MAX:
        longest = ACK_NAME_MAX - len(f"{PROJECT}-{NODE_POOL_SUFFIX}")
        r.problems.append(
            f"Stack name '{stack}' is invalid for the cloud layer: its GPU node pool would be named {name} "
            f"({len(name)} characters; ACK allows {ACK_NAME_MAX}), so the stack name may have at most {longest}.\n"
            f"    fix: pulumi stack rename {stack[:longest]}"
        )


#: The rules of this module, in the order their violations are reported.
CLOUD_RULES = (mode_keys, network_plugin, unread_state, gpu_pool, existing_nas, credential_lifetime)
