"""How a container gets its image: the pull policy that follows the image reference.

A tag (``registry/trainer:2.21.0-cpu``) can be pushed again, so a node that pulled it once
may hold another image under the same name; a digest (``registry/trainer@sha256:<hex>``, with
or without a tag before the ``@``) names one image's content, which a node's copy always is.
Hence the derived policy (``pull_policy``): ``IfNotPresent`` for a digest, which never runs a
stale copy, and ``Always`` for a tag. At `pulumi up` a tag whose policy is derived does not
reach a pod: infra/image_pins.py resolves it to its digest first, so ``Always`` on a tag is
what a preview shows before that, and what a policy key set to it keeps.

``worker.imagePullPolicy`` and ``ps.imagePullPolicy`` override it, and a set key keeps its
tags unresolved. ``IfNotPresent`` or ``Never`` with a tag is allowed, for nodes that cannot
reach a registry and run preloaded images (tools/local-cluster imports its images into the
node's containerd), but ``pulumi up`` warns (``stale_tag_warnings``): such a node keeps running
whatever it holds under the tag.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Kubernetes' pull policies (core/v1 Container.imagePullPolicy).
ALWAYS = "Always"
IF_NOT_PRESENT = "IfNotPresent"
NEVER = "Never"


def has_digest(image: str) -> bool:
    """Whether ``image`` names its content by digest: ``name@<algorithm>:<hex>``, the form the
    image_reference parser accepts after ``@`` (a tag may stand before it; the digest wins)."""
    return "@" in image


def pull_policy(explicit: str | None, image: str) -> str:
    """The imagePullPolicy of a container of ``image``.

    Args:
        explicit: worker.imagePullPolicy or ps.imagePullPolicy; None when unset.
        image: the container's image reference.

    Returns:
        ``explicit`` when set; else ``IfNotPresent`` for a digest and ``Always`` for a tag.
    """
    if explicit is not None:
        return explicit
    return IF_NOT_PRESENT if has_digest(image) else ALWAYS


def stale_tag_warnings(pulls: Iterable[tuple[str, str, str]]) -> list[str]:
    """One warning per key whose policy lets a node run a stale copy of a tag.

    Args:
        pulls: ``(key, image, policy)`` of each container kind, the key being the one that
            sets its policy (worker.imagePullPolicy or ps.imagePullPolicy).

    Returns:
        For each key with a tag pulled other than ``Always``, in first-seen order: the key,
        the policy, the tagged images, and the two fixes (unset the key, or pin by digest).
    """
    stale: dict[tuple[str, str], list[str]] = {}
    for key, image, policy in pulls:
        if policy != ALWAYS and not has_digest(image) and image not in stale.setdefault((key, policy), []):
            stale[(key, policy)].append(image)
    return [
        f"{key} is {policy} with tag {', '.join(images)}: a node that holds an image under that tag keeps "
        "running it after the tag is pushed again. Unless the nodes run preloaded images without a registry, "
        f"`pulumi config rm {key}` (`pulumi up` then runs each tag's digest) or name the image by digest "
        "(@sha256:...)."
        for (key, policy), images in stale.items()
        if images
    ]
