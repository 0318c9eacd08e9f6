"""Pod spec parts shared by every workload of the stack: placement and image pull Secrets."""

from __future__ import annotations

from typing import Any, Optional

import pulumi_kubernetes as k8s

from infra.components.node_pools import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from infra.settings import Placement

#: The toleration of the GPU pool's taint (infra/components/node_pools.py).
GPU_TOLERATION: dict[str, Any] = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


def node_selector(placement: Placement) -> Optional[dict[str, str]]:
    """A pod's nodeSelector, None (no field) when the role has none."""
    return dict(placement.node_selector) or None


def tolerations(placement: Placement, uses_gpu: bool) -> Optional[list[k8s.core.v1.TolerationArgs]]:
    """A pod's tolerations: the GPU pool's taint for GPU pods (always), then the role's own.

    Returns None (no field) when there are none.
    """
    items = ([GPU_TOLERATION] if uses_gpu else []) + [t for t in placement.tolerations
                                                      if not (uses_gpu and dict(t) == GPU_TOLERATION)]
    return [k8s.core.v1.TolerationArgs(key=t.get("key"), operator=t.get("operator"), value=t.get("value"),
                                       effect=t.get("effect"), toleration_seconds=t.get("tolerationSeconds"))
            for t in items] or None


def image_pull_secrets(secret_name: Optional[str]) -> Optional[list[k8s.core.v1.LocalObjectReferenceArgs]]:
    """A pod's imagePullSecrets: the configured (or created) Secret, None without one."""
    return [k8s.core.v1.LocalObjectReferenceArgs(name=secret_name)] if secret_name else None
