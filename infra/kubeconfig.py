"""The ``kubeconfig`` setting: a path or the content, and the API server it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def is_kubeconfig_path(value: str) -> bool:
    """Whether the ``kubeconfig`` setting is a file path rather than kubeconfig content.

    Content is YAML over several lines or JSON (``{...}``); the kubernetes provider takes either
    and expands a leading ``~`` of a path itself.
    """
    return "\n" not in value and not value.lstrip().startswith("{")


def kubeconfig_server(kubeconfig: str) -> str:
    """The API server URL of the kubeconfig's current context: the cluster the provider uses.

    Args:
        kubeconfig: the ``kubeconfig`` setting, a path (``~`` expanded) or the content.

    Returns:
        ``clusters[<current context's cluster>].cluster.server``; a kubeconfig without a
        current context but with exactly one cluster gives that cluster's (as kubectl would
        need a context anyway, this only spares hand-written files).

    Raises:
        ValueError: the rule, when the file cannot be read or names no server.
    """
    import yaml  # a dependency of the pulumi SDK itself

    text = kubeconfig
    if is_kubeconfig_path(kubeconfig):
        try:
            text = Path(kubeconfig).expanduser().read_text()
        except OSError as error:
            raise ValueError(
                f"cannot be read ({error.strerror or error}), so the stack cannot tell which "
                "cluster it names (set it to an existing kubeconfig file, or set "
                "clusterIdentifier)"
            ) from None
    rule = (
        "names no API server in its current context, so the stack cannot tell which cluster it is "
        "(fix the kubeconfig, or set clusterIdentifier)"
    )
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError(rule) from None
    if not isinstance(document, dict):
        raise ValueError(rule)

    def named(section: str, name: Any) -> dict | None:
        for entry in document.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry.get(section[:-1]) if isinstance(entry.get(section[:-1]), dict) else None
        return None

    clusters = [c for c in document.get("clusters") or [] if isinstance(c, dict)]
    context = named("contexts", document.get("current-context"))
    if context is not None:
        cluster = named("clusters", context.get("cluster"))
    elif not document.get("current-context") and len(clusters) == 1:
        cluster = clusters[0].get("cluster") if isinstance(clusters[0].get("cluster"), dict) else None
    else:
        cluster = None
    server = cluster.get("server") if cluster else None
    if not isinstance(server, str) or not server.strip():
        raise ValueError(rule)
    return server.strip()
