"""The keys of a run's deployment: object names and namespace, the image registry and its pull
credentials, the training Jobs' retries, waits and deadlines, and the run monitor.

The second part of the key table; infra/settings/keys.py joins the parts into ``KEYS``.
"""

from __future__ import annotations

from infra.settings.key import Key
from infra.settings.key_values import DEFAULT_NAMESPACE, DEFAULT_REGISTRY
from infra.settings.parsers import (
    boolean,
    dns_label,
    dns_subdomain,
    https_url,
    image_reference,
    integer,
    namespace,
    optional_boolean,
    optional_port,
    optional_positive_int,
    optional_registry,
    optional_string,
    package_index,
    registry_host,
)

DEPLOYMENT_KEYS: tuple[Key, ...] = (
    Key("namePrefix", "mnist", dns_label, "Prefix of every object name (two stacks can share a namespace)."),
    Key("namespace", DEFAULT_NAMESPACE, namespace, "Kubernetes namespace of the run."),
    Key(
        "createNamespace",
        None,
        optional_boolean,
        f'Create the namespace (Pod Security "restricted"; deleted on destroy); unset = true for {DEFAULT_NAMESPACE}, '
        "false for any other (leave false when it exists or other stacks share it).",
        fix="false",
    ),
    Key(
        "imageRegistry",
        None,
        optional_registry,
        "Registry holding your own trainer and tensorboard images built from docker/; unset = no images of "
        "your own: the pods run baseImage.",
        fix=DEFAULT_REGISTRY,
    ),
    Key(
        "baseImage",
        None,
        image_reference,
        "Public Python 3.11 image the pods run without images of their own (code from ConfigMaps, packages "
        "installed on the volume); unset = by alicloud:region: Alibaba Cloud Linux 3's Python in cn-*, else "
        "python:3.11-slim.",
        fix="python:3.11-slim@sha256:<digest>",
    ),
    Key(
        "packageIndex",
        None,
        package_index,
        "Package index the setup Job installs the hash-pinned packages from; unset = mirrors.aliyun.com's "
        "PyPI mirror in cn-* regions, else PyPI.",
        fix="https://pypi.org/simple/",
    ),
    Key(
        "imagePullSecret",
        None,
        dns_subdomain,
        "docker-registry Secret in the namespace that every pod pulls its image with; with "
        "registryCredentials.* the stack creates it (default name <namePrefix>-registry).",
        fix="acr-pull",
    ),
    Key(
        "registryCredentials.server",
        None,
        registry_host,
        "Registry the created pull Secret logs in to; default the host of imageRegistry.",
        fix="registry.cn-hangzhou.aliyuncs.com",
    ),
    Key(
        "registryCredentials.username",
        None,
        optional_string,
        "Registry user name for the pull Secret the stack creates (with registryCredentials.password).",
        fix="<username>",
    ),
    Key(
        "registryCredentials.password",
        None,
        optional_string,
        "Registry password for the pull Secret the stack creates; set it with --secret.",
        fix="<password>",
    ),
    Key("job.backoffLimit", 4, integer(0), "Pod retries of each task's Job."),
    Key(
        "job.waitForChief",
        False,
        boolean,
        "Make `pulumi up` wait until the chief's Job ends; a chief that fails for good fails `up` with its reason.",
        fix="true",
    ),
    Key(
        "job.waitTimeoutMinutes",
        180,
        integer(1),
        "How long `pulumi up` waits for the chief when job.waitForChief is true.",
    ),
    Key(
        "job.activeDeadlineSeconds",
        None,
        optional_positive_int,
        "Seconds each training Job may run before Kubernetes fails it (activeDeadlineSeconds); unset = no limit.",
        fix="86400",
    ),
    # 60 s at least: the chief beats every 5 s, but NFS attribute caching (acregmax, 60 s by
    # default) can show a server a heartbeat that old, and a pod restart takes longer anyway.
    Key(
        "job.peerTimeoutSeconds",
        600,
        integer(60),
        "Seconds a task waits for a lost peer or the chief before exiting non-zero (trainer --peer_timeout).",
    ),
    Key(
        "job.priorityClassName",
        None,
        dns_subdomain,
        "PriorityClass of the training and data-staging pods; unset = the cluster's default.",
        fix="high-priority",
    ),
    # 1800 s: twice cluster-autoscaler's --max-node-provision-time (15 minutes by default, also
    # on ACK), after which the autoscaler has either brought a GPU node up from zero or given up
    # on that node group; a first pull of the GPU image comes after scheduling, so it is not counted.
    Key(
        "job.scheduleTimeoutSeconds",
        1800,
        integer(0),
        "Seconds a task pod may stay unschedulable before the run monitor fails the run with the scheduler's "
        "message; 0 = wait for ever.",
    ),
    # 900 s of no progress: a pull that fails (ImagePullBackOff), a missing Secret or ConfigMap
    # (CreateContainerConfigError) or a volume that does not mount (ContainerCreating) does not
    # mend by waiting, and would hold its node (a GPU) until the Job's deadline. A pull in flight
    # is progress (containerd cancels one that reads nothing for 5 min), so a slow first pull of
    # the 6.7 GB GPU image is not cut at 900 s; it gets 4 times as long (infra/pod_progress.py).
    Key(
        "job.startTimeoutSeconds",
        900,
        integer(0),
        "Seconds a scheduled task pod may stay unstarted without progress (no step since: its scheduling, an image "
        "pull begun or ended, a container created or started, in the kubelet's Events) before the run monitor fails "
        "the run with the container's reason; one image pull in flight may take 4 times as long; 0 = wait for ever.",
    ),
    Key(
        "monitor.apiServer",
        None,
        https_url,
        "API server URL the run monitor calls, for clusters whose pods cannot reach the kubernetes Service "
        "(no kube-proxy, as on tools/local-cluster); unset = the in-cluster address.",
        fix="https://10.244.0.1:6443",
    ),
    # The port after the Service's translation: a NetworkPolicy sees a connection to the
    # kubernetes Service (443) arrive at its endpoint (6443 on ACK and kubeadm), and drops it
    # unless that port is open (infra/monitor_egress.py).
    Key(
        "monitor.apiServerPort",
        None,
        optional_port,
        "TCP port the run monitor's NetworkPolicy lets it open to the API server: the port the server is "
        "reached on after any Service translation (its endpoints' port); unset = monitor.apiServer's port, else "
        "the kubernetes Service's endpoint port read from the cluster (kubeconfig; 443 and 6443 when unreadable), "
        "else 6443 (ACK's).",
        fix="6443",
    ),
)
