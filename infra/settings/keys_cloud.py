"""The keys of the cloud layer the stack creates without kubeconfig: the zone, the VPC and
vSwitch, the ACK cluster (or the kubeconfig that replaces it) and the GPU and CPU node pools.

The third part of the key table; infra/settings/keys.py joins the parts into ``KEYS``.
"""

from __future__ import annotations

from infra.settings.cloud_parsers import (
    ack_version,
    instance_types,
    nvidia_driver_version,
    optional_choice,
    vswitch_id,
)
from infra.settings.gpu_families import GPU_SYSTEM_DISK_CATEGORIES
from infra.settings.key import Key
from infra.settings.key_values import (
    CREDENTIAL_MINUTES,
    DEFAULT_GPU_INSTANCE_TYPES,
    GPU_DRIVER_VERSION,
    GPU_IMAGE_TYPES,
    MAX_GPUS_PER_INSTANCE,
    MAX_POOL_NODES,
    MAX_WORKERS,
    NETWORK_PLUGINS,
)
from infra.settings.parsers import boolean, cidr, integer, one_of, optional_pool_size, optional_string

CLOUD_KEYS: tuple[Key, ...] = (
    Key(
        "zone",
        None,
        optional_string,
        "Zone of the vSwitch (required when the stack creates the vSwitch) and of a NAS file system the stack "
        "creates.",
        fix="cn-hangzhou-i",
    ),
    Key("vpc.id", None, optional_string, "Existing VPC to create the vSwitch in.", fix="vpc-xxxxxxxx"),
    Key("vpc.cidr", "192.168.0.0/16", cidr, "CIDR of a new VPC."),
    Key(
        "vswitch.id",
        None,
        optional_string,
        "Existing vSwitch for nodes and the NAS mount target (set vswitch.cidr to its CIDR).",
        fix="vsw-xxxxxxxx",
    ),
    Key(
        "vswitch.cidr", "192.168.0.0/20", cidr, "CIDR of the node vSwitch; the NAS access rule authorises it."
    ),
    Key("cluster.id", None, optional_string, "Existing ACK cluster to use.", fix="c0123456789abcdef"),
    Key(
        "cluster.version",
        None,
        ack_version,
        "Kubernetes version of a new cluster; default the newest.",
        fix="1.33.3-aliyun.1",
    ),
    # Not declared in Pulumi.yaml (schema type None): the CLI would write a declared default into
    # every stack's config, and the program could no longer tell an unset key, whose value comes
    # from the stack's state (NEW_CLUSTER_NETWORK_PLUGIN), from one the user set.
    Key(
        "cluster.networkPlugin",
        None,
        optional_choice(NETWORK_PLUGINS),
        "ACK network plugin of a new cluster: terway (pods on a pod vSwitch; enforces NetworkPolicy) or flannel "
        "(pods on cluster.podCidr; enforces no NetworkPolicy); unset = terway for a new cluster, and for a cluster "
        "the stack already created the plugin it has (read from the stack's state: ACK cannot change it).",
        fix="terway",
    ),
    Key("cluster.podCidr", "172.20.0.0/16", cidr, "Flannel pod CIDR (cluster.networkPlugin flannel)."),
    Key(
        "cluster.podVswitchId",
        None,
        vswitch_id,
        "Existing pod vSwitch of a new Terway cluster, in the node vSwitch's VPC and zone (required with "
        "vswitch.id); unset = the stack creates one of cluster.podVswitchCidr.",
        fix="vsw-xxxxxxxx",
    ),
    Key(
        "cluster.podVswitchCidr",
        "192.168.64.0/18",
        cidr,
        "CIDR of the pod vSwitch the stack creates for a new Terway cluster in the node VPC and zone "
        "(without cluster.podVswitchId).",
    ),
    Key("cluster.serviceCidr", "172.21.0.0/20", cidr, "Service CIDR."),
    Key(
        "cluster.apiServerPublic",
        True,
        boolean,
        "Expose the API server on an internet load balancer (Pulumi must reach it).",
    ),
    Key(
        "cluster.credentialMinutes",
        240,
        integer(*CREDENTIAL_MINUTES),
        "Lifetime in minutes of the temporary kubeconfig the stack reads for the cluster (15 to 4320); "
        "each `pulumi up` gets a new one. Must outlast job.waitTimeoutMinutes when job.waitForChief.",
    ),
    Key(
        "kubeconfig",
        None,
        optional_string,
        "Skip the cloud layer and deploy into the cluster of this kubeconfig: the file's path, or its content "
        "set with --secret (it holds the cluster's credentials).",
        fix="~/.kube/config",
    ),
    Key(
        "clusterIdentifier",
        None,
        optional_string,
        "Identity of the kubeconfig's cluster for the kubernetes provider (a change replaces every Kubernetes "
        "object); default the API server URL of the kubeconfig's current context.",
        fix="my-cluster",
    ),
    Key(
        "gpuPool.instanceTypes",
        DEFAULT_GPU_INSTANCE_TYPES,
        instance_types,
        "GPU instance types, tried in order for each node (the guide's GN5 first, then T4 and V100 types with one "
        "GPU each, should GN5 be sold out).",
        fix="ecs.gn6i-c4g1.xlarge",
        fix_key="--path 'gpuPool.instanceTypes[0]'",
    ),
    Key(
        "gpuPool.gpusPerInstance",
        1,
        integer(1, MAX_GPUS_PER_INSTANCE),
        f"GPUs per GPU instance (1 for every default type; 1 to {MAX_GPUS_PER_INSTANCE}, the most of any "
        "Alibaba Cloud GPU instance type).",
    ),
    Key(
        "gpuPool.size",
        None,
        optional_pool_size,
        f"GPU nodes (1 to {MAX_POOL_NODES}: {MAX_WORKERS} workers and the chief, a node each); default "
        "ceil(GPU pods x worker.gpuCount / gpuPool.gpusPerInstance), GPU pods being the workers, plus the chief "
        "with ps.number 0.",
        fix="2",
    ),
    # Autoscaling by default: a GPU node bills by the hour, and the training Jobs finish; the pool
    # scales up from 0 for pending GPU pods and back to 0 once their GPUs are idle.
    Key(
        "gpuPool.autoscaling",
        True,
        boolean,
        "Autoscale the GPU pool between 0 and gpuPool.size nodes (no GPU node while no GPU pod runs); false keeps "
        "gpuPool.size nodes running.",
        fix="false",
    ),
    Key(
        "gpuPool.systemDiskCategory",
        "cloud_efficiency",
        one_of(GPU_SYSTEM_DISK_CATEGORIES),
        "System disk category of GPU nodes; every type of gpuPool.instanceTypes must take it (GN5: no ESSD; "
        "gn7i and newer: ESSD only).",
    ),
    Key(
        "gpuPool.driverVersion",
        GPU_DRIVER_VERSION,
        nvidia_driver_version,
        "NVIDIA driver of new GPU nodes (ACK node pool label ack.aliyun.com/nvidia-driver-version), one of ACK's "
        "supported versions, branch 580 at most with GN5 or V100 types; empty = ACK's default, which changes.",
    ),
    Key(
        "gpuPool.imageType",
        "AliyunLinux3",
        one_of(GPU_IMAGE_TYPES),
        "OS image of GPU nodes (ACK node pool image_type), on which ACK installs gpuPool.driverVersion.",
    ),
    Key("gpuPool.systemDiskSize", 120, integer(40, 2048), "System disk GiB of GPU nodes."),
    Key(
        "cpuPool.instanceTypes",
        ("ecs.g6.xlarge",),
        instance_types,
        "CPU instance types for ps, chief, TensorBoard (and CPU workers).",
        fix="ecs.g6.xlarge",
        fix_key="--path 'cpuPool.instanceTypes[0]'",
    ),
    Key(
        "cpuPool.size",
        2,
        integer(1, MAX_POOL_NODES),
        f"CPU nodes (1 to {MAX_POOL_NODES}, the most nodes of any pool of the stack).",
    ),
    Key(
        "cpuPool.systemDiskCategory",
        "cloud_essd",
        one_of(("cloud_efficiency", "cloud_ssd", "cloud_essd")),
        "System disk category of CPU nodes.",
    ),
    Key("nodePools.keyName", None, optional_string, "ECS key pair for node login.", fix="my-key-pair"),
)
