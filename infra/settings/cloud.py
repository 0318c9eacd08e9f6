"""The sections of the cloud layer's keys, which the stack creates without kubeconfig: the VPC
and vSwitch, the ACK cluster, the GPU and CPU node pools; and of each kind of volume: NAS, an
NFS server's export, a node's directory (hostPath).

Each field is one key (infra/settings/keys.py ``key``); infra/settings/config.py places the
sections.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.deployed import NAS_STORAGE_TYPES, NETWORK_PLUGINS, NEW_NAS_STORAGE_TYPE
from infra.settings.constants import MAX_POOL_NODES, MAX_WORKERS, NAS_ZONE_CHECKS
from infra.settings.keys import key
from infra.values.alicloud import (
    CREDENTIAL_MINUTES,
    ack_version,
    instance_types,
    nvidia_driver_version,
    optional_choice,
    vswitch_id,
)
from infra.values.gpu_families import (
    DEFAULT_GPU_INSTANCE_TYPES,
    GPU_DRIVER_VERSION,
    GPU_IMAGE_TYPES,
    MAX_GPUS_PER_INSTANCE,
    SYSTEM_DISK_CATEGORIES,
)
from infra.values.parsers import (
    absolute_path,
    boolean,
    cidr,
    export_path,
    integer,
    nfs_server,
    one_of,
    optional,
    optional_string,
)


@dataclass(frozen=True)
class Vpc:
    """The VPC: an existing one, or the CIDR of the one the stack creates (vpc.*)."""

    id: str | None = key(None, optional_string, "Existing VPC to create the vSwitch in.", fix="vpc-xxxxxxxx")
    cidr: str = key("192.168.0.0/16", cidr, "CIDR of a new VPC.")


@dataclass(frozen=True)
class Vswitch:
    """The node vSwitch: an existing one, or the one the stack creates (vswitch.*)."""

    id: str | None = key(
        None,
        optional_string,
        "Existing vSwitch for nodes and the NAS mount target (set vswitch.cidr to its CIDR).",
        fix="vsw-xxxxxxxx",
    )
    cidr: str = key("192.168.0.0/20", cidr, "CIDR of the node vSwitch; the NAS access rule authorises it.")


@dataclass(frozen=True)
class Cluster:
    """The ACK cluster: an existing one, or the one the stack creates (cluster.*)."""

    id: str | None = key(None, optional_string, "Existing ACK cluster to use.", fix="c0123456789abcdef")
    version: str | None = key(
        None, ack_version, "Kubernetes version of a new cluster; default the newest.", fix="1.33.3-aliyun.1"
    )
    # Not declared in Pulumi.yaml (a default of None: infra/schema.py): the CLI would write a
    # declared default into every stack's config, and the program could no longer tell an unset
    # key, whose value comes from the stack's state (NEW_CLUSTER_NETWORK_PLUGIN), from one the
    # user set.
    network_plugin: str | None = key(
        None,
        optional_choice(NETWORK_PLUGINS),
        "ACK network plugin of a new cluster: terway (pods on a pod vSwitch; enforces NetworkPolicy) or flannel "
        "(pods on cluster.podCidr; enforces no NetworkPolicy); unset = terway for a new cluster, and for a cluster "
        "the stack already created the plugin it has (read from the stack's state: ACK cannot change it).",
        fix="terway",
    )
    pod_cidr: str = key("172.20.0.0/16", cidr, "Flannel pod CIDR (cluster.networkPlugin flannel).")
    pod_vswitch_id: str | None = key(
        None,
        vswitch_id,
        "Existing pod vSwitch of a new Terway cluster, in the node vSwitch's VPC and zone (required with "
        "vswitch.id); unset = the stack creates one of cluster.podVswitchCidr.",
        fix="vsw-xxxxxxxx",
    )
    pod_vswitch_cidr: str = key(
        "192.168.64.0/18",
        cidr,
        "CIDR of the pod vSwitch the stack creates for a new Terway cluster in the node VPC and zone "
        "(without cluster.podVswitchId).",
    )
    service_cidr: str = key("172.21.0.0/20", cidr, "Service CIDR.")
    api_server_public: bool = key(
        True, boolean, "Expose the API server on an internet load balancer (Pulumi must reach it)."
    )
    credential_minutes: int = key(
        240,
        integer(*CREDENTIAL_MINUTES),
        "Lifetime in minutes of the temporary kubeconfig the stack reads for the cluster (15 to 4320); "
        "each `pulumi up` gets a new one. Must outlast job.waitTimeoutMinutes when job.waitForChief.",
    )


@dataclass(frozen=True)
class GpuPool:
    """The GPU node pool (gpuPool.*), created while worker.gpuCount > 0."""

    instance_types: tuple[str, ...] = key(
        DEFAULT_GPU_INSTANCE_TYPES,
        instance_types,
        "GPU instance types, tried in order for each node (the guide's GN5 first, then T4 and V100 types with one "
        "GPU each, should GN5 be sold out).",
        fix="ecs.gn6i-c4g1.xlarge",
        fix_key="--path 'gpuPool.instanceTypes[0]'",
    )
    gpus_per_instance: int = key(
        1,
        integer(1, MAX_GPUS_PER_INSTANCE),
        f"GPUs per GPU instance (1 for every default type; 1 to {MAX_GPUS_PER_INSTANCE}, the most of any "
        "Alibaba Cloud GPU instance type).",
    )
    size: int | None = key(
        None,
        optional(integer(1, MAX_POOL_NODES)),
        f"GPU nodes (1 to {MAX_POOL_NODES}: {MAX_WORKERS} workers and the chief, a node each); default "
        "ceil(GPU pods x worker.gpuCount / gpuPool.gpusPerInstance), GPU pods being the workers, plus the chief "
        "with ps.number 0.",
        fix="2",
    )
    # Autoscaling by default: a GPU node bills by the hour, and the training Jobs finish; the pool
    # scales up from 0 for pending GPU pods and back to 0 once their GPUs are idle.
    autoscaling: bool = key(
        True,
        boolean,
        "Autoscale the GPU pool between 0 and gpuPool.size nodes (no GPU node while no GPU pod runs); false keeps "
        "gpuPool.size nodes running.",
        fix="false",
    )
    system_disk_category: str = key(
        "cloud_efficiency",
        one_of(SYSTEM_DISK_CATEGORIES),
        "System disk category of GPU nodes; every type of gpuPool.instanceTypes must take it (GN5: no ESSD; "
        "gn7i and newer: ESSD only).",
    )
    driver_version: str | None = key(
        GPU_DRIVER_VERSION,
        nvidia_driver_version,
        "NVIDIA driver of new GPU nodes (ACK node pool label ack.aliyun.com/nvidia-driver-version), one of ACK's "
        "supported versions, branch 580 at most with GN5 or V100 types; empty = ACK's default, which changes.",
    )
    image_type: str = key(
        "AliyunLinux3",
        one_of(GPU_IMAGE_TYPES),
        "OS image of GPU nodes (ACK node pool image_type), on which ACK installs gpuPool.driverVersion.",
    )
    system_disk_size: int = key(120, integer(40, 2048), "System disk GiB of GPU nodes.")


@dataclass(frozen=True)
class CpuPool:
    """The CPU node pool (cpuPool.*)."""

    instance_types: tuple[str, ...] = key(
        ("ecs.g6.xlarge",),
        instance_types,
        "CPU instance types for ps, chief, TensorBoard (and CPU workers).",
        fix="ecs.g6.xlarge",
        fix_key="--path 'cpuPool.instanceTypes[0]'",
    )
    size: int = key(
        2,
        integer(1, MAX_POOL_NODES),
        f"CPU nodes (1 to {MAX_POOL_NODES}, the most nodes of any pool of the stack).",
    )
    system_disk_category: str = key(
        "cloud_essd",
        one_of(SYSTEM_DISK_CATEGORIES),
        "System disk category of CPU nodes.",
    )
    system_disk_size: int = key(120, integer(40, 2048), "System disk GiB of CPU nodes.")


@dataclass(frozen=True)
class NodePools:
    """What both node pools share (nodePools.*)."""

    key_name: str | None = key(None, optional_string, "ECS key pair for node login.", fix="my-key-pair")


@dataclass(frozen=True)
class Nas:
    """The NAS volume (nas.*): the file system the stack creates, or an existing one."""

    # Not declared in Pulumi.yaml, like cluster.networkPlugin: unset, the type comes from the state.
    storage_type: str | None = key(
        None,
        optional_choice(NAS_STORAGE_TYPES),
        "Storage type of the general-purpose NAS file system the stack creates (Capacity, Performance, Premium), in "
        "zone; unset = Capacity for a new file system (the cheapest per GiB; this job moves megabytes), and for one "
        "the stack already created the type it has (read from the stack's state: a change replaces it, empty).",
        fix=NEW_NAS_STORAGE_TYPE,
    )
    # Not every zone offers every type (NAS DescribeZones lists them per zone), and NAS refuses a
    # type the zone lacks only when `pulumi up` creates the file system, after the network and
    # the cluster exist. The question needs the cloud: an offline preview cannot ask it.
    zone_check: str = key(
        "up",
        one_of(NAS_ZONE_CHECKS),
        "When the stack asks NAS (DescribeZones) whether zone offers nas.storageType before it creates the NAS "
        "file system: up (at `pulumi up`, before any resource is created), always (at preview too; needs the "
        "cloud) or off (never; NAS then refuses a type the zone lacks when it creates the file system).",
        fix="off",
    )
    retain_on_destroy: bool = key(
        True, boolean, "Keep the NAS file system (and its data) when the stack is destroyed.", fix="false"
    )
    path: str = key(
        "/data",
        absolute_path,
        "Directory on the NAS that the PV mounts; the CSI driver creates it when missing and makes it writable "
        "by every uid (mode 1777, not recursive).",
    )
    mount_target_domain: str | None = key(
        None,
        optional_string,
        "Existing NAS mount target: the stack then creates no NAS (without kubeconfig it must be in the "
        "VPC of vpc.id or vswitch.id).",
        fix="xxxx.cn-hangzhou.nas.aliyuncs.com",
        secret=True,
    )
    file_system_id: str | None = key(
        None,
        optional_string,
        "Existing standard NAS file system (without kubeconfig): the stack creates only its access group, "
        "rule and mount target in the node vSwitch.",
        fix="0a1b2c3d4e",
    )


@dataclass(frozen=True)
class Nfs:
    """An NFS server's export (nfs.*), with persistence.volume.type nfs."""

    server: str | None = key(
        None,
        nfs_server,
        "NFS server of persistence.volume.type nfs (host name or IP address).",
        fix="nfs.example.internal",
        secret=True,
    )
    path: str | None = key(
        None,
        export_path,
        "Exported directory that the PV mounts (persistence.volume.type nfs); must be writable by "
        "pods.runAsUser (root squashing off).",
        fix="/exports/tf-mnist",
        secret=True,
    )


@dataclass(frozen=True)
class HostPath:
    """A node's directory (hostPath.*), with persistence.volume.type hostPath."""

    path: str = key(
        "/var/lib/tf-mnist",
        absolute_path,
        "Directory on the node that backs the PV (persistence.volume.type hostPath); must be writable by "
        "pods.runAsUser (created root-owned, mode 0755, when missing: the staging Job then fails and says how "
        "to fix it).",
    )


@dataclass(frozen=True)
class Observability:
    """ACK add-ons that watch the run (observability.*); only on a cluster the stack creates,
    whose add-ons it owns (infra/components/observability.py)."""

    gpu_metrics: bool = key(
        False,
        boolean,
        "Install ACK's Managed Service for Prometheus agent and GPU exporter (add-ons arms-prometheus and "
        "ack-gpu-exporter) on the cluster the stack creates: GPU metrics (DCGM_FI_*) in ARMS Prometheus.",
        fix="true",
    )
    logs: bool = key(
        False,
        boolean,
        "Install ACK's log collector (add-on loongcollector) on the cluster the stack creates and collect the "
        "task pods' stdout and stderr into Simple Log Service: project k8s-log-<cluster id>, logstore "
        "<namePrefix>-trainer.",
        fix="true",
    )
