"""Kubernetes recommended labels (app.kubernetes.io/*) shared by every object of a run, and the
mark that names the Pulumi stack which created the object."""

from __future__ import annotations

import hashlib
import re

import pulumi

from infra.settings import TrainingSettings

#: app.kubernetes.io/name of every object; the instance label carries the name prefix.
APP_NAME = "tf-mnist"
MANAGED_BY = "pulumi"
#: The label naming the stack that created the object (``stack_mark``): what an error about an
#: object another stack already has names (infra/ownership.py).
STACK_LABEL = "tf-mnist.io/stack"
#: A label value: at most 63 characters, alphanumeric at both ends, ``-_.`` inside
#: (kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set).
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
#: Hex digits of the hash in a shortened mark.
MARK_HASH_HEX = 12


def stack_mark(organization: str, project: str, stack: str) -> str:
    """The ``STACK_LABEL`` value of one stack: ``<organization>.<project>.<stack>``, e.g.
    ``organization.tf-mnist.dev`` (the local file backend's organization is ``organization``).

    Pulumi's names use only letters, digits, ``-``, ``_`` and ``.``, so this is a label value
    unless it is longer than 63 characters (or starts or ends with ``-``, ``_`` or ``.``); then
    it is the stack name cut to 50 characters, ``-`` and 12 hex digits of the SHA-256 of
    ``organization/project/stack``, still one value per stack.
    """
    mark = f"{organization}.{project}.{stack}"
    if LABEL_VALUE.match(mark):
        return mark
    digest = hashlib.sha256(f"{organization}/{project}/{stack}".encode()).hexdigest()[:MARK_HASH_HEX]
    head = re.sub(r"[^A-Za-z0-9]+$", "", re.sub(r"^[^A-Za-z0-9]+", "", stack[:50])) or "stack"
    return f"{head}-{digest}"


def current_stack_mark() -> str:
    """``stack_mark`` of the stack being deployed (Pulumi's organization, project and stack;
    outside a deployment the SDK's placeholders). An engine that names no organization (the
    SDK then gives None; so do its mocks) gets ``organization``, the local file backend's."""
    return stack_mark(pulumi.get_organization() or "organization", pulumi.get_project(), pulumi.get_stack())


def recommended_labels(name_prefix: str, component: str) -> dict[str, str]:
    """The recommended labels for one object, and ``STACK_LABEL`` (``current_stack_mark``).

    Args:
        name_prefix: the run's name prefix (app.kubernetes.io/instance), e.g. "mnist".
        component: what the object is, e.g. "worker", "ps", "chief", "tensorboard", "storage".

    See https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/.
    """
    return {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/instance": name_prefix,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": APP_NAME,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        STACK_LABEL: current_stack_mark(),
    }


def task_selector(name_prefix: str, task_type: str, task_index: int) -> dict[str, str]:
    """Labels that select exactly one task's pod: the instance plus tf-replica-type/-index.

    Deliberately no bare ``job`` label: it clashes with the Job controller's ``job-name``.
    """
    return {
        "app.kubernetes.io/instance": name_prefix,
        "tf-replica-type": task_type,
        "tf-replica-index": str(task_index),
    }


#: ACK Pro's gang-scheduling labels: kube-scheduler creates a PodGroup named by the first and
#: binds its pods only once it can place min-available of them, a count written as a string
#: ("Work with gang scheduling", https://www.alibabacloud.com/help/doc-detail/178169.htm: the
#: labels ``pod-group.scheduling.sigs.k8s.io/name: tf-smoke-gpu`` and
#: ``pod-group.scheduling.sigs.k8s.io/min-available: "3"``; the name must be a DNS subdomain).
POD_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
POD_GROUP_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"


def gang_labels(name_prefix: str, training: TrainingSettings) -> dict[str, str]:
    """The gang-scheduling labels of every task pod of a run: none without scheduling.gang.

    Args:
        name_prefix: the run's name prefix, which names its pod group: a DNS label (so a DNS
            subdomain and a label value), unique in the namespace among the stacks there.
        training: the run; its task pods, chief + workers + ps, are min-available: all of
            them, since none trains without the others (a worker without its ps, or the chief
            alone, waits for ever).

    Returns:
        ``{POD_GROUP_NAME: name_prefix, POD_GROUP_MIN_AVAILABLE: "<tasks>"}``, or ``{}``.
    """
    if not training.gang:
        return {}
    return {POD_GROUP_NAME: name_prefix, POD_GROUP_MIN_AVAILABLE: str(len(list(training.replicas.tasks())))}
