"""The named values of the key table: the project and its own namespace, the pods' uid, the
images built from docker/, and the choices and bounds of the stack's own keys, with where each
comes from. The policy pack (policy/rules.py) holds manifests to the same bounds. What Alibaba
Cloud offers lives with its grammars (infra/values/alicloud.py, infra/values/gpu_families.py),
the cloud resources' defaults with the state that overrides them (infra/deployed.py), the base
image and package index with the package sets (infra/bundle.py)."""

from __future__ import annotations

PROJECT = "tf-mnist"
DEFAULT_NAMESPACE = PROJECT  # a stack's own namespace, which it creates while createNamespace is unset
POD_ID = 10001  # the pods' uid and gid and docker/*.Dockerfile's USER: > 10000 (CKV_K8S_40, kube-score)

#: Where the images built from docker/ are pushed in the examples (imageRegistry has no
#: default: unset, the pods run the base image); those images are ``<registry>/<name>:<tag>``.
DEFAULT_REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
TRAINER_GPU_TAG = "trainer:2.21.0-gpu"
TRAINER_CPU_TAG = "trainer:2.21.0-cpu"
TENSORBOARD_TAG = "tensorboard:2.21.0"

#: When the stack asks NAS whether the zone offers the storage type of the file system it creates
#: (nas.zoneCheck; infra/nas_zones.py): at `pulumi up` only (an offline preview has no endpoint to
#: ask), at every preview too, or never.
NAS_ZONE_CHECKS = ("up", "always", "off")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
ADDRESS_TYPES = ("internet", "intranet")
#: Where the PV lives (persistence.volume.type): NAS through Alibaba's CSI driver, a plain
#: NFS server (in-tree nfs volume), or a directory of the node (single-node clusters).
VOLUME_TYPES = ("nas", "nfs", "hostPath")
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
