"""The chart's keys, with the chart's (GPU example) values: the training tasks (worker, ps,
chief), the recipe's hyperparameters, TensorBoard and the network policy, the volume's mount
and the pods' identity, the data and the persistent volume.

The first part of the key table; infra/settings/keys.py joins the parts into ``KEYS``.
"""

from __future__ import annotations

from infra.settings.cloud_parsers import optional_choice
from infra.settings.key import Key, recipe_key
from infra.settings.key_values import (
    ADDRESS_TYPES,
    DEFAULT_REGISTRY,
    MAX_GPUS_PER_INSTANCE,
    MAX_PS,
    MAX_WORKERS,
    POD_ID,
    PULL_POLICIES,
    SERVICE_TYPES,
    TENSORBOARD_TAG,
    TRAINER_CPU_TAG,
    TRAINER_GPU_TAG,
    VOLUME_TYPES,
)
from infra.settings.label_parsers import label_map, node_selector, tolerations
from infra.settings.parsers import (
    absolute_path,
    boolean,
    cidr_list,
    data_source,
    image_reference,
    integer,
    one_of,
    pod_gid,
    pod_uid,
    quantity,
)
from trainer.contract import recipe

CHART_KEYS: tuple[Key, ...] = (
    Key(
        "worker.number",
        2,
        integer(1, MAX_WORKERS),
        f"Number of worker tasks (1 to {MAX_WORKERS}; each GPU worker is a GPU node).",
    ),
    Key(
        "worker.gpuCount",
        1,
        integer(0, MAX_GPUS_PER_INSTANCE),
        "GPUs per worker, and per chief with ps.number 0 (nvidia.com/gpu; 0 to "
        f"{MAX_GPUS_PER_INSTANCE}, the GPUs of one node); 0 runs them on the CPU node pool.",
    ),
    Key(
        "worker.image",
        None,
        image_reference,
        "Your own worker image; unset = <imageRegistry>/trainer:2.21.0-gpu (-cpu when gpuCount is 0) with "
        "imageRegistry set, else baseImage with the GPU (or CPU) packages.",
        fix=f"{DEFAULT_REGISTRY}/{TRAINER_GPU_TAG}",
    ),
    Key(
        "worker.imagePullPolicy",
        None,
        optional_choice(PULL_POLICIES),
        "Worker image pull policy; unset = `pulumi up` resolves a tag to its digest and every pod pulls that "
        "IfNotPresent. Set, a tag is not resolved: Always follows it, IfNotPresent or Never for preloaded nodes.",
        fix="Always",
    ),
    Key("worker.port", 8000, integer(1, 65535), "gRPC port of worker and chief tasks."),
    Key("worker.cpu", "2", quantity, "CPU request of each worker."),
    Key("worker.memory", "8Gi", quantity, "Memory request and limit of each worker."),
    Key(
        "worker.nodeSelector",
        {},
        node_selector,
        "Node labels the workers must run on (pod nodeSelector; also the chief's when it trains on GPUs, "
        "ps.number 0 with worker.gpuCount > 0); empty = any node.",
        fix="'{}'",
    ),
    Key(
        "worker.tolerations",
        (),
        tolerations,
        "Extra tolerations of the workers (and of a GPU chief); GPU pods tolerate the GPU pool's taint anyway.",
        fix="'[]'",
    ),
    Key(
        "ps.number",
        2,
        integer(0, MAX_PS),
        f"Number of parameter servers (0 to {MAX_PS}); 0 trains the workers synchronously.",
    ),
    Key(
        "ps.image",
        None,
        image_reference,
        "Your own CPU trainer image for ps, chief and data staging; unset = <imageRegistry>/trainer:2.21.0-cpu "
        "with imageRegistry set, else baseImage with the CPU packages.",
        fix=f"{DEFAULT_REGISTRY}/{TRAINER_CPU_TAG}",
    ),
    Key(
        "ps.imagePullPolicy",
        None,
        optional_choice(PULL_POLICIES),
        "Pull policy of ps, chief, staging, monitor, TensorBoard and the setup Job; unset = `pulumi up` resolves a "
        "tag to its digest, pulled IfNotPresent. Set, a tag is not resolved (as worker.imagePullPolicy).",
        fix="Always",
    ),
    Key("ps.port", 9000, integer(1, 65535), "gRPC port of ps tasks."),
    Key("ps.cpu", "1", quantity, "CPU request of each ps and the chief."),
    Key("ps.memory", "2Gi", quantity, "Memory request and limit of each ps and the chief."),
    Key(
        "ps.nodeSelector",
        {},
        node_selector,
        "Node labels the ps tasks must run on (pod nodeSelector); empty = any node.",
        fix="'{}'",
    ),
    Key(
        "ps.tolerations",
        (),
        tolerations,
        "Extra tolerations of the ps tasks (pod tolerations), e.g. for a dedicated, tainted node pool.",
        fix="'[]'",
    ),
    Key(
        "chief.nodeSelector",
        {},
        node_selector,
        "Node labels the chief and the data-staging Job must run on (a GPU chief, ps.number 0 with "
        "worker.gpuCount > 0, takes worker.nodeSelector instead); empty = any node.",
        fix="'{}'",
    ),
    Key(
        "chief.tolerations",
        (),
        tolerations,
        "Extra tolerations of the chief and the data-staging Job (a GPU chief takes worker.tolerations).",
        fix="'[]'",
    ),
    # The recipe: one key per row of trainer/contract/recipe.py's table, which says why each default.
    *(recipe_key(row) for row in recipe.HYPERPARAMETERS),
    Key(
        "tensorboard.image",
        None,
        image_reference,
        "Your own TensorBoard image; unset = <imageRegistry>/tensorboard:2.21.0 with imageRegistry set, else "
        "baseImage with TensorBoard's packages.",
        fix=f"{DEFAULT_REGISTRY}/{TENSORBOARD_TAG}",
    ),
    Key(
        "tensorboard.serviceType",
        "ClusterIP",
        one_of(SERVICE_TYPES),
        "TensorBoard Service type: ClusterIP (private; kubectl port-forward), NodePort or LoadBalancer "
        "(an internet one, and with kubeconfig any one, needs tensorboard.allowedSourceRanges).",
    ),
    Key(
        "tensorboard.addressType",
        "internet",
        one_of(ADDRESS_TYPES),
        "ACK load balancer address type (internet or intranet): an annotation only ACK reads, so with "
        "kubeconfig a LoadBalancer needs tensorboard.allowedSourceRanges either way.",
        fix="intranet",
    ),
    Key(
        "tensorboard.allowedSourceRanges",
        (),
        cidr_list,
        "Source CIDRs allowed to reach TensorBoard's load balancer (loadBalancerSourceRanges, and an ACK "
        "ACL when the stack creates the cluster); required with an internet LoadBalancer and with kubeconfig; "
        "together at most one /8 of public IPv4 addresses (private ranges do not count).",
        fix="203.0.113.0/24",
        fix_key="--path 'tensorboard.allowedSourceRanges[0]'",
    ),
    Key(
        "networkPolicy.enabled",
        True,
        boolean,
        "Create the run's NetworkPolicies: its tasks' gRPC ports admit only its own tasks, TensorBoard only "
        "what tensorboard.serviceType exposes, and each pod opens only DNS and what it needs (its peers, "
        "data.source, the API server) (enforced by NetworkPolicy-capable network plugins: on ACK "
        "Terway, not Flannel).",
        fix="false",
    ),
    Key(
        "tensorboard.nodeSelector",
        {},
        node_selector,
        "Node labels TensorBoard must run on (pod nodeSelector); empty = any node.",
        fix="'{}'",
    ),
    Key(
        "tensorboard.tolerations",
        (),
        tolerations,
        "Extra tolerations of TensorBoard (pod tolerations), e.g. for a dedicated, tainted node pool.",
        fix="'[]'",
    ),
    Key("mountPath", "/data", absolute_path, "Where the shared volume is mounted in every pod."),
    # A NAS volume is made writable for any uid (the PV's mode, infra/components/storage.py); an
    # NFS export or a node directory the stack cannot change, so the pods run as its owner instead.
    Key(
        "pods.runAsUser",
        POD_ID,
        pod_uid,
        'uid the staging, training and TensorBoard pods run as (not 0: Pod Security "restricted"); the '
        "volume's directory must be writable by it: set it to the owner of an NFS export or hostPath directory.",
    ),
    Key(
        "pods.runAsGroup",
        POD_ID,
        pod_gid,
        "gid (and fsGroup) those pods run as: the group of the volume's directory with pods.runAsUser.",
    ),
    Key(
        "data.source",
        None,
        data_source,
        "Where the staging Job gets MNIST: URL of mnist.npz or of a directory of the four IDX files, a "
        "directory on the volume (under mountPath) or in the image, or a list of the files' URLs "
        "(checksums verified); a new source stages into a new directory and starts a new run (a presigned URL "
        "signed again is the same source); a URL with more than scheme, host, port and path (user info, a query "
        "such as a presigned URL's signature or a token, a fragment) must be set with --secret; default: the "
        "10,000-digit sample the trainer bundles.",
        fix="https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz",
    ),
    # 600 s: a node's start and a first pull of the CPU trainer image; at most the whole staging's
    # 1200 s (infra/components/staging.py STAGING_TIMEOUT_SECONDS), which bounds a running download.
    Key(
        "data.startTimeoutSeconds",
        600,
        integer(10, 1200),
        "Seconds the staging pod (and the setup Job's) may take to start (be scheduled, pull its image, mount the "
        "volume) before its Job fails (activeDeadlineSeconds) and `pulumi up` with it; the run monitor counts them "
        "from the pod's last step while it progresses (a slow first pull: up to 4 times as long) and lifts the "
        "bound once the pod runs.",
    ),
    Key("persistence.pvc.storage", "5Gi", quantity, "PV capacity and PVC request."),
    Key(
        "persistence.pvc.matchLabels",
        {"train": "mnist"},
        label_map,
        "Labels on the PV that the PVC selects.",
        fix="mnist",
        fix_key="--path persistence.pvc.matchLabels.train",
    ),
    Key(
        "persistence.volume.type",
        "nas",
        one_of(VOLUME_TYPES),
        "Where the PV lives: nas (Alibaba NAS through CSI), nfs (an NFS server: nfs.server, nfs.path) or "
        "hostPath (a directory on a single-node cluster: hostPath.path; with kubeconfig only).",
    ),
)
