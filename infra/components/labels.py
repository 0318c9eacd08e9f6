"""Kubernetes recommended labels (app.kubernetes.io/*) shared by every object of a run."""

from __future__ import annotations

#: app.kubernetes.io/name of every object; the instance label carries the name prefix.
APP_NAME = "tf-mnist"
MANAGED_BY = "pulumi"


def recommended_labels(name_prefix: str, component: str) -> dict[str, str]:
    """The recommended labels for one object.

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
