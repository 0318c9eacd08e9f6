"""Every key that the settings pipeline names in a string is a key of the table.

The rules and the derive phase read values by key name (``v["worker.port"]``,
``r.bad("ps.port", ...)``) and group keys in tuples (``CREATED_CLUSTER_KEYS``). A misspelt name
would otherwise fail only when its rule runs on a configuration that reaches it; this reads the
modules' source, so it fails on any configuration.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from infra.settings.keys import KEYS_BY_NAME

SETTINGS = Path(__file__).resolve().parents[2] / "infra" / "settings"
#: Reading's methods whose first argument (and bad's fix_key) names a key.
KEY_METHODS = {"bad", "refuse", "missing", "is_set"}
#: The names a key lookup reads from: ``values``, ``v`` (its short name) and ``r.values``.
VALUE_MAPS = {"values", "v"}


def _is_value_map(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in VALUE_MAPS) or (
        isinstance(node, ast.Attribute) and node.attr == "values"
    )


def _listed_strings(node: ast.AST) -> list[str]:
    """The strings that tuples, lists and sets in ``node`` hold as items (not those inside calls)."""
    if isinstance(node, ast.Call):
        return []
    found = []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found = [n.value for n in node.elts if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return found + [s for child in ast.iter_child_nodes(node) for s in _listed_strings(child)]


def key_names_in(tree: ast.Module) -> list[str]:
    """The key names a module's code spells out: value lookups, Reading calls, *_KEYS tuples."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_value_map(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.append(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in KEY_METHODS
        ):
            named = node.args[:1] + (node.args[2:3] if node.func.attr == "bad" else [])
            named += [k.value for k in node.keywords if k.arg == "fix_key"]
            found += [n.value for n in named if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for statement in tree.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        if any(isinstance(t, ast.Name) and t.id.endswith("_KEYS") for t in targets) and statement.value:
            found += _listed_strings(statement.value)
    return found


MODULES = sorted(SETTINGS.glob("*.py"))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_every_key_named_in_the_pipeline_is_a_key(module: Path):
    names = key_names_in(ast.parse(module.read_text()))
    assert [name for name in names if name not in KEYS_BY_NAME] == []


def test_the_scan_finds_the_lookups_it_guards():
    """Counted over the whole package, so that a change of spelling (a rename of ``v``) that
    hides the lookups from the scan fails here."""
    names = [name for module in MODULES for name in key_names_in(ast.parse(module.read_text()))]
    assert len(names) >= 100
    assert {"worker.port", "ps.port", "cluster.podVswitchId", "nfs.server"} <= set(names)


def test_a_misspelt_key_is_found():
    tree = ast.parse('def rule(r, d):\n    if r.values["worker.prot"] > 0:\n        r.bad("ps.prt", "x")\n')
    assert [n for n in key_names_in(tree) if n not in KEYS_BY_NAME] == ["worker.prot", "ps.prt"]
