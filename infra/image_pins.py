"""Every pod of a run on the same image: `pulumi up` resolves each image given by tag to its
digest once, and every container of it runs ``<reference>@<digest>``, pulled IfNotPresent.

A tag can be pushed again at any time. Pulled ``Always``, a task that starts after such a push
(a retry, an evicted pod, a rescheduled node) runs other code than its peers, and every pod
start needs the registry. So at `pulumi up` (``pin``) the registry is asked once per tag
(infra/registry_digests.py) and the pods are given the digest it answered: a node pulls that
content once and any later start of the run uses it, with or without the registry. The tag
stays before the ``@`` (a node pulls by the digest; the tag tells a reader where it came from).
The run key keeps the reference as configured (``TaskSettings.reference``): a tag pushed again
is the same run, whose tasks are replaced by the next `pulumi up` (new pod templates) and
resume from its checkpoint together on the new digest; a reference by digest is how a new
image starts a new run (docs/design.md, "One image per run").

Only containers whose pull policy is derived are pinned. ``worker.imagePullPolicy`` or
``ps.imagePullPolicy`` set is the user saying how nodes get the image: ``IfNotPresent`` or
``Never`` for nodes with preloaded images and no registry (nothing to ask), ``Always`` to follow
the tag without a digest (a registry that `pulumi up` cannot reach or that refuses HEAD).

A preview asks no registry (it runs offline in CI): a tag the last `pulumi up` resolved keeps
that digest, found in the pod templates of this stack's state, so an unchanged stack previews
no change; any other tag is shown as configured, with a note that `pulumi up` resolves it. At
`pulumi up` (and at `pulumi destroy --run-program`, which runs the program the same way) a tag
the registry does not answer for keeps the state's digest with a warning; only a tag with none
there fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pulumi

from infra.components.registry import registry_login
from infra.pull_policy import IF_NOT_PRESENT, has_digest
from infra.registry_digests import DigestUnavailable, RegistryCredentials, lookup_digest
from infra.settings import Settings, TaskSettings
from infra.stack_state import StateUnreadable, read_stack_resources

#: ``(image by tag, the stack's registry login or None) -> digest``; raises DigestUnavailable.
Lookup = Callable[[str, RegistryCredentials | None], str]
#: The workload types whose pod templates in the state hold the images the last `up` ran.
WORKLOAD_TYPES = frozenset({"kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment"})


class ImageDigestError(pulumi.RunError):
    """Some image tag could not be resolved to a digest; nothing was deployed.

    A ``pulumi.RunError``: the CLI prints the message without a traceback.
    """


@dataclass(frozen=True)
class Use:
    """One kind of container and the image it runs.

    Attributes:
        key: the key that names the image (worker.image, ps.image, tensorboard.image, or
            baseImage for a role on the base image).
        policy_key: the key that sets its pull policy (worker.imagePullPolicy, ps.imagePullPolicy).
        image: the reference as configured.
        policy: ``policy_key``'s value; None when unset (the tag is then resolved).
    """

    key: str
    policy_key: str
    image: str
    policy: str | None


def uses(settings: Settings) -> list[Use]:
    """Every kind of container of the stack: the workers (and a GPU chief), the CPU trainer
    image's pods (ps, a CPU chief, staging, the run monitor), TensorBoard and the setup Job."""
    t, board = settings.training, settings.tensorboard_image
    worker_key = "baseImage" if t.worker.packages else "worker.image"
    found = [
        Use(worker_key, "worker.imagePullPolicy", t.worker.image, settings.worker.image_pull_policy),
        Use(
            "baseImage" if t.ps.packages else "ps.image",
            "ps.imagePullPolicy",
            t.ps.image,
            settings.ps.image_pull_policy,
        ),
        Use(
            "baseImage" if board.packages else "tensorboard.image",
            "ps.imagePullPolicy",
            board.image,
            settings.ps.image_pull_policy,
        ),
    ]
    if settings.runtime.used:
        found.append(
            Use("baseImage", "ps.imagePullPolicy", settings.runtime.base_image, settings.ps.image_pull_policy)
        )
    return found


def tags_to_resolve(settings: Settings) -> dict[str, list[Use]]:
    """Image by tag -> its uses whose pull policy is derived, in first-use order."""
    out: dict[str, list[Use]] = {}
    for use in uses(settings):
        if use.policy is None and not has_digest(use.image):
            out.setdefault(use.image, []).append(use)
    return out


def failure(image: str, found: list[Use], why: DigestUnavailable, login: bool) -> str:
    """One image's lines of ImageDigestError: the keys, the image, what the registry answered,
    and the fixes (by digest; a login on 401 or 403 when the stack has none; follow the tag)."""
    keys = ", ".join(dict.fromkeys(u.key for u in found))
    policy_keys = list(dict.fromkeys(u.policy_key for u in found))
    lines = [
        f"  {keys} {image}: no digest for the tag: {why}",
        f"    fix: name it by digest: pulumi config set {found[0].key} {image}@sha256:<digest> "
        f"(`docker buildx imagetools inspect {image}` prints it)",
    ]
    if why.status in (401, 403) and not login:
        lines.append(
            "    or give the stack the registry's login: pulumi config set registryCredentials.username <user> "
            "&& pulumi config set --secret registryCredentials.password <password>"
        )
    follow = " && ".join(f"pulumi config set {k} Always" for k in policy_keys)
    lines.append(
        f"    or follow the tag without a digest (a pod started later may run another image): {follow}"
    )
    return "\n".join(lines)


def resolve(
    settings: Settings, lookup: Lookup, kept: Callable[[], Mapping[str, str]] = dict
) -> dict[str, str]:
    """Image by tag -> ``<image>@<digest>``, for every tag of ``tags_to_resolve``, each asked once.

    A tag the registry gives no digest for keeps the one the last `pulumi up` pinned, with a
    warning, where ``kept`` (tag -> ``<tag>@<digest>``, from the stack's state: ``from_state``)
    has one: the run goes on with the image it ran (a registry out of reach must not stop a
    `pulumi destroy --run-program`, which runs this program too, nor a re-up of the same
    images); a newer push of the tag is picked up by the next `up` that reaches the registry.

    Raises:
        ImageDigestError: some tag has no digest and none kept; lists every such image at once.
    """
    login = registry_login(settings)
    pins: dict[str, str] = {}
    problems = []
    for image, found in tags_to_resolve(settings).items():
        try:
            pins[image] = f"{image}@{lookup(image, login)}"
        except DigestUnavailable as why:
            earlier = kept().get(image)
            if earlier is None:
                problems.append(failure(image, found, why, login is not None))
                continue
            pins[image] = earlier
            keys = ", ".join(dict.fromkeys(u.key for u in found))
            pulumi.log.warn(
                f"{keys} {image}: no digest for the tag ({why}); kept the one the last `pulumi up` pinned, "
                f"{earlier.split('@', 1)[1]}: a newer push of the tag is not picked up until the registry answers"
            )
    if problems:
        count = len(problems)
        header = (
            f"{count} image tag{'s' if count != 1 else ''} could not be resolved to a digest, which every pod of "
            "the run is given so that all run the same image; nothing was deployed:"
        )
        raise ImageDigestError("\n".join([header, *problems]))
    return pins


def state_images(resources: Mapping[str, Any]) -> set[str]:
    """The container images of the Jobs and Deployments in this stack's state
    (infra.stack_state.read_stack_resources: urn -> ``{"type", "outputs"}``)."""
    found: set[str] = set()
    for entry in resources.values():
        if not isinstance(entry, Mapping) or entry.get("type") not in WORKLOAD_TYPES:
            continue
        spec: Any = entry.get("outputs") or {}
        for part in ("spec", "template", "spec"):
            spec = spec.get(part) if isinstance(spec, Mapping) else None
        containers = spec.get("containers") if isinstance(spec, Mapping) else None
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, Mapping) and isinstance(container.get("image"), str):
                found.add(container["image"])
    return found


def from_state(tags: Iterable[str], images: set[str]) -> dict[str, str]:
    """Tag -> the ``<tag>@<digest>`` among ``images`` (``state_images``), for each tag the last
    `pulumi up` pinned; a tag found with several digests (a half-done update) is left out."""
    pins = {}
    for tag in tags:
        found = [image for image in images if image.startswith(f"{tag}@")]
        if len(found) == 1:
            pins[tag] = found[0]
    return pins


def _pinned_task(task: TaskSettings, pins: Mapping[str, str], policy: str | None) -> TaskSettings:
    if policy is not None or task.image not in pins:
        return task
    return replace(
        task, image=pins[task.image], image_pull_policy=IF_NOT_PRESENT, configured_image=task.image
    )


def pinned(settings: Settings, pins: Mapping[str, str]) -> Settings:
    """``settings`` with every container whose pull policy is derived running the pinned
    reference of its image (``pins``: image -> ``<image>@<digest>``), pulled IfNotPresent."""
    t, board, runtime = settings.training, settings.tensorboard_image, settings.runtime
    ps_policy = settings.ps.image_pull_policy
    training = replace(
        t,
        worker=_pinned_task(t.worker, pins, settings.worker.image_pull_policy),
        ps=_pinned_task(t.ps, pins, ps_policy),
        chief=_pinned_task(
            t.chief, pins, settings.worker.image_pull_policy if t.chief_uses_gpu else ps_policy
        ),
    )
    if ps_policy is None and board.image in pins:
        board = replace(board, image=pins[board.image], image_pull_policy=IF_NOT_PRESENT)
    if ps_policy is None and runtime.used and runtime.base_image in pins:
        runtime = replace(runtime, base_image=pins[runtime.base_image], image_pull_policy=IF_NOT_PRESENT)
    return replace(settings, training=training, tensorboard_image=board, runtime=runtime)


def pin(
    settings: Settings,
    *,
    dry_run: bool,
    lookup: Lookup = lookup_digest,
    state: Callable[[], Mapping[str, Any]] = read_stack_resources,
) -> tuple[Settings, list[str]]:
    """``(settings with its tags pinned, notes for the preview's log)``.

    Args:
        dry_run: a preview: no registry is asked; a tag keeps the digest the state shows the
            last `pulumi up` gave it (``from_state``), any other stays a tag with a note.
        lookup: asks a registry for a tag's digest (registry_digests.lookup_digest).
        state: this stack's resources (infra.stack_state), read at a preview, and at `pulumi up`
            only for a tag the registry gives no digest (``resolve``'s ``kept``).

    Raises:
        ImageDigestError: at `pulumi up`, a tag that could not be resolved (``resolve``),
            before any resource is registered.
    """
    tags = tags_to_resolve(settings)
    if not tags:
        return settings, []
    if not dry_run:

        def kept() -> Mapping[str, str]:
            try:
                return from_state(tags, state_images(state()))
            except StateUnreadable:
                return {}

        return pinned(settings, resolve(settings, lookup, kept)), []
    try:
        pins = from_state(tags, state_images(state()))
    except StateUnreadable:
        pins = {}
    notes = [
        f"{', '.join(dict.fromkeys(u.key for u in found))} {image}: "
        + (
            f"shown as the last `pulumi up` pinned it, {pins[image]}; `pulumi up` asks the registry again"
            if image in pins
            else "by tag in this preview; `pulumi up` resolves it to its digest, which every pod then runs"
        )
        for image, found in tags.items()
    ]
    return pinned(settings, pins), notes
