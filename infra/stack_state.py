"""This stack's state as the engine gives it to the program: every resource with its outputs.

The engine's built-in function READ_STACK_RESOURCES reads the stack's checkpoint from the backend
(pulumi/pulumi pkg/resource/deploy/builtins.go, backend.go GetStackResourceOutputs). The engine
rewrites that checkpoint after each step, and the first steps of an update (the Stack resource,
the engine's default providers) run beside the program. A DIY backend's read can then fail for a
moment: gocloud's fileblob truncates a checkpoint's ``.attrs`` sidecar before writing it again,
and a read in between gets ``failed to load checkpoint: EOF`` (seen on a file backend with
Pulumi CLI 3.274.0; docs/benchmarks.md has how often).

The program reads the state before it registers anything of its own, so the writes it can meet
are the engine's few first ones, and they end: ``read_stack_resources`` reads again after a
failure to load the checkpoint until a read succeeds or READ_DEADLINE_S has passed. Any other
failure (an engine or backend without the function, an unknown stack) is final at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pulumi

#: The engine's built-in function that returns every resource of a stack's state as the backend
#: holds it: {"name": ..., "outputs": {urn: {"type": ..., "outputs": {...}}}}. Calling it makes
#: the engine add its default ``pulumi`` provider to the state, an internal step that no preview
#: counts as a change.
READ_STACK_RESOURCES = "pulumi:pulumi:readStackResourceOutputs"
#: The DIY backend's words for a checkpoint it could not read (pkg/backend/diy/state.go
#: getSnapshot): the failure a concurrent write causes, and the only one read again.
CHECKPOINT_NOT_LOADED = "failed to load checkpoint"
#: How long failed checkpoint loads are read again, in seconds: the engine's first writes take
#: milliseconds each; the margin is for a machine that is busy with other work.
READ_DEADLINE_S = 60.0
#: The pause between two reads, in seconds.
READ_PAUSE_S = 0.1


class StateUnreadable(Exception):
    """The engine or backend could not give this stack's state; the message says why."""


def read_stack_resources() -> dict[str, Any]:
    """This stack's resources as the backend holds them: urn -> ``{"type", "outputs"}``.

    Raises:
        StateUnreadable: the engine or backend has no such function, or it failed (for a
            checkpoint that could not be loaded: every read until READ_DEADLINE_S), with the
            engine's reason.
    """
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    deadline = time.monotonic() + READ_DEADLINE_S
    while True:
        try:
            result = pulumi.runtime.invoke(READ_STACK_RESOURCES, {"stackName": name})
            return dict((result.value or {}).get("outputs") or {})
        except Exception as error:  # the SDK raises a plain Exception holding the engine's reason
            if CHECKPOINT_NOT_LOADED not in str(error) or time.monotonic() >= deadline:
                raise StateUnreadable(str(error)) from None
        time.sleep(READ_PAUSE_S)


def read_once(read: Callable[[], dict[str, Any]] = read_stack_resources) -> Callable[[], dict[str, Any]]:
    """``read`` made to run at most once: every call returns its first answer, or raises the
    StateUnreadable it first raised. One program run reads its state once, however many of its
    checks need it (the settings, the ownership check, a preview's image digests), all before it
    registers anything, so they see the same state."""
    answer: list[dict[str, Any]] = []
    failure: list[StateUnreadable] = []

    def once() -> dict[str, Any]:
        if failure:
            raise failure[0]
        if not answer:
            try:
                answer.append(read())
            except StateUnreadable as error:
                failure.append(error)
                raise
        return answer[0]

    return once
