"""How a configuration key is declared, and the table of every key that the schema gives.

A key is a field of a section class (infra/settings/config.py), declared once with ``key``:
``port: int = key(8000, integer(1, 65535), "gRPC port of worker and chief tasks.")``. Its name
is the section's prefix and the field's name in camelCase (``worker.port``); its type is the
field's annotation; its default, rule (a parser of infra/values/) and description are the
arguments. ``keys_of`` walks the schema in declaration order: Pulumi.yaml's ``config:`` section
(infra/schema.py) and docs/configuration.md's table (scripts/config_table.py) come from it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from infra.values.parsers import Parser, integer, number, one_of
from trainer.contract import recipe

#: Field metadata: a key's Key (unnamed), a section's key prefix, the recipe's section.
SPEC, PREFIX, RECIPE = "key", "prefix", "recipe"


def key(
    default: Any,
    parse: Parser,
    description: str,
    *,
    fix: str = "",
    fix_key: str | None = None,
    secret: bool = False,
) -> Any:
    """A section field that holds one key's parsed value (``default`` while it is unset).

    Args:
        default: a parsed value; its type gives the Pulumi.yaml schema type (infra/schema.py).
        parse: raw value -> typed value, raising ValueError(rule).
        description: one line for Pulumi.yaml and docs/configuration.md.
        fix: the value the fix command suggests; unset, the default as a user writes it (a key
            without a scalar default must name one: ValueError otherwise).
        fix_key: for a list or a map, the ``--path`` arguments of the fix when the bad value
            was set with ``--path`` (infra/settings/problems.py).
        secret: whether the value may be set with ``--secret``: the program then carries it as
            a Pulumi secret. Any other key lands in names, labels, pod specs or plain outputs,
            so a secret value there is refused.
    """
    if not fix:
        if default is None or isinstance(default, (tuple, list, dict)):
            raise ValueError(f"a default of {default!r} needs a fix example ({description})")
        fix = _text(default)
    metadata = {SPEC: Key(default, parse, description, fix, fix_key, secret)}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def part(prefix: str) -> Any:
    """A field of the root config that holds a section, whose keys start ``<prefix>.``."""
    return dataclasses.field(metadata={PREFIX: prefix})


def recipe_part() -> Any:
    """The root config's field of the recipe: argparse dest -> value, one ``hyperparams.*`` key
    per row of trainer/contract/recipe.py's table."""
    return dataclasses.field(default_factory=dict, metadata={RECIPE: True})


@dataclass(frozen=True)
class Key:
    """One configuration key, as the table lists it.

    Attributes:
        default, parse, description, fix, fix_key, secret: as ``key`` declares them.
        name: key within the project namespace, dotted like the chart's values
            (``worker.number``); users set it flat or with ``--path``.
        path: the attribute path of its value in the config (``("worker", "number")``); for
            a recipe key, ``("hyperparams", <dest>)``.
    """

    default: Any
    parse: Parser
    description: str
    fix: str
    fix_key: str | None
    secret: bool
    name: str = ""
    path: tuple[str, ...] = ()


def camel(name: str) -> str:
    """A field's name as its key spells it: ``gpus_per_instance`` -> ``gpusPerInstance``."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def keys_of(cls: type, prefix: str = "", path: tuple[str, ...] = ()) -> Iterator[Key]:
    """The keys of a section class (and the sections it holds), in declaration order."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if PREFIX in f.metadata:
            yield from keys_of(hints[f.name], f.metadata[PREFIX], (*path, f.name))
        elif RECIPE in f.metadata:
            yield from (recipe_key(row, (*path, f.name, row.dest)) for row in recipe.HYPERPARAMETERS)
        elif SPEC in f.metadata:
            name = f"{prefix}.{camel(f.name)}" if prefix else camel(f.name)
            yield dataclasses.replace(f.metadata[SPEC], name=name, path=(*path, f.name))


def build(cls: type, values: Mapping[str, Any], prefix: str = "") -> Any:
    """An instance of section class ``cls`` from ``values`` (key name -> parsed value)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if PREFIX in f.metadata:
            fields[f.name] = build(hints[f.name], values, f.metadata[PREFIX])
        elif RECIPE in f.metadata:
            fields[f.name] = {row.dest: values[row.key] for row in recipe.HYPERPARAMETERS}
        elif SPEC in f.metadata:
            value = values[f"{prefix}.{camel(f.name)}" if prefix else camel(f.name)]
            fields[f.name] = dict(value) if isinstance(value, Mapping) else value
    return cls(**fields)


def recipe_key(row: recipe.Hyperparameter, path: tuple[str, ...]) -> Key:
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
    return Key(row.default, parse, row.description, _text(row.default), None, False, row.key, path)


def _text(value: Any) -> str:
    """A scalar as a user writes it on the command line: true/false, or its text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
