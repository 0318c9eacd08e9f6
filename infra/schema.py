"""Rewrites the ``config:`` section of Pulumi.yaml from the schema (infra/settings/config.py, the
one place defaults live): ``.venv/bin/python -m infra.schema``. tests/infra/test_infra_config.py fails
while the two differ."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.settings import project_config_schema

PULUMI_YAML = Path(__file__).resolve().parent.parent / "Pulumi.yaml"


def render(current: str) -> str:
    """``current`` Pulumi.yaml text with everything from ``config:`` on replaced."""
    head = current.split("\nconfig:\n", 1)[0].rstrip("\n") + "\n"
    return head + yaml.safe_dump({"config": project_config_schema()}, sort_keys=False, width=100)


def main() -> None:
    PULUMI_YAML.write_text(render(PULUMI_YAML.read_text()))


if __name__ == "__main__":
    main()
