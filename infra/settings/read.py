"""The read phase: every key in both forms the Pulumi CLI stores, parsed on its own, and the
violations found (``Reading``), which the later phases add theirs to."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, is_config_secret

from infra.settings.config import KEYS, KEYS_BY_NAME, SECRET_CAPABLE_KEYS
from infra.settings.constants import PROJECT
from infra.settings.keys import Key
from infra.settings.problems import FLAT, NOT_APPLICABLE, PATH, Given, Problem, shown, wording

#: The keys that may stay secret, as the refusal of any other secret lists them.
SECRET_CAPABLE_SHOWN = (
    "kubeconfig",
    "nas.mountTargetDomain",
    "nfs.*",
    "data.source",
    "registryCredentials.*",
)
#: Top-level names under which every key can stay secret (registryCredentials): a
#: `pulumi config set --secret --path a.b` makes all of `a` secret, which is refused elsewhere.
_SECRET_CAPABLE_HEADS = {k.split(".")[0] for k in SECRET_CAPABLE_KEYS if "." in k} - {
    k.name.split(".")[0] for k in KEYS if k.name not in SECRET_CAPABLE_KEYS
}


class RawConfig:
    """Reads a key in both forms the CLI stores.

    `pulumi config set worker.number 4` stores the flat key ``tf-mnist:worker.number`` = "4";
    `pulumi config set --path worker.number 4` stores ``tf-mnist:worker`` = {"number": 4}.
    The flat key is the one used when both exist: the CLI writes Pulumi.yaml's defaults through
    the structured form, so a structured value equal to the default beside a flat one may be
    that default. Any other pair of different values is a conflict (``conflicting``):
    silently dropping one would ignore a command the user ran.
    """

    def __init__(self, config: pulumi.Config) -> None:
        self._config = config

    @staticmethod
    def is_secret(name: str, form: str | None) -> bool:
        """Whether ``name`` in ``form`` was set with ``--secret``: the CLI names the flat key,
        or for a structured value the top-level key that holds it."""
        if form is None:
            return False
        return is_config_secret(f"{PROJECT}:{name if form == FLAT else name.split('.')[0]}")

    def forms(self, name: str) -> tuple[Any, Any]:
        """``(flat value, structured value)`` of a key, None where that form is not set."""
        flat = self._config.get(name)
        head, *path = name.split(".")
        raw = self._config.get(head) if path else None
        try:
            node: Any = json.loads(raw) if raw is not None else None
        except ValueError:
            return flat, None
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return flat, None
            node = node[part]
        return flat, node


def conflicting(key: Key, flat: Any, structured: Any) -> bool:
    """True when a key set both flat and with --path holds two different values.

    A valid structured value equal to the key's default is not a conflict: the CLI writes
    Pulumi.yaml's default there by itself (and the flat value is then the user's).
    """

    def parsed(raw: Any) -> tuple[bool, Any]:
        try:
            return True, key.parse(raw)
        except ValueError:
            return False, None

    structured_ok, structured_value = parsed(structured)
    if structured_ok and structured_value == key.default:
        return False
    flat_ok, flat_value = parsed(flat)
    return not (structured_ok and flat_ok and flat_value == structured_value)


@dataclass
class Reading:
    """Every key of one run as read, and the violations found so far, worded in report order.

    Attributes:
        raw_config: the config bag, both forms.
        given: key -> how it was set and its parsed value; a key that is unset, set twice or
            bad holds its default, so that the later phases can still run on it.
        problems: the violations, worded (``problems.wording``), in report order.
        own_problem: key -> index in ``problems`` of its own value's violation, which a
            NOT_APPLICABLE problem of the key replaces (removing it is then the one fix).
    """

    raw_config: RawConfig
    given: dict[str, Given] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    own_problem: dict[str, int] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, Any]:
        """Key -> parsed value (its default where unset, set twice or bad)."""
        return {name: given.value for name, given in self.given.items()}

    @property
    def secrets(self) -> set[str]:
        """The keys whose used value was set with ``--secret``."""
        return {name for name, given in self.given.items() if given.secret}

    def add(self, problems: Iterable[Problem], own: bool = False) -> None:
        """Word ``problems`` in; ``own``: each is its key's own value's violation."""
        for problem in problems:
            text = wording(problem, self.given, KEYS_BY_NAME)
            if problem.kind == NOT_APPLICABLE and problem.key in self.own_problem:
                self.problems[self.own_problem[problem.key]] = text
                continue
            if own:
                self.own_problem[problem.key] = len(self.problems)
            self.problems.append(text)

    def is_set(self, name: str) -> bool:
        """Set by the user: flat at all, or with --path to a bad value or other than the default
        (which the CLI writes there by itself for keys Pulumi.yaml declares)."""
        given = self.given[name]
        if given.form == PATH:
            return name in self.own_problem or given.value != KEYS_BY_NAME[name].default
        return given.form == FLAT


def read(raw_config: RawConfig) -> Reading:
    """Parse every key on its own, then report the project keys that are none of them."""
    reading = Reading(raw_config)
    refused_heads: set[str] = set()
    for key in KEYS:
        _read_key(reading, key, refused_heads)
    reading.add(unknown_keys(project_config()))
    return reading


def _read_key(reading: Reading, key: Key, refused_heads: set[str]) -> None:
    """One key into ``reading``; ``refused_heads``: top-level names already refused as secrets."""
    flat, structured = reading.raw_config.forms(key.name)
    form = FLAT if flat is not None else PATH if structured is not None else None
    raw = flat if flat is not None else structured
    flat_secret = flat is not None and reading.raw_config.is_secret(key.name, FLAT)
    structured_secret = structured is not None and reading.raw_config.is_secret(key.name, PATH)
    secret = flat_secret if form == FLAT else structured_secret
    reading.given[key.name] = Given(raw, key.default, form, secret)
    head = key.name.split(".")[0]
    if structured_secret and head not in refused_heads and head not in _SECRET_CAPABLE_HEADS:
        refused_heads.add(head)
        reading.add([_secret_refused(head, structured=True)])
    if flat_secret and not key.secret:
        reading.add([_secret_refused(key.name, structured=False)])
    if flat is not None and structured is not None and conflicting(key, flat, structured):
        flat_shown, structured_shown = shown(flat, flat_secret), shown(structured, structured_secret)
        conflict = Problem(
            key.name,
            "a key must be set one way only",
            kind=f"is set twice, to '{flat_shown}' (flat) and to '{structured_shown}' (--path)",
            command=f"pulumi config rm {key.name} (keeps '{structured_shown}'), "
            f"or pulumi config rm --path {key.name} (keeps '{flat_shown}')",
        )
        reading.add([conflict], own=True)
    elif raw is not None:
        try:
            reading.given[key.name] = Given(raw, key.parse(raw), form, secret)
        except ValueError as error:
            reading.add([Problem(key.name, str(error))], own=True)


def _secret_refused(name: str, structured: bool) -> Problem:
    """A secret the stack would write out in plain text (its value is not shown)."""
    capable = ", ".join(SECRET_CAPABLE_SHOWN[:-1]) + " and " + SECRET_CAPABLE_SHOWN[-1]
    written = f"writes {name}.* values" if structured else "writes this value"
    return Problem(
        name,
        f"the stack {written} into Kubernetes objects and stack outputs in plain text, so "
        f"{'they' if structured else 'it'} cannot stay secret (only {capable} can)",
        kind="holds a secret" if structured else "is a secret",
        command=f"pulumi config set {f'--path {name}.<key>' if structured else name} <value> (again, without --secret)",
    )


def project_config() -> dict[str, Any]:
    """Every ``tf-mnist:`` key of this run (the engine's config), without the prefix."""
    merged = {**get_config_env(), **CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in merged.items() if key.startswith(prefix)}


def unknown_keys(config: Mapping[str, Any]) -> list[Problem]:
    """Project keys the program does not read (typos such as worker.numbr).

    Args:
        config: every ``tf-mnist:`` key the engine passed, without the prefix, as the CLI
            hands them over (a structured value as its JSON text).

    A flat key must be a key's name; a structured value (under the first segment of a dotted
    name) may hold only paths that lead to one. Values of keys that are maps (matchLabels) are
    not looked into.
    """
    names = set(KEYS_BY_NAME)
    heads = {name.split(".")[0] for name in names if "." in name}
    found: list[tuple[str, Any, bool, bool]] = []  # path, value, structured, secret

    def walk(path: str, node: Any, secret: bool) -> None:
        if path in names:
            return
        if isinstance(node, dict) and any(name.startswith(path + ".") for name in names):
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
            Problem(
                path,
                "the program would ignore it",
                kind=f"is not a setting of this stack{hint}",
                command=f"pulumi config rm {'--path ' if structured else ''}{path}",
                shown=shown(raw, secret),
            )
        )
    return out
