"""One configuration key: the ``Key`` record (name, default, parser, fix, schema type and
description), and ``recipe_key``, which makes the ``hyperparams.*`` key of a row of
trainer/contract/recipe.py's table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.settings.cloud_parsers import instance_types
from infra.settings.label_parsers import label_map, node_selector, tolerations
from infra.settings.parsers import (
    Parser,
    cidr_list,
    data_source,
    integer,
    number,
    one_of,
    optional_boolean,
    optional_pool_size,
    optional_port,
    optional_positive_int,
    string_list,
)
from trainer.contract import recipe


@dataclass(frozen=True)
class Key:
    """One configuration key.

    Attributes:
        name: key within the project namespace, dotted like the chart's values
            (``worker.number``); users set it flat or with ``--path``.
        default: used when the key is absent in both forms; a parsed value. Its type gives
            the Pulumi.yaml schema type (``schema_type``).
        parse: raw value -> typed value, raising ValueError(rule).
        description: one line for Pulumi.yaml and docs/configuration.md.
        fix: the value the fix command suggests; unset, the default as a user writes it
            (a key without a scalar default must name one: ValueError otherwise).
        fix_key: for a list or a map, the ``--path`` arguments of the fix when the bad value
            was set with ``--path``; set flat, the fix is the key with a JSON value
            (see ``messages.fix_args``).
    """

    name: str
    default: Any
    parse: Parser
    description: str
    fix: str = ""
    fix_key: str | None = None

    def __post_init__(self) -> None:
        if not self.fix:
            if self.default is None or isinstance(self.default, (tuple, list, dict)):
                raise ValueError(f"key {self.name}: a default of {self.default!r} needs a fix example")
            object.__setattr__(self, "fix", _text(self.default))

    @property
    def schema_type(self) -> str | None:
        """The Pulumi.yaml ``config:`` type, by the default's type: boolean, integer or string;
        None where the schema cannot express the key (no float or object type there, and a
        declared key without a default is required)."""
        return _SCHEMA_TYPES.get(type(self.default))

    @property
    def value_type(self) -> str:
        """The value's type in words: the schema type, else number, list, map or string."""
        if self.schema_type:
            return self.schema_type
        return "number" if isinstance(self.default, float) else _VALUE_TYPES.get(self.parse, "string")


def recipe_key(row: recipe.Hyperparameter) -> Key:
    """The ``hyperparams.*`` key of one row of the recipe's table: its default (also the fix's
    value), description, and a parser from its type and limits: ``one_of`` its choices, an
    ``integer`` or a ``number`` within its limits."""
    if row.choices:
        parse = one_of(row.choices)
    elif row.type is int:
        if row.minimum is None:
            raise ValueError(f"recipe row {row.key}: an integer row needs a minimum")
        parse = integer(int(row.minimum), None if row.maximum is None else int(row.maximum))
    else:
        parse = number(row.minimum, row.maximum, above=row.above, below=row.below)
    return Key(row.key, row.default, parse, row.description)


def _text(value: Any) -> str:
    """A scalar as a user writes it on the command line: true/false, or its text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_SCHEMA_TYPES: dict[type, str] = {bool: "boolean", int: "integer", str: "string"}

#: The type, by parser, of the keys that Pulumi.yaml's schema cannot declare; any other such
#: key holds a string.
_VALUE_TYPES: dict[Parser, str] = {
    optional_positive_int: "integer",
    optional_port: "integer",
    optional_pool_size: "integer",
    optional_boolean: "boolean",
    data_source: "string or list",
    cidr_list: "list",
    string_list: "list",
    instance_types: "list",
    tolerations: "list",
    label_map: "map",
    node_selector: "map",
}
