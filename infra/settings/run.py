"""The sections of the run's keys: the training tasks, TensorBoard and the network policy, the
pods' identity, the data and the volume, the registry login, the Jobs and the run monitor.

Each field is one key (infra/settings/keys.py ``key``); infra/settings/config.py places the
sections, and with them the keys' order in Pulumi.yaml and docs/configuration.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.settings.constants import (
    ADDRESS_TYPES,
    DEFAULT_REGISTRY,
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
from infra.settings.keys import key
from infra.values.alicloud import optional_choice
from infra.values.gpu_families import MAX_GPUS_PER_INSTANCE
from infra.values.labels import label_map, node_selector, tolerations
from infra.values.parsers import (
    boolean,
    cidr_list,
    data_source,
    dns_subdomain,
    https_url,
    image_reference,
    integer,
    one_of,
    optional,
    optional_string,
    pod_gid,
    pod_uid,
    quantity,
    registry_host,
)

#: The placement keys' descriptions of a role with no rule of its own: ``format(<who>)``.
ON_NODES = "Node labels {} must run on (pod nodeSelector); empty = any node."
DEDICATED_POOL = "Extra tolerations of {} (pod tolerations), e.g. for a dedicated, tainted node pool."


def selector(description: str) -> Any:
    """A role's nodeSelector key (node label -> value; empty = any node), fixed to empty."""
    return key({}, node_selector, description, fix="'{}'")


def tolerated(description: str) -> Any:
    """A role's extra tolerations key (core/v1 Toleration objects), fixed to none."""
    return key((), tolerations, description, fix="'[]'")


def own_image(tag: str, description: str) -> Any:
    """A role's image-of-your-own key, unset by default; the fix names ``tag`` in the example registry."""
    return key(None, image_reference, description, fix=f"{DEFAULT_REGISTRY}/{tag}")


def pull_policy(description: str) -> Any:
    """A role's imagePullPolicy key: unset (`pulumi up` pins digests), or one of PULL_POLICIES."""
    return key(None, optional_choice(PULL_POLICIES), description, fix="Always")


@dataclass(frozen=True)
class Worker:
    """The worker tasks (worker.*): how many, their image, resources and placement."""

    number: int = key(
        2,
        integer(1, MAX_WORKERS),
        f"Number of worker tasks (1 to {MAX_WORKERS}; each GPU worker is a GPU node).",
    )
    gpu_count: int = key(
        1,
        integer(0, MAX_GPUS_PER_INSTANCE),
        "GPUs per worker, and per chief with ps.number 0 (nvidia.com/gpu; 0 to "
        f"{MAX_GPUS_PER_INSTANCE}, the GPUs of one node); 0 runs them on the CPU node pool.",
    )
    image: str | None = own_image(
        TRAINER_GPU_TAG,
        "Your own worker image; unset = <imageRegistry>/trainer:2.21.0-gpu (-cpu when gpuCount is 0) with "
        "imageRegistry set, else baseImage with the GPU (or CPU) packages.",
    )
    image_pull_policy: str | None = pull_policy(
        "Worker image pull policy; unset = `pulumi up` resolves a tag to its digest and every pod pulls that "
        "IfNotPresent. Set, a tag is not resolved: Always follows it, IfNotPresent or Never for preloaded nodes."
    )
    port: int = key(8000, integer(1, 65535), "gRPC port of worker and chief tasks.")
    cpu: str = key("2", quantity, "CPU request of each worker.")
    memory: str = key("8Gi", quantity, "Memory request and limit of each worker.")
    node_selector: Mapping[str, str] = selector(
        "Node labels the workers must run on (pod nodeSelector; also the chief's when it trains on GPUs, "
        "ps.number 0 with worker.gpuCount > 0); empty = any node."
    )
    tolerations: tuple[Mapping[str, Any], ...] = tolerated(
        "Extra tolerations of the workers (and of a GPU chief); GPU pods tolerate the GPU pool's taint anyway."
    )


@dataclass(frozen=True)
class Ps:
    """The parameter servers (ps.*), whose image and resources the chief and the staging Job share."""

    number: int = key(
        2,
        integer(0, MAX_PS),
        f"Number of parameter servers (0 to {MAX_PS}); 0 trains the workers synchronously.",
    )
    image: str | None = own_image(
        TRAINER_CPU_TAG,
        "Your own CPU trainer image for ps, chief and data staging; unset = <imageRegistry>/trainer:2.21.0-cpu "
        "with imageRegistry set, else baseImage with the CPU packages.",
    )
    image_pull_policy: str | None = pull_policy(
        "Pull policy of ps, chief, staging, monitor, TensorBoard and the setup Job; unset = `pulumi up` resolves a "
        "tag to its digest, pulled IfNotPresent. Set, a tag is not resolved (as worker.imagePullPolicy)."
    )
    port: int = key(9000, integer(1, 65535), "gRPC port of ps tasks.")
    cpu: str = key("1", quantity, "CPU request of each ps and the chief.")
    memory: str = key("2Gi", quantity, "Memory request and limit of each ps and the chief.")
    node_selector: Mapping[str, str] = selector(ON_NODES.format("the ps tasks"))
    tolerations: tuple[Mapping[str, Any], ...] = tolerated(DEDICATED_POOL.format("the ps tasks"))


@dataclass(frozen=True)
class Chief:
    """Where the chief and the data-staging Job run (chief.*)."""

    node_selector: Mapping[str, str] = selector(
        "Node labels the chief and the data-staging Job must run on (a GPU chief, ps.number 0 with "
        "worker.gpuCount > 0, takes worker.nodeSelector instead); empty = any node."
    )
    tolerations: tuple[Mapping[str, Any], ...] = tolerated(
        "Extra tolerations of the chief and the data-staging Job (a GPU chief takes worker.tolerations)."
    )


@dataclass(frozen=True)
class TensorBoard:
    """TensorBoard, its Service and placement (tensorboard.*)."""

    image: str | None = own_image(
        TENSORBOARD_TAG,
        "Your own TensorBoard image; unset = <imageRegistry>/tensorboard:2.21.0 with imageRegistry set, else "
        "baseImage with TensorBoard's packages.",
    )
    service_type: str = key(
        "ClusterIP",
        one_of(SERVICE_TYPES),
        "TensorBoard Service type: ClusterIP (private; kubectl port-forward), NodePort or LoadBalancer "
        "(an internet one, and with kubeconfig any one, needs tensorboard.allowedSourceRanges).",
    )
    address_type: str = key(
        "internet",
        one_of(ADDRESS_TYPES),
        "ACK load balancer address type (internet or intranet): an annotation only ACK reads, so with "
        "kubeconfig a LoadBalancer needs tensorboard.allowedSourceRanges either way.",
        fix="intranet",
    )
    allowed_source_ranges: tuple[str, ...] = key(
        (),
        cidr_list,
        "Source CIDRs allowed to reach TensorBoard's load balancer (loadBalancerSourceRanges, and an ACK "
        "ACL when the stack creates the cluster); required with an internet LoadBalancer and with kubeconfig; "
        "together at most one /8 of public IPv4 addresses (private ranges do not count).",
        fix="203.0.113.0/24",
        fix_key="--path 'tensorboard.allowedSourceRanges[0]'",
    )
    node_selector: Mapping[str, str] = selector(ON_NODES.format("TensorBoard"))
    tolerations: tuple[Mapping[str, Any], ...] = tolerated(DEDICATED_POOL.format("TensorBoard"))


@dataclass(frozen=True)
class NetworkPolicy:
    """The run's NetworkPolicies (networkPolicy.*)."""

    enabled: bool = key(
        True,
        boolean,
        "Create the run's NetworkPolicies: its tasks' gRPC ports admit only its own tasks, TensorBoard only "
        "what tensorboard.serviceType exposes, and each pod opens only DNS and what it needs (its peers, "
        "data.source, the API server) (enforced by NetworkPolicy-capable network plugins: on ACK "
        "Terway, not Flannel).",
        fix="false",
    )


@dataclass(frozen=True)
class Scheduling:
    """How the scheduler places the run's task pods (scheduling.*)."""

    gang: bool = key(
        False,
        boolean,
        "Gang-schedule the task pods (chief, workers, ps) with ACK Pro's pod-group labels: the scheduler "
        "binds none of them until it can place all of them; a gang that never fits stays Pending until "
        "job.scheduleTimeoutSeconds fails the run. Other schedulers ignore the labels.",
        fix="true",
    )


@dataclass(frozen=True)
class PodIdentity:
    """The uid and gid of the pods that mount the volume (pods.*): the staging Job, the task
    Jobs and TensorBoard. Their fsGroup is ``run_as_group`` too, which NFS, hostPath and the
    NAS CSI driver (no fsGroupPolicy) ignore: the volume's directory must be writable by
    ``run_as_user`` itself (see infra/components/storage.py for what the stack does)."""

    # A NAS volume is made writable for any uid (the PV's mode, infra/components/storage.py); an
    # NFS export or a node directory the stack cannot change, so the pods run as its owner instead.
    run_as_user: int = key(
        POD_ID,
        pod_uid,
        'uid the staging, training and TensorBoard pods run as (not 0: Pod Security "restricted"); the '
        "volume's directory must be writable by it: set it to the owner of an NFS export or hostPath directory.",
    )
    run_as_group: int = key(
        POD_ID,
        pod_gid,
        "gid (and fsGroup) those pods run as: the group of the volume's directory with pods.runAsUser.",
    )


@dataclass(frozen=True)
class Data:
    """The data set the staging Job puts on the volume (data.*)."""

    source: str | tuple[str, ...] | None = key(
        None,
        data_source,
        "Where the staging Job gets MNIST: URL of mnist.npz or of a directory of the four IDX files, a "
        "directory on the volume (under mountPath) or in the image, or a list of the files' URLs "
        "(checksums verified); a new source stages into a new directory and starts a new run (a presigned URL "
        "signed again is the same source); a URL with more than scheme, host, port and path (user info, a query "
        "such as a presigned URL's signature or a token, a fragment) must be set with --secret; default: the "
        "10,000-digit sample the trainer bundles.",
        fix="https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz",
        secret=True,
    )
    # 600 s: a node's start and a first pull of the CPU trainer image; at most the whole staging's
    # 1200 s (infra/components/staging.py STAGING_TIMEOUT_SECONDS), which bounds a running download.
    start_timeout_seconds: int = key(
        600,
        integer(10, 1200),
        "Seconds the staging pod (and the setup Job's) may take to start (be scheduled, pull its image, mount the "
        "volume) before its Job fails (activeDeadlineSeconds) and `pulumi up` with it; the run monitor counts them "
        "from the pod's last step while it progresses (a slow first pull: up to 4 times as long) and lifts the "
        "bound once the pod runs.",
    )


@dataclass(frozen=True)
class Pvc:
    """The PV and its claim (persistence.pvc.*)."""

    storage: str = key("5Gi", quantity, "PV capacity and PVC request.")
    match_labels: Mapping[str, str] = key(
        {"train": "mnist"},
        label_map,
        "Labels on the PV that the PVC selects.",
        fix="mnist",
        fix_key="--path persistence.pvc.matchLabels.train",
    )


@dataclass(frozen=True)
class Volume:
    """Where the PV lives (persistence.volume.*)."""

    type: str = key(
        "nas",
        one_of(VOLUME_TYPES),
        "Where the PV lives: nas (Alibaba NAS through CSI), nfs (an NFS server: nfs.server, nfs.path) or "
        "hostPath (a directory on a single-node cluster: hostPath.path; with kubeconfig only).",
    )


@dataclass(frozen=True, repr=False)
class RegistryLogin:
    """Login for the pull Secret the stack creates (registryCredentials.*); never printed."""

    server: str | None = key(
        None,
        registry_host,
        "Registry the created pull Secret logs in to; default the host of imageRegistry.",
        fix="registry.cn-hangzhou.aliyuncs.com",
        secret=True,
    )
    username: str | None = key(
        None,
        optional_string,
        "Registry user name for the pull Secret the stack creates (with registryCredentials.password).",
        fix="<username>",
        secret=True,
    )
    password: str | None = key(
        None,
        optional_string,
        "Registry password for the pull Secret the stack creates; set it with --secret.",
        fix="<password>",
        secret=True,
    )


@dataclass(frozen=True)
class Job:
    """The training Jobs' retries, waits and deadlines (job.*)."""

    backoff_limit: int = key(4, integer(0), "Pod retries of each task's Job.")
    wait_for_chief: bool = key(
        False,
        boolean,
        "Make `pulumi up` wait until the chief's Job ends; a chief that fails for good fails `up` with its reason.",
        fix="true",
    )
    wait_timeout_minutes: int = key(
        180, integer(1), "How long `pulumi up` waits for the chief when job.waitForChief is true."
    )
    active_deadline_seconds: int | None = key(
        None,
        optional(integer(1)),
        "Seconds each training Job may run before Kubernetes fails it (activeDeadlineSeconds); unset = no limit.",
        fix="86400",
    )
    # 60 s at least: the chief beats every 5 s, but NFS attribute caching (acregmax, 60 s by
    # default) can show a server a heartbeat that old, and a pod restart takes longer anyway.
    peer_timeout_seconds: int = key(
        600,
        integer(60),
        "Seconds a task waits for a lost peer or the chief before exiting non-zero (trainer --peer_timeout).",
    )
    priority_class_name: str | None = key(
        None,
        dns_subdomain,
        "PriorityClass of the training and data-staging pods; unset = the cluster's default.",
        fix="high-priority",
    )
    # 1800 s: twice cluster-autoscaler's --max-node-provision-time (15 minutes by default, also
    # on ACK), after which the autoscaler has either brought a GPU node up from zero or given up
    # on that node group; a first pull of the GPU image comes after scheduling, so it is not counted.
    schedule_timeout_seconds: int = key(
        1800,
        integer(0),
        "Seconds a task pod may stay unschedulable before the run monitor fails the run with the scheduler's "
        "message; 0 = wait for ever.",
    )
    # 900 s of no progress: a pull that fails (ImagePullBackOff), a missing Secret or ConfigMap
    # (CreateContainerConfigError) or a volume that does not mount (ContainerCreating) does not
    # mend by waiting, and would hold its node (a GPU) until the Job's deadline. A pull in flight
    # is progress (containerd cancels one that reads nothing for 5 min), so a slow first pull of
    # the GPU image is not cut at 900 s; it gets 4 times as long (infra/pod_progress.py).
    start_timeout_seconds: int = key(
        900,
        integer(0),
        "Seconds a scheduled task pod may stay unstarted without progress (no step since: its scheduling, an image "
        "pull begun or ended, a container created or started, in the kubelet's Events) before the run monitor fails "
        "the run with the container's reason; one image pull in flight may take 4 times as long; 0 = wait for ever.",
    )


@dataclass(frozen=True)
class Monitor:
    """How the run monitor reaches the API server (monitor.*)."""

    api_server: str | None = key(
        None,
        https_url,
        "API server URL the run monitor calls, for clusters whose pods cannot reach the kubernetes Service "
        "(no kube-proxy, as on tools/local-cluster); unset = the in-cluster address.",
        fix="https://10.244.0.1:6443",
    )
    # The port after the Service's translation: a NetworkPolicy sees a connection to the
    # kubernetes Service (443) arrive at its endpoint (6443 on ACK and kubeadm), and drops it
    # unless that port is open (infra/monitor_egress.py).
    api_server_port: int | None = key(
        None,
        optional(integer(1, 65535)),
        "TCP port the run monitor's NetworkPolicy lets it open to the API server: the port the server is "
        "reached on after any Service translation (its endpoints' port); unset = monitor.apiServer's port, else "
        "the kubernetes Service's endpoint port read from the cluster (kubeconfig; 443 and 6443 when unreadable), "
        "else 6443 (ACK's).",
        fix="6443",
    )
