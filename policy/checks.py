"""The pack's policies: each rule of policy/rules.py bound to what pulumi-policy hands a policy.

``POLICIES`` holds ``(name, description, stack, validate)``: ``stack`` False for a resource
policy, whose ``validate(args, report_violation)`` sees one resource (``args.resource_type``,
``args.name``, ``args.urn``, ``args.props``), True for a stack policy, which sees every
resource at once (``args.resources``). Each message a rule returns is one violation, reported
against the resource's URN. Nothing here imports pulumi_policy, so the unit tests can drive
these with stand-ins for its arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policy import rules

Report = Callable[..., None]


def _report_all(messages: list[str], report: Report, urn: str | None = None) -> None:
    for message in messages:
        report(message, urn)


def tensorboard_source_ranges(args: Any, report: Report) -> None:
    if args.resource_type == rules.SERVICE:
        _report_all(rules.tensorboard_source_ranges(args.name, args.props), report, args.urn)


def gpu_pool_scale_to_zero(args: Any, report: Report) -> None:
    if args.resource_type == rules.NODE_POOL:
        _report_all(rules.gpu_pool_scales_to_zero(args.name, args.props), report, args.urn)


def alicloud_tags(args: Any, report: Report) -> None:
    _report_all(rules.alicloud_tags(args.resource_type, args.name, args.urn, args.props), report, args.urn)


def node_pool_size(args: Any, report: Report) -> None:
    if args.resource_type == rules.NODE_POOL:
        _report_all(rules.node_pool_size_bound(args.name, args.props), report, args.urn)


def job_count(args: Any, report: Report) -> None:
    jobs = [(r.name, r.props) for r in args.resources if r.resource_type == rules.JOB]
    _report_all(rules.job_count_bound(jobs), report)


def gpu_request(args: Any, report: Report) -> None:
    _report_all(rules.gpu_request_bound(args.resource_type, args.name, args.props), report, args.urn)


def pinned_images(args: Any, report: Report) -> None:
    _report_all(rules.pinned_images(args.resource_type, args.name, args.props), report, args.urn)


#: (name, description, stack policy?, validate), in the order the docs list them.
POLICIES: list[tuple[str, str, bool, Callable[[Any, Report], None]]] = [
    (
        "tensorboard-source-ranges",
        "TensorBoard (no login) is exposed beyond the cluster only as a LoadBalancer with source ranges, none of "
        "them 0.0.0.0/0 or ::/0.",
        False,
        tensorboard_source_ranges,
    ),
    (
        "gpu-pool-scale-to-zero",
        "Node pools of GPU instance types autoscale with a minimum of 0 nodes.",
        False,
        gpu_pool_scale_to_zero,
    ),
    (
        "alicloud-tags",
        "Every alicloud resource that takes tags carries pulumi:project and pulumi:stack.",
        False,
        alicloud_tags,
    ),
    (
        "replica-bound-node-pool",
        f"A node pool holds at most {rules.MAX_POOL_NODES} nodes.",
        False,
        node_pool_size,
    ),
    (
        "replica-bound-jobs",
        f"A run has at most {rules.MAX_TASKS['worker']} worker and {rules.MAX_TASKS['ps']} ps Jobs.",
        True,
        job_count,
    ),
    (
        "replica-bound-gpus",
        f"A container asks at most {rules.MAX_GPUS_PER_INSTANCE} GPUs (nvidia.com/gpu).",
        False,
        gpu_request,
    ),
    (
        "image-tag-pinned",
        "Every container of a pod template names a version (a digest or a tag with a digit), not latest, another "
        "moving channel or no tag.",
        False,
        pinned_images,
    ),
]
