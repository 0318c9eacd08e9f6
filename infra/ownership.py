"""Stacks never take over each other's Kubernetes objects: the check before anything is registered.

pulumi-kubernetes 4.x creates an object with server-side apply, which updates an object of that
name if one exists: a second stack with the same namePrefix and namespace would silently adopt
the first one's objects, and destroying either would delete them for both. So, on an existing
cluster (kubeconfig mode), on preview and on up, before the program registers any resource,
``check`` looks up every object the stack would create (``planned``) and refuses the whole
deployment when one exists that is not this stack's.

The rule (``refusals``): an object that exists is this stack's exactly when this stack's state
holds an object of that type, namespace and name with the same uid (then Pulumi updates it, as
it would anyway). The state, not the ``tf-mnist.io/stack`` label, decides: two stacks called
``dev`` in two local file backends carry the same label (``organization.tf-mnist.dev``), and
their states still tell them apart. Objects created by a version of the program from before
the label are in their stack's state, so that stack updates them. The label names the owner in
the error. Where the state cannot be read (infra/stack_state.py reads it, again while a
concurrent write of the engine spoils a read), an up refuses to deploy, since the label alone
cannot tell this stack from one of the same name in another backend; a preview warns and lets
the label decide (this stack's label passes).

Where the cluster does not answer, a preview or an up only warns: nothing can be created on a
cluster that does not answer, and an offline preview (tests/preview) must still show the plan.
An API error (401, 403, ...) warns at preview and refuses an up: the objects could not be
checked on a cluster the provider may well reach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pulumi

from infra.cluster_objects import LiveObject, ObjectRef, Refused, Unreachable
from infra.components.labels import APP_NAME, STACK_LABEL, current_stack_mark
from infra.settings.constants import DEFAULT_NAMESPACE
from infra.stack_state import StateUnreadable, read_stack_resources

NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"


class ClusterView(Protocol):
    """Where ``check`` reads objects from (infra.cluster_objects.KubeconfigCluster; tests fake it)."""

    def read(self, ref: ObjectRef) -> LiveObject | None:
        """The object under ``ref``'s name, None when there is none; raises Unreachable or Refused."""
        ...


@dataclass(frozen=True)
class Refusal:
    """One object the stack would create that exists and is not this stack's.

    Attributes:
        ref: the object.
        owner: who has it, in words (``owner_of``).
    """

    ref: ObjectRef
    owner: str


class OwnershipError(pulumi.RunError):
    """The stack would take over objects it does not own; nothing was deployed.

    A ``pulumi.RunError``: the CLI prints the message without a traceback.
    """


def held_objects(resources: Mapping[str, Any]) -> dict[ObjectRef, str]:
    """The Kubernetes objects a stack's state holds: ref -> uid.

    Args:
        resources: infra.stack_state.read_stack_resources(): urn -> ``{"type": ..., "outputs": {...}}``,
            a Kubernetes object's outputs holding its ``metadata`` (name, namespace, uid).
    """
    held: dict[ObjectRef, str] = {}
    for entry in resources.values():
        rtype = entry.get("type", "") if isinstance(entry, Mapping) else ""
        if not rtype.startswith("kubernetes:") or rtype.startswith("pulumi:providers:"):
            continue
        metadata = (entry.get("outputs") or {}).get("metadata") or {}
        if isinstance(metadata, Mapping) and metadata.get("name") and metadata.get("uid"):
            ref = ObjectRef(rtype, metadata.get("namespace") or None, str(metadata["name"]))
            held[ref] = str(metadata["uid"])
    return held


def owner_of(live: LiveObject, mark: str) -> str:
    """Who has an object that is not in this stack's state, by its labels.

    Returns one of: ``stack <mark> (label tf-mnist.io/stack)``; for this stack's own mark,
    that it is not in this stack's state (another backend's stack of the same name, or left by
    an update that was interrupted); a stack of this project from before the label; or
    ``not created by a stack of this project``.
    """
    other = live.labels.get(STACK_LABEL)
    if other == mark:
        return (
            f"labelled as this stack's ({STACK_LABEL}={mark}) but not in this stack's state: a stack "
            "of the same name in another Pulumi backend, or left by an interrupted update"
        )
    if other:
        return f"created by stack {other} (label {STACK_LABEL})"
    if live.labels.get("app.kubernetes.io/name") == APP_NAME:
        instance = live.labels.get("app.kubernetes.io/instance", "?")
        return (
            f"created by another stack of this project (namePrefix {instance}, before stacks were labelled)"
        )
    return "not created by a stack of this project"


def refusals(
    planned: Sequence[ObjectRef],
    live: Mapping[ObjectRef, LiveObject | None],
    held: Mapping[ObjectRef, str] | None,
    mark: str,
) -> list[Refusal]:
    """The planned objects that exist and are not this stack's (the rule in the module docstring).

    Args:
        planned: every object the stack would create.
        live: what the cluster has under each planned name (None: nothing).
        held: this stack's state (``held_objects``); None when it could not be read, and then an
            object passes when it carries this stack's ``mark``.
        mark: this stack's STACK_LABEL value.
    """
    found = []
    for ref in planned:
        obj = live.get(ref)
        if obj is None:
            continue
        if held is not None and held.get(ref) == obj.uid:
            continue
        if held is None and obj.labels.get(STACK_LABEL) == mark:
            continue
        found.append(Refusal(ref, owner_of(obj, mark)))
    return found


def refusal_message(found: Sequence[Refusal], *, stack: str) -> str:
    """The error for ``found``: each object with its owner, why the stack stops, and the keys to
    change (namePrefix or namespace; createNamespace for the namespace itself)."""
    count = len(found)
    lines = [
        f"{count} Kubernetes object{'s' if count != 1 else ''} that stack {stack} would create already "
        f"exist{'s' if count == 1 else ''} and {'is' if count == 1 else 'are'} not this stack's; "
        "nothing was deployed:"
    ]
    lines += [f"  {r.ref}: {r.owner}" for r in found]
    lines.append(
        "Creating them would take them over (server-side apply updates an existing object), and "
        "destroying this stack would then delete them. Give this stack names of its own: "
        "`pulumi config set namePrefix <another prefix>` or `pulumi config set namespace "
        "<another namespace>`."
    )
    if any(r.ref.type == NAMESPACE_TYPE for r in found):
        lines.append(
            "For the namespace itself, which this stack would create (createNamespace true, its default "
            f"with namespace {DEFAULT_NAMESPACE}): `pulumi config set createNamespace false` deploys into "
            "the existing namespace without owning it; destroying the stack that created it still "
            "deletes it, with this stack's objects."
        )
    return "\n".join(lines)


def read_own_state(
    *, dry_run: bool, state: Callable[[], Mapping[str, Any]] = read_stack_resources
) -> dict[ObjectRef, str] | None:
    """This stack's state (``state()``: infra/stack_state.py) as ``held_objects``; None, with a
    warning, when a preview cannot read it.

    Raises:
        OwnershipError: an up cannot read it (nothing was deployed), with the engine's reason.
    """
    try:
        return held_objects(state())
    except StateUnreadable as error:
        why = f"could not read this stack's state to check that the existing objects are its own ({error})"
        if not dry_run:
            raise OwnershipError(
                f"{why}; nothing was deployed. Run `pulumi up` again; if the state stays "
                "unreadable, `pulumi stack export` shows whether the backend can read it."
            ) from None
        pulumi.log.warn(
            f"{why}; objects labelled {STACK_LABEL}={current_stack_mark()} count as this stack's "
            "here, and `pulumi up` refuses to deploy until it can read the state"
        )
        return None


def check(
    planned: Sequence[ObjectRef],
    cluster: ClusterView,
    *,
    stack: str,
    dry_run: bool,
    state: Callable[[], Mapping[str, Any]] = read_stack_resources,
) -> None:
    """Refuse the deployment when an object the stack would create exists and is not its own.

    Reads every planned object (stopping at the first that cannot be read), then this stack's
    state (``state()``) only if one exists (the state is not needed for a cluster that holds
    none of them).

    Raises:
        OwnershipError: an object that is not this stack's (every one named), or, on up, an
            answer from the API server that is neither the object nor 404, or a state that
            cannot be read while objects exist.
    """
    live: dict[ObjectRef, LiveObject | None] = {}
    for ref in planned:
        try:
            live[ref] = cluster.read(ref)
        except Unreachable as error:
            pulumi.log.warn(
                f"could not check whether the stack's objects already exist in the cluster: {error}; "
                "nothing can be created there while it does not answer, and the next preview or "
                "up checks again"
            )
            return
        except Refused as error:
            message = (
                f"could not check whether {ref} already exists: the API server answered {error} "
                "(the check needs get on every kind the stack creates)"
            )
            if dry_run:
                pulumi.log.warn(message + "; `pulumi up` refuses to deploy until it can check")
                return
            raise OwnershipError(message + "; nothing was deployed") from None
    if not any(obj is not None for obj in live.values()):
        return
    found = refusals(planned, live, read_own_state(dry_run=dry_run, state=state), current_stack_mark())
    if found:
        raise OwnershipError(refusal_message(found, stack=stack))
