"""The findings of the Kubernetes policy checkers that platform teams run (checkov 3.3.30
``--framework kubernetes`` and kube-score v1.20.0, installed by tools/checkers) that are right
for this workload, each with its reason, as the annotations both checkers read on an object.

This table is the one place they are decided; the components put ``checker_annotations(role,
pulls)`` on the objects they create, and docs/checkers.md lists every entry with its longer
reason (tests/tools/test_checkers.py runs both checkers over every configuration that
tools/render-manifests renders and fails on any finding left).

The annotations (both checkers read them on the object's own metadata; for a Job or a
Deployment that covers its pod template's containers):
- checkov: ``checkov.io/skip<N>: <check id>=<reason>``, N counting from 1;
- kube-score: ``kube-score/ignore: <check id>,<check id>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pulumi

from infra.pull_policy import ALWAYS, has_digest

#: Roles: the objects a suppression applies to. A task's Job (chief, worker, ps), the staging
#: Job (STAGE_SECRET_SOURCE when data.source was set with --secret, which the staging Job then
#: reads from a Secret), the run monitor's Job, TensorBoard's Deployment; OBJECT is any other
#: namespaced object (ConfigMaps, Services, the monitor's ServiceAccount, Role and RoleBinding,
#: NetworkPolicies); NODE_PORT_SERVICE is TensorBoard's Service when tensorboard.serviceType is
#: NodePort.
TASK = "task"
STAGE = "stage-data"
STAGE_SECRET_SOURCE = "stage-data-secret-source"
MONITOR = "monitor"
TENSORBOARD = "tensorboard"
OBJECT = "object"
NODE_PORT_SERVICE = "node-port-service"
WORKLOADS = frozenset({TASK, STAGE, STAGE_SECRET_SOURCE, MONITOR, TENSORBOARD})
ALL = WORKLOADS | {OBJECT, NODE_PORT_SERVICE}
CHECKOV_PREFIX = "checkov.io/skip"
KUBE_SCORE_IGNORE = "kube-score/ignore"

#: ``(image, imagePullPolicy)`` of each container of a workload.
Pull = tuple[str, str]


def any_tag(pulls: Sequence[Pull]) -> bool:
    """Whether some container names its image by tag only (no ``@sha256:`` digest)."""
    return any(not has_digest(image) for image, _ in pulls)


def any_not_always(pulls: Sequence[Pull]) -> bool:
    """Whether some container's pull policy is not ``Always`` (kube-score flags any such)."""
    return any(policy != ALWAYS for _, policy in pulls)


def any_tag_not_always(pulls: Sequence[Pull]) -> bool:
    """Whether some container pulls a tag other than ``Always`` (checkov's CKV_K8S_15 passes a
    digest with any policy)."""
    return any(not has_digest(image) and policy != ALWAYS for image, policy in pulls)


@dataclass(frozen=True)
class Suppression:
    """One finding that is right for this workload.

    Attributes:
        name: what it is about (docs/checkers.md's first column).
        roles: the roles whose objects carry it.
        checkov: checkov check ids it skips.
        kube_score: kube-score check ids it ignores.
        reason: why, in one line (it is the checkov annotation's text, so no ``=`` or ``,``).
        only_if: applies only to a workload whose containers' ``(image, pull policy)`` make
            this true (``any_tag``, ``any_not_always``); None = always.
    """

    name: str
    roles: frozenset[str]
    checkov: tuple[str, ...]
    kube_score: tuple[str, ...]
    reason: str
    only_if: Callable[[Sequence[Pull]], bool] | None = None


SUPPRESSIONS: tuple[Suppression, ...] = (
    Suppression(
        "image by tag",
        WORKLOADS,
        ("CKV_K8S_43",),
        (),
        "only on a workload whose image is a tag: `pulumi up` runs every tag on its digest unless "
        "worker.imagePullPolicy or ps.imagePullPolicy is set (IfNotPresent or Never for nodes with preloaded "
        "images and no registry; Always to follow the tag where the registry cannot be asked)",
        only_if=any_tag,
    ),
    Suppression(
        "pull policy not Always",
        WORKLOADS,
        (),
        ("container-image-pull-policy",),
        "only on a workload pulled other than Always: an image by @sha256 digest (IfNotPresent by default: "
        "its content cannot change) or IfNotPresent or Never set for nodes with preloaded images "
        "(pulumi up warns about a tag)",
        only_if=any_not_always,
    ),
    Suppression(
        "tag not pulled Always",
        WORKLOADS,
        ("CKV_K8S_15",),
        (),
        "only on a workload whose tag is pulled other than Always: worker.imagePullPolicy or "
        "ps.imagePullPolicy set to IfNotPresent or Never for nodes with preloaded images and no registry "
        "(pulumi up warns); unset `pulumi up` runs the tag's digest",
        only_if=any_tag_not_always,
    ),
    Suppression(
        "no CPU limit on a training task",
        frozenset({TASK}),
        ("CKV_K8S_11",),
        ("container-resources",),
        "a CPU limit throttles TensorFlow's thread pools (sized to the node's cores) under the CFS quota; "
        "a task requests worker.cpu or ps.cpu and its memory limit equals its request",
    ),
    Suppression(
        "service-account token mounted",
        frozenset({MONITOR}),
        ("CKV_K8S_38",),
        (),
        "the run monitor lists and patches the run's Jobs through the API: its token is what it works with "
        "(a Role of this namespace on this run's Jobs only)",
    ),
    Suppression(
        "data source Secret in the environment",
        frozenset({STAGE_SECRET_SOURCE}),
        ("CKV_K8S_35",),
        (),
        "only with data.source set with --secret: trainer.stage reads the URLs once from DATA_SOURCES "
        "(--sources_env) in a container of one process that starts no other; a file would change the "
        "command line that trainer images built before take",
    ),
    Suppression(
        "one-replica Deployment",
        frozenset({TENSORBOARD}),
        (),
        ("deployment-replicas",),
        "TensorBoard is a viewer of one run's log directory: one replica serves it and a second would read "
        "every event file again",
    ),
    Suppression(
        "NodePort Service",
        frozenset({NODE_PORT_SERVICE}),
        (),
        ("service-type",),
        "only with tensorboard.serviceType NodePort which the user chose and `pulumi up` warns about "
        "(no login and no source ranges); the default is ClusterIP",
    ),
)


def suppressions(role: str, pulls: Sequence[Pull] = ()) -> list[Suppression]:
    """The entries of SUPPRESSIONS for an object of ``role``, in table order.

    Args:
        pulls: ``(image, imagePullPolicy)`` of the object's containers (none for an object
            that has no pod template); an entry with ``only_if`` applies where it holds.

    Raises:
        ValueError: ``role`` is not one of ALL.
    """
    if role not in ALL:
        raise ValueError(f"role {role!r}: must be one of {', '.join(sorted(ALL))}")
    return [s for s in SUPPRESSIONS if role in s.roles and (s.only_if is None or s.only_if(pulls))]


def checker_annotations(role: str, pulls: Sequence[Pull] = ()) -> dict[str, str]:
    """The checkers' annotations for an object of ``role`` whose containers pull ``pulls``:
    ``checkov.io/skip1`` ... and ``kube-score/ignore``; empty when nothing applies."""
    found = suppressions(role, pulls)
    checkov = [f"{check}={s.reason}" for s in found for check in s.checkov]
    out = {f"{CHECKOV_PREFIX}{i}": text for i, text in enumerate(checkov, start=1)}
    ignored = [check for s in found for check in s.kube_score]
    if ignored:
        out[KUBE_SCORE_IGNORE] = ",".join(ignored)
    return out


def merged(
    own: Mapping[str, pulumi.Input[str]] | None, role: str, pulls: Sequence[Pull] = ()
) -> dict[str, pulumi.Input[str]] | None:
    """An object's ``own`` annotations with the checkers' (``annotations``) added; None (no
    field) when both are empty."""
    out = {**(own or {}), **checker_annotations(role, pulls)}
    return out or None
