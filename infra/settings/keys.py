"""The configuration keys: name, default, rule, fix and description of each, in one table.

Defaults live only in ``KEYS`` (``Pulumi.yaml`` mirrors the scalar ones, written by
``python -m infra.schema``, and a test keeps the two equal).

A hyperparameter of the recipe is a row of trainer/contract/recipe.py's table, not an entry here
(``recipe_key`` makes its key). Any other new key is an entry in ``KEYS`` and a field of its
section in model.py, ``name: type = from_key("the.key")``; then ``python -m infra.schema`` for Pulumi.yaml. A rule
between keys goes in rules.py, a value worked out from several keys in derive.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from infra.settings.cloud_parsers import (
    ack_version,
    instance_types,
    nvidia_driver_version,
    optional_choice,
    vswitch_id,
)
from infra.settings.gpu_families import GPU_SYSTEM_DISK_CATEGORIES
from infra.settings.parsers import (
    Parser,
    absolute_path,
    boolean,
    cidr,
    cidr_list,
    data_source,
    dns_label,
    dns_subdomain,
    export_path,
    https_url,
    image_reference,
    integer,
    label_map,
    namespace,
    nfs_server,
    node_selector,
    number,
    one_of,
    optional_boolean,
    optional_positive_int,
    optional_string,
    pod_gid,
    pod_uid,
    quantity,
    registry,
    registry_host,
    string_list,
    tolerations,
)
from trainer.contract import recipe

PROJECT = "tf-mnist"
DEFAULT_NAMESPACE = PROJECT  # a stack's own namespace, which it creates while createNamespace is unset
POD_ID = 10001  # the pods' uid and gid and docker/*.Dockerfile's USER: > 10000 (CKV_K8S_40, kube-score)

#: Default imageRegistry; the images built from docker/ are ``<registry>/<name>:<tag>``.
DEFAULT_REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
TRAINER_GPU_TAG = "trainer:2.21.0-gpu"
TRAINER_CPU_TAG = "trainer:2.21.0-cpu"
TENSORBOARD_TAG = "tensorboard:2.21.0"

#: GN5 takes only these system disk categories (no ESSD); see shared/notes/stack-facts.md.
GN5_SYSTEM_DISK_CATEGORIES = ("cloud_efficiency", "cloud_ssd")
#: ACK network plugins (cluster.networkPlugin): only Terway enforces Kubernetes NetworkPolicy.
NETWORK_PLUGINS = ("flannel", "terway")
#: The plugin of a cluster the stack creates while cluster.networkPlugin is unset: Terway, which
#: enforces the stack's NetworkPolicies. A cluster the stack already created keeps the plugin its
#: state records instead (infra/settings/deployed.py): ACK cannot change the plugin of a cluster,
#: and pod_cidr is ForceNew (terraform-provider-alicloud cs_managed_kubernetes), so a new default
#: must not reach a stack deployed with the old one.
NEW_CLUSTER_NETWORK_PLUGIN = "terway"
#: Standard (general-purpose) NAS storage types.
NAS_STORAGE_TYPES = ("Performance", "Capacity", "Premium")
#: The storage type of a NAS file system the stack creates while nas.storageType is unset.
#: Capacity: general-purpose NAS bills the used GiB by the hour and Capacity has the lowest
#: price per GiB (0.06 USD/GiB/month in cn-hangzhou in Alibaba's billing example; Performance
#: and Premium cost more per GiB for lower latency), while this job moves megabytes (an 11 MB
#: data set staged once, checkpoints and event files of a few MB), far below what any of them
#: serves. Extreme NAS is no candidate: it bills a provisioned capacity whether used or not and
#: mounts over NFSv3 only. A file system the stack already created keeps its type (its state
#: says which; storage_type is ForceNew, and a new file system would start empty).
NEW_NAS_STORAGE_TYPE = "Capacity"
#: The GPU pool's instance types, tried in order for each node (ACK node pools: "it will try to
#: purchase from the first specification until it is created successfully"). Every one has one
#: GPU (so gpuPool.gpusPerInstance 1 holds whichever comes), takes the ultra disk
#: (gpuPool.systemDiskCategory cloud_efficiency; gn7i and newer take ESSD only, GN5 no ESSD) and
#: runs the pinned driver branch R550 (GPU_DRIVER_VERSION). GN5 (P100) stays first because the
#: guide names it and measured its numbers on it; it is an outdated family that is often sold out
#: or no longer offered in a zone, and then the pool takes the next type instead of failing after
#: the network, cluster, CPU pool and NAS exist: T4 (gn6i: 4 vCPU and 15 GiB hold a worker's
#: 2 CPU and 8 GiB), then a larger T4, then V100 (gn6v). Put a current type first to prefer it.
DEFAULT_GPU_INSTANCE_TYPES = ("ecs.gn5-c4g1.xlarge", "ecs.gn6i-c4g1.xlarge", "ecs.gn6i-c8g1.2xlarge",
                              "ecs.gn6v-c8g1.2xlarge")
#: The NVIDIA driver of new GPU nodes, pinned with ACK's node pool label
#: ``ack.aliyun.com/nvidia-driver-version``: without it ACK installs its current default (535.161.07
#: for clusters of 1.28 and later when this was written), which ACK changes over time and which
#: could one day be a branch after R580, the last to support GN5's P100 (and gn6v's V100). R550 is
#: the branch ACK recommends (its fixes for XID 119/120/31 errors), drives P100, V100, T4 and A10,
#: and, a CUDA 12.4 driver, runs the GPU image's CUDA 12.9 wheels through CUDA 12's minor-version
#: compatibility (docker/trainer-gpu.Dockerfile); 550.163.01 is the newest 550 release in ACK's list
#: of supported driver versions (ACK installs its default for any version not listed).
GPU_DRIVER_VERSION = "550.163.01"
#: Node OS images a GPU pool may use: ACK's own Linux images, on which it installs the driver
#: that the driver label names.
GPU_IMAGE_TYPES = ("AliyunLinux3", "AliyunLinux3ContainerOptimized", "ContainerOS", "Ubuntu")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
ADDRESS_TYPES = ("internet", "intranet")
#: Where the PV lives (persistence.volume.type): NAS through Alibaba's CSI driver, a plain
#: NFS server (in-tree nfs volume), or a directory of the node (single-node clusters).
VOLUME_TYPES = ("nas", "nfs", "hostPath")
#: Keys that configure one volume type only, by type (refused with the others).
VOLUME_KEYS = {
    "nas": ("nas.storageType", "nas.retainOnDestroy", "nas.path", "nas.mountTargetDomain", "nas.fileSystemId"),
    "nfs": ("nfs.server", "nfs.path"),
    "hostPath": ("hostPath.path",),
}
#: Key prefixes of the cloud layer the stack creates without kubeconfig: with kubeconfig they
#: would shape nothing, so they are refused there (see cloud_rules.py). Not zone: the committed
#: Pulumi.dev.yaml sets it, and a kubeconfig stack is that file plus kubeconfig.
CLOUD_KEY_PREFIXES = ("vpc.", "vswitch.", "cluster.", "gpuPool.", "cpuPool.", "nodePools.")
#: Keys that shape the NAS file system the stack creates (refused when it creates none).
NAS_CREATE_KEYS = ("nas.storageType", "nas.retainOnDestroy")
#: The range of an ACK temporary credential's lifetime, minutes (cs DescribeClusterUserKubeconfig
#: TemporaryDurationMinutes: 15 to 4320).
CREDENTIAL_MINUTES = (15, 4320)
#: The most workers and ps tasks a stack takes. Each GPU worker is a GPU node (gpuPool grows to
#: the workers' demand), so a slip such as ``worker.number 200`` would plan a 200-node pool; and
#: every worker holds a gRPC channel to every ps. 32 workers is past what MNIST gains from (at
#: 32 x 64 examples a global step, an epoch of 60,000 is 30 steps); 8 ps tasks split the
#: model's 0.8 M weights into shards of about 100 k. To go further, raise these.
MAX_WORKERS = 32
MAX_PS = 8
#: Roles whose pods take a node selector and tolerations from config (``<role>.nodeSelector``).
PLACEMENT_ROLES = ("chief", "worker", "ps", "tensorboard")
#: Keys whose value the program carries as a Pulumi secret when set with ``--secret``. Every
#: other value goes into object names, labels, pod specs or plain outputs, so a secret there
#: is refused rather than written out in plain text.
SECRET_CAPABLE_KEYS = ("kubeconfig", "nas.mountTargetDomain", "nfs.server", "nfs.path", "data.source",
                       "registryCredentials.server", "registryCredentials.username", "registryCredentials.password")
#: SECRET_CAPABLE_KEYS as the refusal message lists them.
SECRET_CAPABLE_SHOWN = ("kubeconfig", "nas.mountTargetDomain", "nfs.*", "data.source", "registryCredentials.*")


@dataclass(frozen=True)
class Key:
    """One configuration key.

    Attributes:
        name: key within the project namespace, dotted like the chart's values
            (``worker.number``); users set it flat or with ``--path``.
        default: used when the key is absent in both forms; a parsed value.
        parse: raw value -> typed value, raising ValueError(rule).
        fix: the value the fix command suggests.
        schema_type: the Pulumi.yaml ``config:`` type, or None where the schema cannot express
            the key (no float or object type there).
        description: one line for Pulumi.yaml.
        fix_key: for a list or a map, the ``--path`` arguments of the fix when the bad value
            was set with ``--path``; set flat, the fix is the key with a JSON value
            (see ``fix_args``).
        kind: the value's type in words where neither schema_type nor the parser tells it
            (a recipe number's parser is made per key).
    """

    name: str
    default: Any
    parse: Parser
    fix: str
    schema_type: str | None
    description: str
    fix_key: str | None = None
    kind: str | None = None

    @property
    def value_type(self) -> str:
        """The value's type in words: the schema type, else number, list, map or string."""
        return self.schema_type or self.kind or _VALUE_TYPES.get(self.parse, "string")


def recipe_key(row: recipe.Hyperparameter) -> Key:
    """The ``hyperparams.*`` key of one row of the recipe's table: its default (also the fix's
    value), description, and a parser from its type and limits: ``one_of`` its choices, an
    ``integer`` or a ``number`` within its limits. Pulumi.yaml declares the integer and string
    keys (it has no float type)."""
    if row.choices:
        return Key(row.key, row.default, one_of(row.choices), str(row.default), "string", row.description)
    if row.type is int:
        parse = integer(int(row.minimum), None if row.maximum is None else int(row.maximum))
        return Key(row.key, row.default, parse, str(row.default), "integer", row.description)
    parse = number(row.minimum, row.maximum, above=row.above, below=row.below)
    return Key(row.key, row.default, parse, str(row.default), None, row.description, kind="number")


#: The type, by parser, of the keys that Pulumi.yaml's schema cannot declare; any other such
#: key holds a string.
_VALUE_TYPES: dict[Parser, str] = {
    optional_positive_int: "integer", optional_boolean: "boolean", data_source: "string or list",
    cidr_list: "list", string_list: "list", instance_types: "list", tolerations: "list", label_map: "map",
    node_selector: "map",
}


KEYS: tuple[Key, ...] = (
    # The chart's keys with the chart's (GPU example) values.
    Key("worker.number", 2, integer(1, MAX_WORKERS), "2", "integer",
        f"Number of worker tasks (1 to {MAX_WORKERS}; each GPU worker is a GPU node)."),
    Key("worker.gpuCount", 1, integer(0), "1", "integer",
        "GPUs per worker, and per chief with ps.number 0 (nvidia.com/gpu); 0 runs them on the CPU node pool."),
    Key("worker.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TRAINER_GPU_TAG}", None,
        "Worker image; default <imageRegistry>/trainer:2.21.0-gpu (or -cpu when gpuCount is 0)."),
    Key("worker.imagePullPolicy", None, optional_choice(PULL_POLICIES), "Always", None,
        "Worker image pull policy; unset = Always for a tag, IfNotPresent for an image by @sha256 digest."),
    Key("worker.port", 8000, integer(1, 65535), "8000", "integer", "gRPC port of worker and chief tasks."),
    Key("worker.cpu", "2", quantity, "2", "string", "CPU request of each worker."),
    Key("worker.memory", "8Gi", quantity, "8Gi", "string", "Memory request and limit of each worker."),
    Key("worker.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the workers must run on (pod nodeSelector; also the chief's when it trains on GPUs, "
        "ps.number 0 with worker.gpuCount > 0); empty = any node."),
    Key("worker.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the workers (and of a GPU chief); GPU pods tolerate the GPU pool's taint anyway."),
    Key("ps.number", 2, integer(0, MAX_PS), "2", "integer",
        f"Number of parameter servers (0 to {MAX_PS}); 0 trains the workers synchronously."),
    Key("ps.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TRAINER_CPU_TAG}", None,
        "CPU trainer image for ps, chief and data staging; default <imageRegistry>/trainer:2.21.0-cpu."),
    Key("ps.imagePullPolicy", None, optional_choice(PULL_POLICIES), "Always", None,
        "Pull policy of ps, chief, staging, monitor and TensorBoard; unset = Always for a tag, IfNotPresent by digest."),
    Key("ps.port", 9000, integer(1, 65535), "9000", "integer", "gRPC port of ps tasks."),
    Key("ps.cpu", "1", quantity, "1", "string", "CPU request of each ps and the chief."),
    Key("ps.memory", "2Gi", quantity, "2Gi", "string", "Memory request and limit of each ps and the chief."),
    Key("ps.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the ps tasks must run on (pod nodeSelector); empty = any node."),
    Key("ps.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the ps tasks (pod tolerations), e.g. for a dedicated, tainted node pool."),
    Key("chief.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the chief and the data-staging Job must run on (a GPU chief, ps.number 0 with "
        "worker.gpuCount > 0, takes worker.nodeSelector instead); empty = any node."),
    Key("chief.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the chief and the data-staging Job (a GPU chief takes worker.tolerations)."),
    # The recipe: one key per row of trainer/contract/recipe.py's table, which says why each default.
    *(recipe_key(row) for row in recipe.HYPERPARAMETERS),
    Key("tensorboard.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TENSORBOARD_TAG}", None,
        "TensorBoard image; default <imageRegistry>/tensorboard:2.21.0."),
    Key("tensorboard.serviceType", "ClusterIP", one_of(SERVICE_TYPES), "ClusterIP", "string",
        "TensorBoard Service type: ClusterIP (private; kubectl port-forward), NodePort or LoadBalancer "
        "(an internet one needs tensorboard.allowedSourceRanges)."),
    Key("tensorboard.addressType", "internet", one_of(ADDRESS_TYPES), "intranet", "string",
        "ACK load balancer address type (internet or intranet)."),
    Key("tensorboard.allowedSourceRanges", (), cidr_list, "203.0.113.0/24", None,
        "Source CIDRs allowed to reach TensorBoard's load balancer (loadBalancerSourceRanges, and an ACK "
        "ACL when the stack creates the cluster); required with an internet LoadBalancer.",
        "--path 'tensorboard.allowedSourceRanges[0]'"),
    Key("networkPolicy.enabled", True, boolean, "false", "boolean",
        "Create the run's NetworkPolicies: its tasks' gRPC ports admit only its own tasks, TensorBoard only "
        "what tensorboard.serviceType exposes, and each pod opens only DNS and what it needs (its peers, "
        "data.source, the API server) (enforced by NetworkPolicy-capable network plugins: on ACK "
        "Terway, not Flannel)."),
    Key("tensorboard.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels TensorBoard must run on (pod nodeSelector); empty = any node."),
    Key("tensorboard.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of TensorBoard (pod tolerations), e.g. for a dedicated, tainted node pool."),
    Key("mountPath", "/data", absolute_path, "/data", "string",
        "Where the shared volume is mounted in every pod."),
    # A NAS volume is made writable for any uid (the PV's mode, infra/components/storage.py); an
    # NFS export or a node directory the stack cannot change, so the pods run as its owner instead.
    Key("pods.runAsUser", POD_ID, pod_uid, str(POD_ID), "integer",
        "uid the staging, training and TensorBoard pods run as (not 0: Pod Security \"restricted\"); the "
        "volume's directory must be writable by it: set it to the owner of an NFS export or hostPath directory."),
    Key("pods.runAsGroup", POD_ID, pod_gid, str(POD_ID), "integer",
        "gid (and fsGroup) those pods run as: the group of the volume's directory with pods.runAsUser."),
    Key("data.source", None, data_source, "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz",
        None, "Where the staging Job gets MNIST: URL of mnist.npz or of a directory of the four IDX files, a "
              "directory on the volume (under mountPath) or in the image, or a list of the files' URLs "
              "(checksums verified); a new source stages into a new directory and starts a new run (a presigned URL "
              "signed again is the same source); a URL with credentials (user info, a presigned URL's signature) "
              "must be set with --secret; default: the 10,000-digit sample in the trainer image."),
    # 600 s: a node's start and a first pull of the CPU trainer image; at most the whole staging's
    # 1200 s (infra/components/staging.py STAGING_TIMEOUT_SECONDS), which bounds a running download.
    Key("data.startTimeoutSeconds", 600, integer(10, 1200), "600", "integer",
        "Seconds the staging pod may take to start (be scheduled, pull its image, mount the volume) before its Job "
        "fails (activeDeadlineSeconds, raised by the run monitor once the pod runs) and `pulumi up` with it."),
    Key("persistence.pvc.storage", "5Gi", quantity, "5Gi", "string", "PV capacity and PVC request."),
    Key("persistence.pvc.matchLabels", {"train": "mnist"}, label_map, "mnist", None,
        "Labels on the PV that the PVC selects.", "--path persistence.pvc.matchLabels.train"),
    Key("persistence.volume.type", "nas", one_of(VOLUME_TYPES), "nas", "string",
        "Where the PV lives: nas (Alibaba NAS through CSI), nfs (an NFS server: nfs.server, nfs.path) or "
        "hostPath (a directory on a single-node cluster: hostPath.path; with kubeconfig only)."),
    # Names and images.
    Key("namePrefix", "mnist", dns_label, "mnist", "string",
        "Prefix of every object name (two stacks can share a namespace)."),
    Key("namespace", DEFAULT_NAMESPACE, namespace, DEFAULT_NAMESPACE, "string", "Kubernetes namespace of the run."),
    Key("createNamespace", None, optional_boolean, "false", None,  # not in Pulumi.yaml: see its default
        f"Create the namespace (Pod Security \"restricted\"; deleted on destroy); unset = true for {DEFAULT_NAMESPACE}, "
        "false for any other (leave false when it exists or other stacks share it)."),
    Key("imageRegistry", DEFAULT_REGISTRY, registry, DEFAULT_REGISTRY, "string",
        "Registry holding the trainer and tensorboard images built from docker/."),
    Key("imagePullSecret", None, dns_subdomain, "acr-pull", None,
        "docker-registry Secret in the namespace that every pod pulls its image with; with "
        "registryCredentials.* the stack creates it (default name <namePrefix>-registry)."),
    Key("registryCredentials.server", None, registry_host, "registry.cn-hangzhou.aliyuncs.com", None,
        "Registry the created pull Secret logs in to; default the host of imageRegistry."),
    Key("registryCredentials.username", None, optional_string, "<username>", None,
        "Registry user name for the pull Secret the stack creates (with registryCredentials.password)."),
    Key("registryCredentials.password", None, optional_string, "<password>", None,
        "Registry password for the pull Secret the stack creates; set it with --secret."),
    Key("job.backoffLimit", 4, integer(0), "4", "integer", "Pod retries of each task's Job."),
    Key("job.waitForChief", False, boolean, "true", "boolean",
        "Make `pulumi up` wait until the chief's Job completes."),
    Key("job.waitTimeoutMinutes", 180, integer(1), "180", "integer",
        "How long `pulumi up` waits for the chief when job.waitForChief is true."),
    Key("job.activeDeadlineSeconds", None, optional_positive_int, "86400", None,
        "Seconds each training Job may run before Kubernetes fails it (activeDeadlineSeconds); unset = no limit."),
    # 60 s at least: the chief beats every 5 s, but NFS attribute caching (acregmax, 60 s by
    # default) can show a server a heartbeat that old, and a pod restart takes longer anyway.
    Key("job.peerTimeoutSeconds", 600, integer(60), "600", "integer",
        "Seconds a task waits for a lost peer or the chief before exiting non-zero (trainer --peer_timeout)."),
    Key("job.priorityClassName", None, dns_subdomain, "high-priority", None,
        "PriorityClass of the training and data-staging pods; unset = the cluster's default."),
    # 1800 s: twice cluster-autoscaler's --max-node-provision-time (15 minutes by default, also
    # on ACK), after which the autoscaler has either brought a GPU node up from zero or given up
    # on that node group; a first pull of the GPU image comes after scheduling, so it is not counted.
    Key("job.scheduleTimeoutSeconds", 1800, integer(0), "1800", "integer",
        "Seconds a task pod may stay unschedulable before the run monitor fails the run with the scheduler's "
        "message; 0 = wait for ever."),
    # 900 s: a first pull of the 6.7 GB GPU image from a registry in the cluster's region takes
    # minutes; a pull that fails (ImagePullBackOff), a missing Secret or ConfigMap
    # (CreateContainerConfigError) or a volume that does not mount (ContainerCreating) does not
    # mend by waiting, and would hold its node (a GPU) until the Job's deadline.
    Key("job.startTimeoutSeconds", 900, integer(0), "900", "integer",
        "Seconds a scheduled task pod may stay unstarted (its image not pulled, its container not created, its "
        "volume not mounted) before the run monitor fails the run with the container's reason; 0 = wait for ever."),
    Key("monitor.apiServer", None, https_url, "https://10.244.0.1:6443", None,
        "API server URL the run monitor calls, for clusters whose pods cannot reach the kubernetes Service "
        "(no kube-proxy, as on tools/local-cluster); unset = the in-cluster address."),
    # Cloud layer.
    Key("zone", None, optional_string, "cn-hangzhou-i", None,
        "Zone of the vSwitch (required when the stack creates the vSwitch) and of a NAS file system the stack "
        "creates."),
    Key("vpc.id", None, optional_string, "vpc-xxxxxxxx", None, "Existing VPC to create the vSwitch in."),
    Key("vpc.cidr", "192.168.0.0/16", cidr, "192.168.0.0/16", "string", "CIDR of a new VPC."),
    Key("vswitch.id", None, optional_string, "vsw-xxxxxxxx", None,
        "Existing vSwitch for nodes and the NAS mount target (set vswitch.cidr to its CIDR)."),
    Key("vswitch.cidr", "192.168.0.0/20", cidr, "192.168.0.0/20", "string",
        "CIDR of the node vSwitch; the NAS access rule authorises it."),
    Key("cluster.id", None, optional_string, "c0123456789abcdef", None, "Existing ACK cluster to use."),
    Key("cluster.version", None, ack_version, "1.33.3-aliyun.1", None,
        "Kubernetes version of a new cluster; default the newest."),
    # Not declared in Pulumi.yaml (schema type None): the CLI would write a declared default into
    # every stack's config, and the program could no longer tell an unset key, whose value comes
    # from the stack's state (NEW_CLUSTER_NETWORK_PLUGIN), from one the user set.
    Key("cluster.networkPlugin", None, optional_choice(NETWORK_PLUGINS), "terway", None,
        "ACK network plugin of a new cluster: terway (pods on a pod vSwitch; enforces NetworkPolicy) or flannel "
        "(pods on cluster.podCidr; enforces no NetworkPolicy); unset = terway for a new cluster, and for a cluster "
        "the stack already created the plugin it has (read from the stack's state: ACK cannot change it)."),
    Key("cluster.podCidr", "172.20.0.0/16", cidr, "172.20.0.0/16", "string",
        "Flannel pod CIDR (cluster.networkPlugin flannel)."),
    Key("cluster.podVswitchId", None, vswitch_id, "vsw-xxxxxxxx", None,
        "Existing pod vSwitch of a new Terway cluster, in the node vSwitch's VPC and zone (required with "
        "vswitch.id); unset = the stack creates one of cluster.podVswitchCidr."),
    Key("cluster.podVswitchCidr", "192.168.64.0/18", cidr, "192.168.64.0/18", "string",
        "CIDR of the pod vSwitch the stack creates for a new Terway cluster in the node VPC and zone "
        "(without cluster.podVswitchId)."),
    Key("cluster.serviceCidr", "172.21.0.0/20", cidr, "172.21.0.0/20", "string", "Service CIDR."),
    Key("cluster.apiServerPublic", True, boolean, "true", "boolean",
        "Expose the API server on an internet load balancer (Pulumi must reach it)."),
    Key("cluster.credentialMinutes", 240, integer(*CREDENTIAL_MINUTES), "240", "integer",
        "Lifetime in minutes of the temporary kubeconfig the stack reads for the cluster (15 to 4320); "
        "each `pulumi up` gets a new one. Must outlast job.waitTimeoutMinutes when job.waitForChief."),
    Key("kubeconfig", None, optional_string, "~/.kube/config", None,
        "Skip the cloud layer and deploy into the cluster of this kubeconfig (path or content)."),
    Key("clusterIdentifier", None, optional_string, "my-cluster", None,
        "Identity of the kubeconfig's cluster for the kubernetes provider (a change replaces every Kubernetes "
        "object); default the API server URL of the kubeconfig's current context."),
    Key("gpuPool.instanceTypes", DEFAULT_GPU_INSTANCE_TYPES, instance_types, "ecs.gn6i-c4g1.xlarge", None,
        "GPU instance types, tried in order for each node (the guide's GN5 first, then T4 and V100 types with one "
        "GPU each, should GN5 be sold out).", "--path 'gpuPool.instanceTypes[0]'"),
    Key("gpuPool.gpusPerInstance", 1, integer(1), "1", "integer",
        "GPUs per GPU instance (1 for every default type)."),
    Key("gpuPool.size", None, optional_positive_int, "2", None,
        "GPU nodes; default ceil(GPU pods x worker.gpuCount / gpuPool.gpusPerInstance), GPU pods being the "
        "workers, plus the chief with ps.number 0."),
    # Autoscaling by default: a GPU node bills by the hour, and the training Jobs finish; the pool
    # scales up from 0 for pending GPU pods and back to 0 once their GPUs are idle.
    Key("gpuPool.autoscaling", True, boolean, "false", "boolean",
        "Autoscale the GPU pool between 0 and gpuPool.size nodes (no GPU node while no GPU pod runs); false keeps "
        "gpuPool.size nodes running."),
    Key("gpuPool.systemDiskCategory", "cloud_efficiency", one_of(GPU_SYSTEM_DISK_CATEGORIES),
        "cloud_efficiency", "string",
        "System disk category of GPU nodes; every type of gpuPool.instanceTypes must take it (GN5: no ESSD; "
        "gn7i and newer: ESSD only)."),
    Key("gpuPool.driverVersion", GPU_DRIVER_VERSION, nvidia_driver_version, GPU_DRIVER_VERSION, "string",
        "NVIDIA driver of new GPU nodes (ACK node pool label ack.aliyun.com/nvidia-driver-version), one of ACK's "
        "supported versions, branch 580 at most with GN5 or V100 types; empty = ACK's default, which changes."),
    Key("gpuPool.imageType", "AliyunLinux3", one_of(GPU_IMAGE_TYPES), "AliyunLinux3", "string",
        "OS image of GPU nodes (ACK node pool image_type), on which ACK installs gpuPool.driverVersion."),
    Key("gpuPool.systemDiskSize", 120, integer(40, 2048), "120", "integer", "System disk GiB of GPU nodes."),
    Key("cpuPool.instanceTypes", ("ecs.g6.xlarge",), instance_types, "ecs.g6.xlarge", None,
        "CPU instance types for ps, chief, TensorBoard (and CPU workers).", "--path 'cpuPool.instanceTypes[0]'"),
    Key("cpuPool.size", 2, integer(1), "2", "integer", "CPU nodes."),
    Key("cpuPool.systemDiskCategory", "cloud_essd", one_of(("cloud_efficiency", "cloud_ssd", "cloud_essd")),
        "cloud_essd", "string", "System disk category of CPU nodes."),
    Key("nodePools.keyName", None, optional_string, "my-key-pair", None, "ECS key pair for node login."),
    # Not declared in Pulumi.yaml, like cluster.networkPlugin: unset, the type comes from the state.
    Key("nas.storageType", None, optional_choice(NAS_STORAGE_TYPES), NEW_NAS_STORAGE_TYPE, None,
        "Storage type of the general-purpose NAS file system the stack creates (Capacity, Performance, Premium), in "
        "zone; unset = Capacity for a new file system (the cheapest per GiB; this job moves megabytes), and for one "
        "the stack already created the type it has (read from the stack's state: a change replaces it, empty)."),
    Key("nas.retainOnDestroy", True, boolean, "false", "boolean",
        "Keep the NAS file system (and its data) when the stack is destroyed."),
    Key("nas.path", "/data", absolute_path, "/data", "string",
        "Directory on the NAS that the PV mounts; the CSI driver creates it when missing and makes it writable "
        "by every uid (mode 1777, not recursive)."),
    Key("nas.mountTargetDomain", None, optional_string, "xxxx.cn-hangzhou.nas.aliyuncs.com", None,
        "Existing NAS mount target: the stack then creates no NAS (without kubeconfig it must be in the "
        "VPC of vpc.id or vswitch.id)."),
    Key("nas.fileSystemId", None, optional_string, "0a1b2c3d4e", None,
        "Existing standard NAS file system (without kubeconfig): the stack creates only its access group, "
        "rule and mount target in the node vSwitch."),
    Key("nfs.server", None, nfs_server, "nfs.example.internal", None,
        "NFS server of persistence.volume.type nfs (host name or IP address)."),
    Key("nfs.path", None, export_path, "/exports/tf-mnist", None,
        "Exported directory that the PV mounts (persistence.volume.type nfs); must be writable by "
        "pods.runAsUser (root squashing off)."),
    Key("hostPath.path", "/var/lib/tf-mnist", absolute_path, "/var/lib/tf-mnist", "string",
        "Directory on the node that backs the PV (persistence.volume.type hostPath); must be writable by "
        "pods.runAsUser (created root-owned, mode 0755, when missing: the staging Job then fails and says how "
        "to fix it)."),
)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


def project_config_schema() -> dict[str, dict[str, Any]]:
    """The ``config:`` section of Pulumi.yaml, derived from KEYS (tests keep the file equal).

    Only keys the schema can express (string, integer, boolean) are declared, each with its
    default: a declared key without one is *required* by the CLI.
    """
    return {k.name: {"type": k.schema_type, "description": k.description, "default": k.default}
            for k in KEYS if k.schema_type is not None}


def config_table_markdown() -> str:
    """The configuration reference as a Markdown table, one row per key of KEYS in table order.

    Columns: the key, its value type (``Key.value_type``), its default (``unset`` for None;
    lists and maps as JSON) and its description. A description's Markdown characters
    (``\\ * < > |``) are escaped, so that ``<imageRegistry>`` shows as written; key and default
    are code spans, where only ``|`` needs it (GitHub splits table cells there even in code).

    Returns:
        The table's lines, each ending in a newline: the header, the rule, then the keys.
    """
    lines = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for key in KEYS:
        default = "unset" if key.default is None else _code(_default_text(key.default))
        lines.append(f"| {_code(key.name)} | {key.value_type} | {default} | {_text(key.description)} |")
    return "".join(f"{line}\n" for line in lines)


def _default_text(value: Any) -> str:
    """A default as a user writes it: true/false, a JSON list or map, or the text itself."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list, dict)):
        return json.dumps(list(value) if isinstance(value, tuple) else value, separators=(",", ":"))
    return str(value)


def _code(text: str) -> str:
    """``text`` as a Markdown code span inside a table cell."""
    return "`" + text.replace("|", "\\|") + "`"


#: Characters that Markdown, or a GitHub table cell, takes as markup in running text.
_MARKUP = re.compile(r"([\\*<>|])")


def _text(text: str) -> str:
    """``text`` as plain Markdown text: its markup characters escaped."""
    return _MARKUP.sub(r"\\\1", text)
