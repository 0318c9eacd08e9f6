"""Rewrites the ``config:`` section of Pulumi.yaml from the schema (infra/settings/config.py, the
one place defaults live): ``.venv/bin/python -m infra.schema``. tests/infra/test_infra_config.py fails
while the two differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.settings import KEYS

PULUMI_YAML = Path(__file__).resolve().parent.parent / "Pulumi.yaml"
#: The Pulumi.yaml ``config:`` type of a key, by its default's type. A key of any other
#: default is left out: the schema has no float or object type, and a declared key without a
#: default is *required* by the CLI.
SCHEMA_TYPES: dict[type, str] = {bool: "boolean", int: "integer", str: "string"}


def project_config_schema() -> dict[str, dict[str, Any]]:
    """The ``config:`` section of Pulumi.yaml (tests keep the file equal): every key the schema
    can express (string, integer, boolean), in the table's order, with its default."""
    return {
        k.name: {"type": SCHEMA_TYPES[type(k.default)], "description": k.description, "default": k.default}
        for k in KEYS
        if type(k.default) in SCHEMA_TYPES
    }


def render(current: str) -> str:
    """``current`` Pulumi.yaml text with everything from ``config:`` on replaced."""
    head = current.split("\nconfig:\n", 1)[0].rstrip("\n") + "\n"
    return head + yaml.safe_dump({"config": project_config_schema()}, sort_keys=False, width=100)


def main() -> None:
    PULUMI_YAML.write_text(render(PULUMI_YAML.read_text()))


if __name__ == "__main__":
    main()
