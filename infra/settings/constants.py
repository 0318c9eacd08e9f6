"""The named values of the key table: the project and its own namespace, the pods' uid, the
default images, and each key's choices, bounds and defaults for new cloud resources, with
where each comes from. The policy pack (policy/rules.py) holds manifests to the same bounds."""

from __future__ import annotations

PROJECT = "tf-mnist"
DEFAULT_NAMESPACE = PROJECT  # a stack's own namespace, which it creates while createNamespace is unset
POD_ID = 10001  # the pods' uid and gid and docker/*.Dockerfile's USER: > 10000 (CKV_K8S_40, kube-score)

#: Where the images built from docker/ are pushed in the examples (imageRegistry has no
#: default: unset, the pods run BASE_IMAGES); those images are ``<registry>/<name>:<tag>``.
DEFAULT_REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
#: The public Python 3.11 image the pods run without images of your own (baseImage unset), by
#: region (``alicloud:region``): the code comes from ConfigMaps and the packages from the
#: shared volume (infra/components/setup.py), so it holds neither.
#: - elsewhere (and with no region): Docker Hub's official python:3.11-slim, by the digest of its
#:   multi-arch index. Not resolved here (no registry was reachable where this was written): the
#:   digest is the one public repositories' lock records give for python:3.11-slim, also
#:   tagged 3.11.16-slim-trixie (Python 3.11.16 on Debian trixie) when it was pinned.
#:   Check it with `skopeo inspect docker://python:3.11-slim` before relying on it.
#: - cn-* regions: Alibaba Cloud Linux 3's public Python 3.11 image, on a registry in mainland
#:   China (Docker Hub is slow or out of reach from there). By TAG, not digest: no digest of it
#:   could be looked up where this was written and none is invented; `pulumi up` resolves the
#:   tag to its digest, which every pod runs (infra/image_pins.py). baseImage <image>@sha256:...
#:   pins one for good.
PYTHON_SLIM_IMAGE = "python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7"
ALINUX_PYTHON_IMAGE = "alibaba-cloud-linux-3-registry.cn-hangzhou.cr.aliyuncs.com/alinux3/python:3.11.1"
#: The package index the setup Job installs from (packageIndex unset), by region: PyPI, or in
#: cn-* regions Alibaba Cloud's public PyPI mirror (PyPI is slow or out of reach from mainland
#: China). pip's --require-hashes checks every wheel against its pinned sha256, so a mirror can
#: only fail an install, never change what is installed.
PYPI_INDEX = "https://pypi.org/simple/"
ALIYUN_PYPI_MIRROR = "https://mirrors.aliyun.com/pypi/simple/"


def regional_runtime(region: str | None) -> tuple[str, str]:
    """``(base image, package index)`` for ``region`` (alicloud:region; None without one)."""
    if region is not None and region.startswith("cn-"):
        return ALINUX_PYTHON_IMAGE, ALIYUN_PYPI_MIRROR
    return PYTHON_SLIM_IMAGE, PYPI_INDEX


TRAINER_GPU_TAG = "trainer:2.21.0-gpu"
TRAINER_CPU_TAG = "trainer:2.21.0-cpu"
TENSORBOARD_TAG = "tensorboard:2.21.0"

#: ACK network plugins (cluster.networkPlugin): only Terway enforces Kubernetes NetworkPolicy.
NETWORK_PLUGINS = ("flannel", "terway")
#: The plugin of a cluster the stack creates while cluster.networkPlugin is unset: Terway, which
#: enforces the stack's NetworkPolicies. A cluster the stack already created keeps the plugin its
#: state records instead (infra/deployed.py): ACK cannot change the plugin of a cluster,
#: and pod_cidr is ForceNew (terraform-provider-alicloud cs_managed_kubernetes), so a new default
#: must not reach a stack deployed with the old one.
NEW_CLUSTER_NETWORK_PLUGIN = "terway"
#: Standard (general-purpose) NAS storage types.
NAS_STORAGE_TYPES = ("Performance", "Capacity", "Premium")
#: The storage type of a NAS file system the stack creates while nas.storageType is unset.
#: Capacity: general-purpose NAS bills the used GiB by the hour and Capacity has the lowest
#: price per GiB (Alibaba's billing example; Performance and Premium cost more per GiB for lower
#: latency), while this job moves megabytes (the data set staged once, checkpoints and event
#: files), far below what any of them
#: serves. Extreme NAS is no candidate: it bills a provisioned capacity whether used or not and
#: mounts over NFSv3 only. A file system the stack already created keeps its type (its state
#: says which; storage_type is ForceNew, and a new file system would start empty).
NEW_NAS_STORAGE_TYPE = "Capacity"
#: When the stack asks NAS whether the zone offers the storage type of the file system it creates
#: (nas.zoneCheck; infra/nas_zones.py): at `pulumi up` only (an offline preview has no endpoint to
#: ask), at every preview too, or never.
NAS_ZONE_CHECKS = ("up", "always", "off")
#: The GPU pool's instance types, tried in order for each node (ACK node pools: "it will try to
#: purchase from the first specification until it is created successfully"). Every one has one
#: GPU (so gpuPool.gpusPerInstance 1 holds whichever comes), takes the ultra disk
#: (gpuPool.systemDiskCategory cloud_efficiency; gn7i and newer take ESSD only, GN5 no ESSD) and
#: runs the pinned driver branch R550 (GPU_DRIVER_VERSION). GN5 (P100) stays first because the
#: guide names it and measured its numbers on it; it is an outdated family that is often sold out
#: or no longer offered in a zone, and then the pool takes the next type instead of failing after
#: the network, cluster, CPU pool and NAS exist: T4 (gn6i: 4 vCPU and 15 GiB hold a worker's
#: 2 CPU and 8 GiB), then a larger T4, then V100 (gn6v). Put a current type first to prefer it.
DEFAULT_GPU_INSTANCE_TYPES = (
    "ecs.gn5-c4g1.xlarge",
    "ecs.gn6i-c4g1.xlarge",
    "ecs.gn6i-c8g1.2xlarge",
    "ecs.gn6v-c8g1.2xlarge",
)
#: The NVIDIA driver of new GPU nodes, pinned with ACK's node pool label
#: ``ack.aliyun.com/nvidia-driver-version``: without it ACK installs its current default, which
#: ACK changes over time and which could one day be a branch after R580, the last to support
#: GN5's P100 (and gn6v's V100). R550 is
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
#: The most nodes a node pool takes (gpuPool.size, cpuPool.size; the policy pack holds every
#: NodePool to it too): each GPU worker is a GPU node, so the largest run the bounds above allow,
#: MAX_WORKERS workers and the chief (a GPU pod too with ps.number 0), one GPU node each, fits;
#: a CPU node holds several pods. ACK's own limit is far above it (a node pool's scaling group
#: takes 0 to 1000 instances: scaling_config.max_size of alicloud cs.NodePool), so this bound is
#: the project's, against a slip such as ``gpuPool.size 200`` that would plan 200 GPU nodes.
MAX_POOL_NODES = MAX_WORKERS + 1
#: The most GPUs of one pod (worker.gpuCount) and of one GPU node (gpuPool.gpusPerInstance): a
#: pod's GPUs come from one node, and no Alibaba Cloud GPU instance type has more than 8 (the
#: largest types of gn5, gn6v, gn6e, gn7 and gn7e, such as ecs.gn5-c8g1.14xlarge with 8 P100 and
#: ecs.gn6v-c10g1.20xlarge with 8 V100; gn6i and gn7i have at most 4), so a larger request
#: would stay Pending on every node (the policy pack holds every container to it too). To go
#: further (a cluster of 16-GPU nodes), raise it.
MAX_GPUS_PER_INSTANCE = 8
