"""Violations in Pulumi's own wording (key, value, rule, fix) and the error that lists them."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from infra.settings.key import Key
from infra.settings.key_values import PROJECT
from infra.settings.keys import KEYS_BY_NAME, SECRET_CAPABLE_SHOWN
from infra.settings.raw import PATH

SECRET_SHOWN_AS = "[secret]"


class ConfigError(pulumi.RunError):
    """Every invalid configuration value of a run, one violation per entry.

    A ``pulumi.RunError`` so the CLI prints the message without a traceback.

    Attributes:
        violations: the formatted lines, one per bad key, in key order.
    """

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        count = len(self.violations)
        header = f"{count} invalid configuration value{'s' if count != 1 else ''}; nothing was deployed:"
        super().__init__("\n".join([header, *self.violations]))


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
    if secret:
        return SECRET_SHOWN_AS
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (dict, list)):
        return json.dumps(raw, separators=(",", ":"))
    return str(raw)


def conflict(
    key: str, flat: Any, structured: Any, flat_secret: bool = False, structured_secret: bool = False
) -> str:
    """The violation of a key set both ways to different values, with both ways out."""
    flat_shown, structured_shown = shown(flat, flat_secret), shown(structured, structured_secret)
    return (
        f"Configuration '{PROJECT}:{key}' is set twice, to '{flat_shown}' (flat) and to "
        f"'{structured_shown}' (--path): a key must be set one way only.\n"
        f"    fix: pulumi config rm {key} (keeps '{structured_shown}'), "
        f"or pulumi config rm --path {key} (keeps '{flat_shown}')"
    )


def violation(key: str, raw: Any, rule: str, fix_key: str, fix_value: str, secret: bool = False) -> str:
    """One violation in Pulumi's own wording: key, value, rule, then the fix command.

    A value set with ``--secret`` is shown as ``[secret]``, never as its plaintext.
    """
    return (
        f"Configuration '{PROJECT}:{key}' value '{shown(raw, secret)}' is invalid: {rule}.\n"
        f"    fix: pulumi config set {fix_key} {fix_value}"
    )


def secret_refused(name: str, structured: bool) -> str:
    """The violation of a secret the stack would write out in plain text (value not shown)."""
    capable = ", ".join(SECRET_CAPABLE_SHOWN[:-1]) + " and " + SECRET_CAPABLE_SHOWN[-1]
    if structured:
        return (
            f"Configuration '{PROJECT}:{name}' holds a secret: the stack writes {name}.* values into "
            "Kubernetes objects and stack outputs in plain text, so they cannot stay secret "
            f"(only {capable} can).\n"
            f"    fix: pulumi config set --path {name}.<key> <value> (again, without --secret)"
        )
    return (
        f"Configuration '{PROJECT}:{name}' is a secret: the stack writes this value into Kubernetes "
        "objects and stack outputs in plain text, so it cannot stay secret "
        f"(only {capable} can).\n"
        f"    fix: pulumi config set {name} <value> (again, without --secret)"
    )


def not_applicable(key: str, raw: Any, rule: str, form: str | None, secret: bool = False) -> str:
    """The violation of a key that the rest of the configuration makes meaningless: its fix
    removes it, in the form it was set."""
    return (
        f"Configuration '{PROJECT}:{key}' value '{shown(raw, secret)}' is invalid: {rule}.\n"
        f"    fix: pulumi config rm {'--path ' if form == PATH else ''}{key}"
    )


def missing(key: str, rule: str, fix: str | None = None, secret: bool = False) -> str:
    """The violation of a required key that is not set."""
    return (
        f"Configuration '{PROJECT}:{key}' is missing: {rule}.\n"
        f"    fix: pulumi config set {'--secret ' if secret else ''}{key} {fix or KEYS_BY_NAME[key].fix}"
    )


def password_not_secret(key: str, form: str | None) -> str:
    """The violation of a password set without ``--secret`` (its value is not shown)."""
    path = "--path " if form == PATH else ""
    return (
        f"Configuration '{PROJECT}:{key}' is not a secret: the stack file would hold the registry password "
        "in plain text.\n"
        f"    fix: pulumi config set --secret {path}{key} <password>"
    )


def source_not_plain(key: str, shown_value: str, what: str, form: str | None) -> str:
    """The violation of a data source URL that holds more than scheme, host, port and path, set
    without ``--secret`` (infra/settings/url_credentials.py). ``shown_value`` is the value with
    those parts hidden; ``what`` names the first, e.g. "a query string (?...)"."""
    path = "--path " if form == PATH else ""
    return (
        f"Configuration '{PROJECT}:{key}' value '{shown_value}' is not a secret but holds {what}: a "
        f"{key} in plain text is an http(s) URL of scheme, host, port and path only, since user info, a "
        "query or a fragment carries a credential whenever the server asks for one (a presigned URL's "
        "signature, an Azure SAS sig, a token), which the stack file, the staging Job's command and the "
        "state would hold in plain text.\n"
        f"    fix: pulumi config set --secret {path}{key} <the same value>"
    )


def kubeconfig_not_secret(key: str, lines: int) -> str:
    """The violation of kubeconfig content set without ``--secret`` (shown by its size only)."""
    return (
        f"Configuration '{PROJECT}:{key}' value '<kubeconfig content, {lines} lines>' is not a secret: "
        "kubeconfig content holds the cluster's credentials (a token, a client key or password), which "
        "the stack file (Pulumi.<stack>.yaml) would hold in plain text; set the content with --secret, or "
        "set the path of the file instead (a path is read at every operation and stored as the path).\n"
        f"    fix: pulumi config set --secret {key} < ~/.kube/config, or pulumi config set {key} ~/.kube/config"
    )


def source_ranges_too_wide(key: str, shown_value: str, why: str, form: str | None) -> str:
    """The violation of source ranges that admit the internet (infra/settings/source_ranges.py):
    ``why`` says how much and what to do instead. The fix replaces the whole list, in the form
    it was set (setting one item would keep the others)."""
    if form == PATH:
        fix = f"pulumi config rm --path {key} && pulumi config set --path '{key}[0]' <your address>/32"
    else:
        fix = f"pulumi config set {key} '[\"<your address>/32\"]'"
    return (
        f"Configuration '{PROJECT}:{key}' value '{shown_value}' is invalid: these ranges {why}.\n"
        f"    fix: {fix}"
    )
