"""Reading one key in both forms the Pulumi CLI stores, and what counts as a conflict of the two."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, is_config_secret

from infra.settings.key import Key
from infra.settings.key_values import PROJECT

#: The two forms a value can be set in (see RawConfig).
FLAT = "flat"
PATH = "path"


class RawConfig:
    """Reads a key in both forms the CLI stores.

    `pulumi config set worker.number 4` stores the flat key ``tf-mnist:worker.number`` = "4";
    `pulumi config set --path worker.number 4` stores ``tf-mnist:worker`` = {"number": 4}.
    The flat key is the one used when both exist: the CLI writes Pulumi.yaml's defaults through
    the structured form, so a structured value equal to the default beside a flat one may be
    that default. Any other pair of different values is a conflict that ``load_settings``
    reports (``conflicting``): silently dropping one would ignore a command the user ran.
    """

    def __init__(self, config: pulumi.Config) -> None:
        self._config = config

    def get(self, name: str) -> tuple[Any, str | None]:
        """The value the program uses and the form it came from: FLAT, PATH, or None when unset."""
        flat, structured = self.forms(name)
        if flat is not None:
            return flat, FLAT
        if structured is not None:
            return structured, PATH
        return None, None

    @staticmethod
    def is_secret(name: str, form: str | None) -> bool:
        """Whether the value of ``name`` in ``form`` was set with ``--secret``.

        The CLI names the flat key, or for a structured value the top-level key that holds it.
        """
        if form == FLAT:
            return is_config_secret(f"{PROJECT}:{name}")
        if form == PATH:
            return is_config_secret(f"{PROJECT}:{name.split('.')[0]}")
        return False

    def forms(self, name: str) -> tuple[Any, Any]:
        """``(flat value, structured value)`` of a key, None where that form is not set."""
        flat = self._config.get(name)
        head, *path = name.split(".")
        if not path:
            return flat, None
        raw = self._config.get(head)
        if raw is None:
            return flat, None
        try:
            node: Any = json.loads(raw)
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


def project_config() -> dict[str, Any]:
    """Every ``tf-mnist:`` key of this run (the engine's config), without the prefix."""
    merged = {**get_config_env(), **CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in merged.items() if key.startswith(prefix)}
