"""The read phase: every key parsed on its own, in the form it was set, and the violations found."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime.config import is_config_secret

from infra.settings import messages
from infra.settings.key import Key
from infra.settings.key_values import PROJECT
from infra.settings.keys import KEYS, KEYS_BY_NAME, SECRET_CAPABLE_KEYS
from infra.settings.messages import conflict, fix_args, not_applicable, secret_refused, shown, violation
from infra.settings.raw import FLAT, PATH, RawConfig, conflicting, project_config

#: Top-level names under which every key can stay secret (registryCredentials): a
#: `pulumi config set --secret --path a.b` makes all of `a` secret, which is refused elsewhere.
_SECRET_CAPABLE_HEADS = {k.split(".")[0] for k in SECRET_CAPABLE_KEYS if "." in k} - {
    k.name.split(".")[0] for k in KEYS if k.name not in SECRET_CAPABLE_KEYS
}


@dataclass
class Reading:
    """Every key of one run as read, and the violations found so far.

    The later phases add their violations here too, through ``bad``, ``refuse`` and
    ``missing``, so that one ``ConfigError`` lists them all in the order they were found.

    Attributes:
        raw_config: the config bag, both forms.
        values: key -> parsed value; the key's default where it is unset, set twice, or bad.
        raws: key -> the raw value the program uses (None when unset).
        forms: key -> FLAT, PATH, or None when unset.
        secrets: keys whose used value was set with ``--secret``.
        problems: the violations, in report order.
        own_problem: key -> index in ``problems`` of its own value's violation, which
            ``refuse`` replaces where a later rule finds that the key does not apply at all
            (removing it is then the one fix).
    """

    raw_config: RawConfig
    values: dict[str, Any] = field(default_factory=dict)
    raws: dict[str, Any] = field(default_factory=dict)
    forms: dict[str, str | None] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    own_problem: dict[str, int] = field(default_factory=dict)

    def bad(
        self,
        name: str,
        rule: str,
        fix_key: str | None = None,
        fix_value: str | None = None,
        shown_as: str | None = None,
    ) -> None:
        """``name``'s value breaks ``rule``; the fix sets ``fix_key`` (default ``name``) to
        ``fix_value`` (default that key's fix), in the form that key was set in.

        ``shown_as`` replaces the value in the message (kubeconfig content is shown by its size).
        """
        fix_name = fix_key or name
        args, value = fix_args(KEYS_BY_NAME[fix_name], self.forms[fix_name])
        raw = self.raws[name] if self.raws[name] is not None else self.values[name]
        self.problems.append(
            violation(name, shown_as or raw, rule, args, fix_value or value, secret=name in self.secrets)
        )

    def refuse(self, name: str, rule: str) -> None:
        """``name`` does not apply: this violation replaces its own one, if any."""
        message = not_applicable(name, self.raws[name], rule, self.forms[name], secret=name in self.secrets)
        if name in self.own_problem:
            self.problems[self.own_problem[name]] = message
        else:
            self.problems.append(message)

    def missing(self, name: str, rule: str, fix: str | None = None, secret: bool = False) -> None:
        """``name`` is required (by ``rule``) and not set."""
        self.problems.append(messages.missing(name, rule, fix, secret))

    def is_set(self, name: str) -> bool:
        """Set by the user: flat at all, or with --path to other than the default (which the
        CLI writes there by itself for keys Pulumi.yaml declares)."""
        flat, structured = self.raw_config.forms(name)
        if flat is not None:
            return True
        if structured is None:
            return False
        try:
            return KEYS_BY_NAME[name].parse(structured) != KEYS_BY_NAME[name].default
        except ValueError:
            return True


def read(raw_config: RawConfig) -> Reading:
    """Parse every key of KEYS on its own, then report the project keys that are none of them.

    A key that is bad, or set twice (flat and --path) to different values, keeps its default
    in ``values`` so that the later phases can still run on it; its violation is recorded.
    """
    reading = Reading(raw_config)
    refused_heads: set[str] = set()
    for key in KEYS:
        _read_key(reading, key, refused_heads)
    reading.problems += unknown_keys(project_config())
    return reading


def _read_key(reading: Reading, key: Key, refused_heads: set[str]) -> None:
    """One key into ``reading``; ``refused_heads``: top-level names already refused as secrets."""
    raw, form = reading.raw_config.get(key.name)
    reading.raws[key.name] = raw
    reading.forms[key.name] = form
    reading.values[key.name] = key.default
    flat, structured = reading.raw_config.forms(key.name)
    flat_secret = flat is not None and reading.raw_config.is_secret(key.name, FLAT)
    structured_secret = structured is not None and reading.raw_config.is_secret(key.name, PATH)
    head = key.name.split(".")[0]
    if structured_secret and head not in refused_heads and head not in _SECRET_CAPABLE_HEADS:
        refused_heads.add(head)
        reading.problems.append(secret_refused(head, structured=True))
    if flat_secret and key.name not in SECRET_CAPABLE_KEYS:
        reading.problems.append(secret_refused(key.name, structured=False))
    if flat_secret if form == FLAT else structured_secret:
        reading.secrets.add(key.name)
    if flat is not None and structured is not None and conflicting(key, flat, structured):
        reading.own_problem[key.name] = len(reading.problems)
        reading.problems.append(conflict(key.name, flat, structured, flat_secret, structured_secret))
    elif raw is not None:
        try:
            reading.values[key.name] = key.parse(raw)
        except ValueError as error:
            reading.own_problem[key.name] = len(reading.problems)
            reading.problems.append(
                violation(key.name, raw, str(error), *fix_args(key, form), secret=key.name in reading.secrets)
            )


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """Violations for project keys the program does not read (typos such as worker.numbr).

    Args:
        config: every ``tf-mnist:`` key the engine passed, without the prefix, as the CLI
            hands them over (a structured value as its JSON text).

    A flat key must be a name in KEYS; a structured value (under the first segment of a dotted
    name) may hold only paths that lead to one. Values of keys that are maps (matchLabels) are
    not looked into.
    """
    names = set(KEYS_BY_NAME)
    heads = {name.split(".")[0] for name in names if "." in name}
    found: list[tuple[str, Any, bool, bool]] = []  # path, value, structured, secret

    def leads_to_a_key(path: str) -> bool:
        return any(name.startswith(path + ".") for name in names)

    def walk(path: str, node: Any, secret: bool) -> None:
        if path in names:
            return
        if isinstance(node, dict) and leads_to_a_key(path):
            for part, child in node.items():
                walk(f"{path}.{part}", child, secret)
            return
        found.append((path, node, True, secret))

    for name, raw in config.items():
        secret = is_config_secret(f"{PROJECT}:{name}")
        if name in names:
            continue
        if name in heads:
            try:
                node = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                node = raw
            if isinstance(node, dict):
                for part, child in node.items():
                    walk(f"{name}.{part}", child, secret)
                continue
        found.append((name, raw, False, secret))

    out = []
    for path, raw, structured, secret in sorted(found, key=lambda f: f[0]):
        close = difflib.get_close_matches(path, sorted(names | heads), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(
            f"Configuration '{PROJECT}:{path}' value '{shown(raw, secret)}' is not a setting of this "
            f"stack{hint}: the program would ignore it.\n"
            f"    fix: pulumi config rm {'--path ' if structured else ''}{path}"
        )
    return out
