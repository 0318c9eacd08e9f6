"""Parsers of Kubernetes labels and of what is made of them: a map of labels (the PV's, which
the PVC selects), a pod nodeSelector, and pod tolerations, whose keys and values follow the
label rules. Like parsers.py, each takes a flat string or a JSON-typed value and raises
ValueError whose text is the rule.
"""

from __future__ import annotations

import json
import re
from typing import Any

from infra.values.parsers import integer, raw_list

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_map(raw: Any) -> dict[str, str]:
    """Kubernetes labels (apimachinery validation: qualified-name keys, <= 63-char values)."""
    rule = 'must be a non-empty map of Kubernetes labels such as {"train": "mnist"}'
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError(rule) from None
    if not isinstance(raw, dict) or not raw:
        raise ValueError(rule)
    labels: dict[str, str] = {}
    for key, value in raw.items():
        value = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        prefix, _, name = key.rpartition("/")
        if (
            not _LABEL_NAME.match(name)
            or len(name) > 63
            or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)))
            or not isinstance(value, str)
            or len(value) > 63
            or (value and not _LABEL_NAME.match(value))
        ):
            raise ValueError(rule)
        labels[key] = value
    return labels


def node_selector(raw: Any) -> dict[str, str]:
    """A pod nodeSelector: a map of Kubernetes labels, possibly empty (= no constraint)."""
    if isinstance(raw, str) and raw.strip() in ("", "{}"):  # '{}' is the fix's own value
        return {}
    if raw is None or raw == {}:
        return {}
    try:
        return label_map(raw)
    except ValueError:
        raise ValueError('must be a map of Kubernetes node labels such as {"tf-mnist/pool": "cpu"}') from None


#: Fields of a Kubernetes toleration (core/v1 Toleration) as the config spells them.
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerations(raw: Any) -> tuple[dict[str, Any], ...]:
    """Pod tolerations: a list of core/v1 Toleration objects (JSON, or a --path list).

    The rules are the API server's (ValidateTolerations in k8s.io/kubernetes
    pkg/apis/core/validation): key a label name, empty only with operator Exists;
    operator Equal (the default) or Exists, which takes no value; value a label value;
    effect NoSchedule, PreferNoSchedule, NoExecute or empty (all effects);
    tolerationSeconds an integer, only with NoExecute. Returns each toleration with
    exactly the fields given (operator filled in).
    """
    rule = (
        "must be a list of tolerations such as "
        '[{"key":"dedicated","operator":"Equal","value":"training","effect":"NoSchedule"}]'
    )
    if raw in (None, "", []):
        return ()
    try:
        items = raw_list(raw)
    except ValueError:
        raise ValueError(rule) from None
    out = []
    for item in items:
        if not isinstance(item, dict) or not item or set(item) - set(_TOLERATION_FIELDS):
            raise ValueError(rule)
        key, value = item.get("key", ""), item.get("value", "")
        operator, effect = item.get("operator", "Equal"), item.get("effect", "")
        seconds = item.get("tolerationSeconds")
        if not all(isinstance(v, str) for v in (key, value, operator, effect)):
            raise ValueError(rule)
        prefix, _, name = key.rpartition("/")
        if key and (
            not _LABEL_NAME.match(name)
            or len(name) > 63
            or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)))
        ):
            raise ValueError(rule)
        if (
            operator not in ("Equal", "Exists")
            or (operator == "Exists" and value)
            or (not key and operator != "Exists")
        ):
            raise ValueError(rule)
        if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
            raise ValueError(rule)
        if effect and effect not in TAINT_EFFECTS:
            raise ValueError(rule)
        if seconds is not None:
            try:
                seconds = (
                    integer(0)(seconds)
                    if not isinstance(seconds, float) or not seconds.is_integer()
                    else int(seconds)
                )
            except ValueError:
                raise ValueError(rule) from None
            if effect != "NoExecute":
                raise ValueError(rule)
        toleration: dict[str, Any] = {"operator": operator}
        for name_, value_ in (("key", key), ("value", value), ("effect", effect)):
            if value_:
                toleration[name_] = value_
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        out.append(toleration)
    return tuple(out)
