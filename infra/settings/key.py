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
        default: used when the key is absent in both forms; a parsed value.
        parse: raw value -> typed value, raising ValueError(rule).
        fix: the value the fix command suggests.
        schema_type: the Pulumi.yaml ``config:`` type, or None where the schema cannot express
            the key (no float or object type there).
        description: one line for Pulumi.yaml.
        fix_key: for a list or a map, the ``--path`` arguments of the fix when the bad value
            was set with ``--path``; set flat, the fix is the key with a JSON value
            (see ``fix_args``).
        kind: the value's type in words where neither schema_type nor the parser tells it
            (a recipe number's parser is made per key).
    """

    name: str
    default: Any
    parse: Parser
    fix: str
    schema_type: str | None
    description: str
    fix_key: str | None = None
    kind: str | None = None

    @property
    def value_type(self) -> str:
        """The value's type in words: the schema type, else number, list, map or string."""
        return self.schema_type or self.kind or _VALUE_TYPES.get(self.parse, "string")


def recipe_key(row: recipe.Hyperparameter) -> Key:
    """The ``hyperparams.*`` key of one row of the recipe's table: its default (also the fix's
    value), description, and a parser from its type and limits: ``one_of`` its choices, an
    ``integer`` or a ``number`` within its limits. Pulumi.yaml declares the integer and string
    keys (it has no float type)."""
    if row.choices:
        return Key(row.key, row.default, one_of(row.choices), str(row.default), "string", row.description)
    if row.type is int:
        parse = integer(int(row.minimum), None if row.maximum is None else int(row.maximum))
        return Key(row.key, row.default, parse, str(row.default), "integer", row.description)
    parse = number(row.minimum, row.maximum, above=row.above, below=row.below)
    return Key(row.key, row.default, parse, str(row.default), None, row.description, kind="number")


#: The type, by parser, of the keys that Pulumi.yaml's schema cannot declare; any other such
#: key holds a string.
_VALUE_TYPES: dict[Parser, str] = {
    optional_positive_int: "integer",
    optional_boolean: "boolean",
    data_source: "string or list",
    cidr_list: "list",
    string_list: "list",
    instance_types: "list",
    tolerations: "list",
    label_map: "map",
    node_selector: "map",
}
