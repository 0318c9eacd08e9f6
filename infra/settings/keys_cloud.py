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
    NETWORK_PLUGINS,
)
from infra.settings.parsers import boolean, cidr, integer, one_of, optional_positive_int, optional_string

CLOUD_KEYS: tuple[Key, ...] = (
    Key(
        "zone",
        None,
        optional_string,
        "cn-hangzhou-i",
        None,
        "Zone of the vSwitch (required when the stack creates the vSwitch) and of a NAS file system the stack "
        "creates.",
    ),
    Key("vpc.id", None, optional_string, "vpc-xxxxxxxx", None, "Existing VPC to create the vSwitch in."),
    Key("vpc.cidr", "192.168.0.0/16", cidr, "192.168.0.0/16", "string", "CIDR of a new VPC."),
    Key(
        "vswitch.id",
        None,
        optional_string,
        "vsw-xxxxxxxx",
        None,
        "Existing vSwitch for nodes and the NAS mount target (set vswitch.cidr to its CIDR).",
    ),
    Key(
        "vswitch.cidr",
        "192.168.0.0/20",
        cidr,
        "192.168.0.0/20",
        "string",
        "CIDR of the node vSwitch; the NAS access rule authorises it.",
    ),
    Key("cluster.id", None, optional_string, "c0123456789abcdef", None, "Existing ACK cluster to use."),
    Key(
        "cluster.version",
        None,
        ack_version,
        "1.33.3-aliyun.1",
        None,
        "Kubernetes version of a new cluster; default the newest.",
    ),
    # Not declared in Pulumi.yaml (schema type None): the CLI would write a declared default into
    # every stack's config, and the program could no longer tell an unset key, whose value comes
    # from the stack's state (NEW_CLUSTER_NETWORK_PLUGIN), from one the user set.
    Key(
        "cluster.networkPlugin",
        None,
        optional_choice(NETWORK_PLUGINS),
        "terway",
        None,
        "ACK network plugin of a new cluster: terway (pods on a pod vSwitch; enforces NetworkPolicy) or flannel "
        "(pods on cluster.podCidr; enforces no NetworkPolicy); unset = terway for a new cluster, and for a cluster "
        "the stack already created the plugin it has (read from the stack's state: ACK cannot change it).",
    ),
    Key(
        "cluster.podCidr",
        "172.20.0.0/16",
        cidr,
        "172.20.0.0/16",
        "string",
        "Flannel pod CIDR (cluster.networkPlugin flannel).",
    ),
    Key(
        "cluster.podVswitchId",
        None,
        vswitch_id,
        "vsw-xxxxxxxx",
        None,
        "Existing pod vSwitch of a new Terway cluster, in the node vSwitch's VPC and zone (required with "
        "vswitch.id); unset = the stack creates one of cluster.podVswitchCidr.",
    ),
    Key(
        "cluster.podVswitchCidr",
        "192.168.64.0/18",
        cidr,
        "192.168.64.0/18",
        "string",
        "CIDR of the pod vSwitch the stack creates for a new Terway cluster in the node VPC and zone "
        "(without cluster.podVswitchId).",
    ),
    Key("cluster.serviceCidr", "172.21.0.0/20", cidr, "172.21.0.0/20", "string", "Service CIDR."),
    Key(
        "cluster.apiServerPublic",
        True,
        boolean,
        "true",
        "boolean",
        "Expose the API server on an internet load balancer (Pulumi must reach it).",
    ),
    Key(
        "cluster.credentialMinutes",
        240,
        integer(*CREDENTIAL_MINUTES),
        "240",
        "integer",
        "Lifetime in minutes of the temporary kubeconfig the stack reads for the cluster (15 to 4320); "
        "each `pulumi up` gets a new one. Must outlast job.waitTimeoutMinutes when job.waitForChief.",
    ),
    Key(
        "kubeconfig",
        None,
        optional_string,
        "~/.kube/config",
        None,
        "Skip the cloud layer and deploy into the cluster of this kubeconfig (path or content).",
    ),
    Key(
        "clusterIdentifier",
        None,
        optional_string,
        "my-cluster",
        None,
        "Identity of the kubeconfig's cluster for the kubernetes provider (a change replaces every Kubernetes "
        "object); default the API server URL of the kubeconfig's current context.",
    ),
    Key(
        "gpuPool.instanceTypes",
        DEFAULT_GPU_INSTANCE_TYPES,
        instance_types,
        "ecs.gn6i-c4g1.xlarge",
        None,
        "GPU instance types, tried in order for each node (the guide's GN5 first, then T4 and V100 types with one "
        "GPU each, should GN5 be sold out).",
        "--path 'gpuPool.instanceTypes[0]'",
    ),
    Key(
        "gpuPool.gpusPerInstance",
        1,
        integer(1),
        "1",
        "integer",
        "GPUs per GPU instance (1 for every default type).",
    ),
    Key(
        "gpuPool.size",
        None,
        optional_positive_int,
        "2",
        None,
        "GPU nodes; default ceil(GPU pods x worker.gpuCount / gpuPool.gpusPerInstance), GPU pods being the "
        "workers, plus the chief with ps.number 0.",
    ),
    # Autoscaling by default: a GPU node bills by the hour, and the training Jobs finish; the pool
    # scales up from 0 for pending GPU pods and back to 0 once their GPUs are idle.
    Key(
        "gpuPool.autoscaling",
        True,
        boolean,
        "false",
        "boolean",
        "Autoscale the GPU pool between 0 and gpuPool.size nodes (no GPU node while no GPU pod runs); false keeps "
        "gpuPool.size nodes running.",
    ),
    Key(
        "gpuPool.systemDiskCategory",
        "cloud_efficiency",
        one_of(GPU_SYSTEM_DISK_CATEGORIES),
        "cloud_efficiency",
        "string",
        "System disk category of GPU nodes; every type of gpuPool.instanceTypes must take it (GN5: no ESSD; "
        "gn7i and newer: ESSD only).",
    ),
    Key(
        "gpuPool.driverVersion",
        GPU_DRIVER_VERSION,
        nvidia_driver_version,
        GPU_DRIVER_VERSION,
        "string",
        "NVIDIA driver of new GPU nodes (ACK node pool label ack.aliyun.com/nvidia-driver-version), one of ACK's "
        "supported versions, branch 580 at most with GN5 or V100 types; empty = ACK's default, which changes.",
    ),
    Key(
        "gpuPool.imageType",
        "AliyunLinux3",
        one_of(GPU_IMAGE_TYPES),
        "AliyunLinux3",
        "string",
        "OS image of GPU nodes (ACK node pool image_type), on which ACK installs gpuPool.driverVersion.",
    ),
    Key("gpuPool.systemDiskSize", 120, integer(40, 2048), "120", "integer", "System disk GiB of GPU nodes."),
    Key(
        "cpuPool.instanceTypes",
        ("ecs.g6.xlarge",),
        instance_types,
        "ecs.g6.xlarge",
        None,
        "CPU instance types for ps, chief, TensorBoard (and CPU workers).",
        "--path 'cpuPool.instanceTypes[0]'",
    ),
    Key("cpuPool.size", 2, integer(1), "2", "integer", "CPU nodes."),
    Key(
        "cpuPool.systemDiskCategory",
        "cloud_essd",
        one_of(("cloud_efficiency", "cloud_ssd", "cloud_essd")),
        "cloud_essd",
        "string",
        "System disk category of CPU nodes.",
    ),
    Key("nodePools.keyName", None, optional_string, "my-key-pair", None, "ECS key pair for node login."),
)
