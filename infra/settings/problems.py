"""A violation (``Problem``), the one place that words it in Pulumi's terms (key, value, rule,
fix: ``wording``), and the error that lists them all (``ConfigError``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.settings.constants import PROJECT
from infra.settings.keys import Key

#: Where a value was set: flat (``pulumi config set a.b v``) or with ``--path``.
FLAT, PATH = "flat", "path"
#: The kinds a rule reports most: a bad value, a key that does not apply, a key that is missing.
INVALID, NOT_APPLICABLE, MISSING = "invalid", "not applicable", "missing"
SECRET_SHOWN_AS = "[secret]"


@dataclass(frozen=True)
class Problem:
    """One violation, as a rule reports it.

    Attributes:
        key: the key it names (for ``subject`` "Stack name", the stack).
        rule: what the value breaks, without a final period.
        kind: INVALID (the fix sets a value), NOT_APPLICABLE (the fix removes the key, and this
            replaces the key's own violation), MISSING (the fix sets it), or in words what is
            wrong (``is not a secret``; the message says ``<key> <kind>: <rule>``).
        fix: INVALID and MISSING: the value the fix sets (default the key's fix).
        fix_key: INVALID: the key the fix sets, in the form that key was set (default ``key``).
        command: the whole fix command, in place of the one ``kind`` gives.
        path_command: the fix command where the key was set with ``--path`` (default ``command``).
        shown: the value as the message shows it; INVALID and NOT_APPLICABLE show the raw value
            by default (``[secret]`` for a secret), the others none.
        secret: MISSING: the fix sets the key with ``--secret``.
        subject: what the message names, when not ``Configuration '<project>:<key>'``.
    """

    key: str
    rule: str
    kind: str = INVALID
    fix: str | None = None
    fix_key: str | None = None
    command: str | None = None
    path_command: str | None = None
    shown: str | None = None
    secret: bool = False
    subject: str | None = None


class ConfigError(pulumi.RunError):
    """Every invalid configuration value of a run, one violation per entry.

    A ``pulumi.RunError`` so the CLI prints the message without a traceback.

    Attributes:
        violations: the worded problems, in the order they were found.
    """

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        count = len(self.violations)
        header = f"{count} invalid configuration value{'s' if count != 1 else ''}; nothing was deployed:"
        super().__init__("\n".join([header, *self.violations]))


@dataclass(frozen=True)
class Given:
    """What the wording needs of one key as it was set: its raw value (None when unset), its
    parsed value, its form (FLAT, PATH, None) and whether it was set with ``--secret``."""

    raw: Any
    value: Any
    form: str | None
    secret: bool


def wording(problem: Problem, given: Mapping[str, Given], keys: Mapping[str, Key]) -> str:
    """``problem`` as the user reads it: ``<subject> [value '<value>'] <kind>: <rule>.`` and
    ``fix: <command>`` on the next line.

    Args:
        given: key -> how it was set (``Given``), for every key of ``keys``.
        keys: key name -> Key (its fix value and form of fix).
    """
    p, of = problem, given.get(problem.key)
    form = of.form if of is not None else None
    shown_value = p.shown
    if p.kind in (INVALID, NOT_APPLICABLE):
        assert of is not None, f"{p.key} is not a key"
        shown_value = shown(shown_value or (of.raw if of.raw is not None else of.value), of.secret)
    fix = (p.path_command if form == PATH else None) or p.command or _fix(p, form, given, keys)
    subject = p.subject or f"Configuration '{PROJECT}:{p.key}'"
    value_part = f" value '{shown_value}'" if shown_value is not None else ""
    kind = {INVALID: "is invalid", NOT_APPLICABLE: "is invalid", MISSING: "is missing"}.get(p.kind, p.kind)
    return f"{subject}{value_part} {kind}: {p.rule}.\n    fix: {fix}"


def _fix(p: Problem, form: str | None, given: Mapping[str, Given], keys: Mapping[str, Key]) -> str:
    """The fix command that ``p``'s kind gives: set the key (INVALID, MISSING) or remove it
    (NOT_APPLICABLE), in the form it was set."""
    if p.kind == NOT_APPLICABLE:
        return f"pulumi config rm {'--path ' if form == PATH else ''}{p.key}"
    if p.kind == MISSING:
        return f"pulumi config set {'--secret ' if p.secret else ''}{p.key} {p.fix or keys[p.key].fix}"
    name = p.fix_key or p.key
    args, value = fix_args(keys[name], given[name].form)
    return f"pulumi config set {args} {p.fix or value}"


def fix_args(key: Key, form: str | None) -> tuple[str, str]:
    """``(key arguments, value)`` of the fix command, in the form the bad value was set.

    The program reads a flat key before the structured one, so a structured fix cannot
    replace a flat value: a flat list or map gets a flat JSON value (which ``cidr_list``,
    ``string_list`` and ``label_map`` accept), a structured value gets ``--path``.
    """
    if form == PATH and "." in key.name:
        return (key.fix_key, key.fix) if key.fix_key else (f"--path {key.name}", key.fix)
    if key.fix_key:  # a list or a map, set flat
        if isinstance(key.default, Mapping):
            example: Any = dict(key.default)
        else:
            example = list(key.default) or [key.fix]
        return key.name, shlex.quote(json.dumps(example, separators=(",", ":")))
    return key.name, key.fix


def shown(raw: Any, secret: bool = False) -> str:
    """A raw value as a message shows it: ``[secret]`` for a secret, JSON for a list or map."""
    if secret:
        return SECRET_SHOWN_AS
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (dict, list)):
        return json.dumps(raw, separators=(",", ":"))
    return str(raw)
