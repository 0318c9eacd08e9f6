"""The platform rules of the policy pack, as plain functions of a resource's properties.

Each rule takes what `pulumi preview` gives a policy (the resource's type, name, URN and input
properties, as the plain dicts and lists of the JSON plan: camelCase keys) and returns one
message per violation, empty when the resource complies. A message names the resource, the
value and the rule, and ends with the ``pulumi config set`` that fixes it where this project's
configuration can. policy/__main__.py wraps each in a mandatory Pulumi policy;
tests/policy/test_rules.py calls them with dicts.

Where the numbers come from: the replica and node pool bounds are the configuration's own upper
bounds (infra/settings/constants.py MAX_WORKERS, MAX_PS, MAX_POOL_NODES; the GPUs of one node,
infra/values/gpu_families.py MAX_GPUS_PER_INSTANCE), the tag keys are the ones every cloud
resource of the stack carries (infra/components/tags.py).
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from infra.components.tags import PROJECT_TAG, STACK_TAG
from infra.settings.constants import MAX_POOL_NODES, MAX_PS, MAX_WORKERS
from infra.source_ranges import too_wide
from infra.values.gpu_families import MAX_GPUS_PER_INSTANCE

SERVICE = "kubernetes:core/v1:Service"
NODE_POOL = "alicloud:cs/nodePool:NodePool"
JOB = "kubernetes:batch/v1:Job"
#: Types whose ``spec.template.spec`` is a pod spec (a CronJob's is one level deeper).
POD_TEMPLATE_TYPES = tuple(
    f"kubernetes:{group}:{kind}"
    for group, kind in (
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "ReplicaSet"),
        ("core/v1", "ReplicationController"),
    )
)
POD = "kubernetes:core/v1:Pod"
CRON_JOB = "kubernetes:batch/v1:CronJob"

#: Service types that publish TensorBoard beyond the cluster.
EXPOSED_SERVICE_TYPES = ("LoadBalancer", "NodePort")
#: ACK's annotation that makes a LoadBalancer Service's CLB private to the VPC.
ADDRESS_TYPE_ANNOTATION = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"
#: Alibaba Cloud's NVIDIA GPU families: gn<generation> (gn5, gn6i, gn7e, ...), and their
#: bare-metal (ebmgn), shared (sgn) and virtual (vgn) forms; ``ecs.gn6i-c4g1.xlarge``.
GPU_INSTANCE_TYPE = re.compile(r"^ecs\.(ebm|s|v)?gn[0-9]")
#: The most Jobs of one run per TensorFlow task type (label tf-replica-type).
MAX_TASKS = {"worker": MAX_WORKERS, "ps": MAX_PS, "chief": 1}
#: The config key that sets each task type's count, for the fix.
TASK_KEYS = {"worker": "worker.number", "ps": "ps.number"}
#: The tags every taggable alicloud resource carries (infra/components/tags.py cloud_tags).
REQUIRED_TAGS = (PROJECT_TAG, STACK_TAG)
#: The config key that sets the image of each component (app.kubernetes.io/component): the
#: CPU image (ps.image) also runs the data staging and the run monitor; the chief runs the
#: worker's image when it trains on a GPU (ps.number 0), else the CPU image; the setup Job runs
#: the base image (baseImage), as every role does whose image key and imageRegistry are unset.
IMAGE_KEYS = {
    "worker": "worker.image",
    "tensorboard": "tensorboard.image",
    "ps": "ps.image",
    "stage-data": "ps.image",
    "monitor": "ps.image",
    "chief": "ps.image (or worker.image with ps.number 0)",
    "setup": "baseImage",
}


def names_a_version(tag: str | None) -> bool:
    """Whether an image tag (image_tag's answer) names a version: a digest, or a tag with a
    digit in it (``2.21.0-gpu``, ``3.11-slim``, ``v1``). A tag without one (none, which
    Kubernetes reads as ``latest``; ``latest``, ``stable``, ``main``, ``edge``, ``nightly``)
    names a channel that its publisher moves, so the image a pod runs changes without the stack
    changing. A versioned tag can still be republished (a patch release under ``3.11-slim``):
    that is why `pulumi up` resolves every tag it pulls to its digest (infra/image_pins.py);
    this rule catches the names that say outright that they move."""
    return tag is not None and (tag.startswith("@") or any(c.isdigit() for c in tag))


def _get(props: Mapping[str, Any] | None, *path: str) -> Any:
    """``props[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _known_int(value: Any) -> int | None:
    """``value`` as an int (an int or a numeric string), or None when it is absent or not a
    number yet (a preview's unknown, a computed string): such a value passes the bound rules."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _object_name(name: str, props: Mapping[str, Any]) -> str:
    """The Kubernetes object's namespace/name when the inputs give it, else the Pulumi name."""
    meta = props.get("metadata") if isinstance(props.get("metadata"), Mapping) else {}
    named = meta.get("name") or name
    return f"{meta['namespace']}/{named}" if meta.get("namespace") else named


def tensorboard_source_ranges(name: str, props: Mapping[str, Any]) -> list[str]:
    """No TensorBoard reachable from the internet without source ranges (TensorBoard has no login).

    Applies to a Service whose labels (``app.kubernetes.io/component``) or name say TensorBoard.
    A NodePort is refused (every node serves it and it takes no source ranges); an internet
    LoadBalancer (anything but ACK's ``intranet`` address type) needs
    ``spec.loadBalancerSourceRanges``; and the ranges of any LoadBalancer, intranet too, must not
    admit the internet: together at most a /8 of public IPv4 and a /32 of public IPv6 addresses
    (infra/source_ranges.py, the rule the settings apply), so neither ``0.0.0.0/0`` nor
    ``0.0.0.0/1`` with ``128.0.0.0/1`` passes. ClusterIP passes.
    """
    labels = _get(props, "metadata", "labels") or {}
    if labels.get("app.kubernetes.io/component") != "tensorboard" and "tensorboard" not in (
        _get(props, "metadata", "name") or name
    ):
        return []
    kind = _get(props, "spec", "type") or "ClusterIP"
    if kind not in EXPOSED_SERVICE_TYPES:
        return []
    service = _object_name(name, props)
    private = "fix: pulumi config set tensorboard.serviceType ClusterIP (then kubectl port-forward)"
    if kind == "NodePort":
        return [
            f"Service {service}: type NodePort publishes TensorBoard on every node's address and takes no "
            f"source ranges; rule: TensorBoard is exposed only with source ranges.\n    {private}"
        ]
    ranges = [str(r) for r in _get(props, "spec", "loadBalancerSourceRanges") or []]
    ranged = "fix: pulumi config set --path 'tensorboard.allowedSourceRanges[0]' <your address>/32"
    why = too_wide(ranges)
    if why is not None:
        return [
            f"Service {service}: loadBalancerSourceRanges {ranges} {why}; rule: TensorBoard's source ranges "
            f"name networks, not the internet.\n    {ranged} (and remove the wide ranges)\n    or {private}"
        ]
    if (_get(props, "metadata", "annotations") or {}).get(ADDRESS_TYPE_ANNOTATION) == "intranet":
        return []
    if not ranges:
        return [
            f"Service {service}: an internet LoadBalancer with no loadBalancerSourceRanges lets anyone reach "
            f"TensorBoard; rule: TensorBoard is exposed only with source ranges.\n    {ranged}\n    or {private}"
        ]
    return []


def is_gpu_instance_type(instance_type: str) -> bool:
    """``ecs.gn6i-c4g1.xlarge`` and the like: an NVIDIA GPU family (GPU_INSTANCE_TYPE)."""
    return bool(GPU_INSTANCE_TYPE.match(instance_type))


def gpu_pool_scales_to_zero(name: str, props: Mapping[str, Any]) -> list[str]:
    """A node pool with a GPU instance type scales down to zero nodes: ``scalingConfig`` enabled
    with ``minSize`` 0 (a GPU node bills by the hour whether a pod uses it or not; the training
    Jobs finish). infra/components/node_pools.py makes this pool with gpuPool.autoscaling."""
    gpu_types = [t for t in props.get("instanceTypes") or [] if is_gpu_instance_type(str(t))]
    if not gpu_types:
        return []
    scaling = props.get("scalingConfig") or {}
    pool = props.get("nodePoolName") or name
    fix = "fix: pulumi config set gpuPool.autoscaling true"
    if not scaling.get("enable"):
        return [
            f"NodePool {pool} ({gpu_types[0]}): no autoscaling (scalingConfig {_shown(scaling)}, desiredSize "
            f"{props.get('desiredSize')!r}) keeps GPU nodes running while no GPU pod needs them; rule: GPU node "
            f"pools scale to zero.\n    {fix}"
        ]
    if scaling.get("minSize") != 0:
        return [
            f"NodePool {pool} ({gpu_types[0]}): scalingConfig.minSize {scaling.get('minSize')!r}; rule: GPU "
            f"node pools scale to zero (minSize 0).\n    {fix}"
        ]
    return []


def _shown(value: Any) -> str:
    return repr(dict(value)) if isinstance(value, Mapping) and value else "unset"


@cache
def alicloud_supports_tags(resource_type: str) -> bool:
    """Whether the pulumi_alicloud SDK's class for ``resource_type`` takes ``tags``.

    ``alicloud:vpc/network:Network`` is ``pulumi_alicloud.vpc.Network``; a type whose module
    or class the SDK lacks counts as untaggable (nothing to check).
    """
    match = re.fullmatch(r"alicloud:([A-Za-z0-9]+)/[^:]*:([A-Za-z0-9]+)", resource_type)
    if not match:
        return False
    module, cls = match.groups()
    try:
        sdk = importlib.import_module("pulumi_alicloud" if module == "index" else f"pulumi_alicloud.{module}")
    except ImportError:
        return False
    return isinstance(getattr(getattr(sdk, cls, None), "tags", None), property)


def stack_and_project(urn: str) -> tuple[str, str]:
    """``("dev", "tf-mnist")`` of ``urn:pulumi:dev::tf-mnist::<type>::<name>``."""
    parts = urn.split("::")
    return parts[0].rsplit(":", 1)[-1], parts[1] if len(parts) > 1 else ""


def alicloud_tags(
    resource_type: str,
    name: str,
    urn: str,
    props: Mapping[str, Any],
    taggable: Callable[[str], bool] = alicloud_supports_tags,
) -> list[str]:
    """Every alicloud resource that takes tags carries ``pulumi:project`` and ``pulumi:stack``,
    with the project and stack of its URN (what a bill or the console is filtered by)."""
    if not resource_type.startswith("alicloud:") or not taggable(resource_type):
        return []
    stack, project = stack_and_project(urn)
    tags = props.get("tags") or {}
    wrong = {
        key: tags.get(key) for key, want in zip(REQUIRED_TAGS, (project, stack)) if tags.get(key) != want
    }
    if not wrong:
        return []
    shown = ", ".join(f"{key}={value!r}" for key, value in wrong.items())
    return [
        f"{resource_type.rsplit(':', 1)[-1]} {name}: tags {shown}; rule: every alicloud resource that takes "
        f"tags carries {PROJECT_TAG}={project!r} and {STACK_TAG}={stack!r}.\n    fix: tag it with "
        "infra.components.tags.cloud_tags() (no configuration sets tags)"
    ]


def node_pool_size_bound(name: str, props: Mapping[str, Any]) -> list[str]:
    """A node pool holds at most MAX_POOL_NODES nodes: ``scalingConfig.maxSize`` (autoscaled) or
    ``desiredSize`` (fixed, a string in the provider's schema)."""
    pool = props.get("nodePoolName") or name
    gpu = any(is_gpu_instance_type(str(t)) for t in props.get("instanceTypes") or [])
    key = "gpuPool.size" if gpu else "cpuPool.size"
    found = []
    for field, value in (
        ("scalingConfig.maxSize", _get(props, "scalingConfig", "maxSize")),
        ("desiredSize", props.get("desiredSize")),
    ):
        size = _known_int(value)
        if size is not None and size > MAX_POOL_NODES:
            found.append(
                f"NodePool {pool}: {field} {size}; rule: a node pool holds at most {MAX_POOL_NODES} "
                f"nodes (MAX_WORKERS {MAX_WORKERS} workers and the chief, a node each).\n"
                f"    fix: pulumi config set {key} {min(size, MAX_POOL_NODES)}"
            )
    return found


def job_count_bound(jobs: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """At most MAX_TASKS Jobs of each TensorFlow task type in one run.

    ``jobs``: ``(name, props)`` of every ``kubernetes:batch/v1:Job`` of the stack. A run is the
    namespace and ``app.kubernetes.io/instance`` label; the task type is the ``tf-replica-type``
    label (Jobs without it are not tasks).
    """
    counts: Counter[tuple[str, str, str]] = Counter()
    for _name, props in jobs:
        labels = _get(props, "metadata", "labels") or {}
        task = labels.get("tf-replica-type")
        if task in MAX_TASKS:
            run = (
                _get(props, "metadata", "namespace") or "default",
                labels.get("app.kubernetes.io/instance") or "",
            )
            counts[(*run, task)] += 1
    found = []
    for (namespace, instance, task), count in sorted(counts.items()):
        if count > MAX_TASKS[task]:
            fix = (
                f"\n    fix: pulumi config set {TASK_KEYS[task]} {MAX_TASKS[task]}"
                if task in TASK_KEYS
                else ""
            )
            found.append(
                f"run {instance or '(unnamed)'} in namespace {namespace}: {count} {task} Jobs; rule: at "
                f"most {MAX_TASKS[task]} {task} Jobs a run (infra/settings/constants.py).{fix}"
            )
    return found


def _pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if resource_type == POD:
        return props.get("spec")
    if resource_type == CRON_JOB:
        return _get(props, "spec", "jobTemplate", "spec", "template", "spec")
    if resource_type in POD_TEMPLATE_TYPES:
        return _get(props, "spec", "template", "spec")
    return None


def image_tag(image: str) -> str | None:
    """The tag of an image reference, None without one. A digest (``@sha256:...``) pins the
    image whatever the tag, and counts as the tag ``@<digest>``; a registry port
    (``localhost:5000/trainer``) is no tag."""
    if "@" in image:
        return image[image.index("@") :]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def pinned_images(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """Every container (and init container) of a pod or pod template names a version (a digest
    or a tag with a digit: names_a_version), not a moving channel such as ``latest``,
    ``stable`` or no tag at all, so that a rerun of the stack runs the same image."""
    spec = _pod_spec(resource_type, props)
    if not isinstance(spec, Mapping):
        return []
    component = (_get(props, "metadata", "labels") or {}).get("app.kubernetes.io/component")
    key = IMAGE_KEYS.get(component, "<worker|ps|tensorboard>.image")
    found = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        image = str(container.get("image") or "")
        tag = image_tag(image)
        if not names_a_version(tag):
            found.append(
                f"{resource_type.rsplit(':', 1)[-1]} {_object_name(name, props)}: container "
                f"{container.get('name')!r} runs image {image!r} ({'no tag' if tag is None else 'tag ' + tag}); "
                "rule: images name a version (a digest or a tag with a digit), not latest or another "
                "moving channel.\n    fix: pulumi config set "
                f"{key} <repository>:<version> (or rm it for the stack's versioned default)"
            )
    return found


#: The extended resource a container asks GPUs by (the NVIDIA device plugin's).
GPU_RESOURCE = "nvidia.com/gpu"


def gpu_request_bound(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """Every container (and init container) of a pod or pod template asks at most
    MAX_GPUS_PER_INSTANCE GPUs (``nvidia.com/gpu`` in its limits or requests, an int or a
    string): a pod's GPUs come from one node, and no Alibaba Cloud GPU instance type has more
    (infra/settings/constants.py), so a larger ask stays Pending on every node. A value the
    preview does not know yet passes."""
    spec = _pod_spec(resource_type, props)
    if not isinstance(spec, Mapping):
        return []
    found = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        for field in ("limits", "requests"):
            value = (resources.get(field) or {}).get(GPU_RESOURCE)
            gpus = _known_int(value)
            if gpus is not None and gpus > MAX_GPUS_PER_INSTANCE:
                found.append(
                    f"{resource_type.rsplit(':', 1)[-1]} {_object_name(name, props)}: container "
                    f"{container.get('name')!r} {field} {GPU_RESOURCE} {gpus}; rule: a pod asks at most "
                    f"{MAX_GPUS_PER_INSTANCE} GPUs (one node's; no Alibaba Cloud GPU instance type has more).\n"
                    f"    fix: pulumi config set worker.gpuCount {MAX_GPUS_PER_INSTANCE}"
                )
                break
    return found
