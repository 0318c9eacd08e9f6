"""Every key that the settings pipeline names in a string is a key of the table, and no value
is read by its key's name.

The rules read values as typed attributes (``c.worker.port``), which mypy checks; they name
keys only in what they report (``Problem("ps.port", ...)``, ``r.is_set("clusterIdentifier")``,
how a key was set: ``r.given["data.source"].form``) and in tuples of keys
(``POD_VSWITCH_KEYS``; whole sections come from the schema: ``section_keys``). A misspelt name would otherwise fail only when its rule runs on a
configuration that reaches it; this reads the modules' source, so it fails on any configuration.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from infra.settings import KEYS_BY_NAME

REPO = Path(__file__).resolve().parents[2]
SETTINGS = REPO / "infra" / "settings"
#: Calls whose first argument (and fix_key) names a key: a problem, and Reading.is_set.
KEY_CALLS = {"Problem", "is_set"}
#: What a key's name may index besides the table: how the key was set (``r.given``).
KEY_INDEXED = {"given", "KEYS_BY_NAME"}


def _is_given(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "given"


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _listed_strings(node: ast.AST) -> list[str]:
    """The strings that tuples, lists and sets in ``node`` hold as items (not those inside calls)."""
    if isinstance(node, ast.Call):
        return []
    found = []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found = [n.value for n in node.elts if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return found + [s for child in ast.iter_child_nodes(node) for s in _listed_strings(child)]


def key_names_in(tree: ast.Module) -> list[str]:
    """The key names a module's code spells out: problems, Reading lookups, *_KEYS tuples."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_given(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.append(node.slice.value)
        elif isinstance(node, ast.Call) and _call_name(node) in KEY_CALLS:
            named = node.args[:1] + [k.value for k in node.keywords if k.arg == "fix_key"]
            found += [n.value for n in named if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        elif isinstance(node, ast.Call) and _call_name(node) == "_refused":
            found += _listed_strings(node.args[1])
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            watched = [
                c
                for c in node.comparators
                if isinstance(c, ast.Attribute) and c.attr in ("secrets", "own_problem")
            ]
            if watched and isinstance(node.left.value, str):
                found.append(node.left.value)
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


def test_the_scan_finds_the_names_it_guards():
    """Counted over the whole package, so that a change of spelling that hides the names from
    the scan fails here."""
    names = [name for module in MODULES for name in key_names_in(ast.parse(module.read_text()))]
    assert len(names) >= 40
    assert {
        "worker.gpuCount",
        "ps.port",
        "cluster.podVswitchId",
        "nas.mountTargetDomain",
        "vswitch.id",
    } <= set(names)


def test_a_misspelt_key_is_found():
    tree = ast.parse(
        'def rule(c, d, r):\n    if r.is_set("worker.prot"):\n        yield Problem("ps.prt", "x")\n'
    )
    assert [n for n in key_names_in(tree) if n not in KEYS_BY_NAME] == ["worker.prot", "ps.prt"]


def _value_lookups(tree: ast.AST) -> list[str]:
    """Subscripts by a key's name of anything but the table and how a key was set."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = node.value
            name = (
                base.id
                if isinstance(base, ast.Name)
                else base.attr
                if isinstance(base, ast.Attribute)
                else ""
            )
            if node.slice.value in KEYS_BY_NAME and "." in node.slice.value and name not in KEY_INDEXED:
                found.append(f"{name}[{node.slice.value!r}]")
    return found


def test_no_value_is_read_by_its_key_name():
    """The program reads typed attributes (``settings.worker.port``), never ``v["worker.port"]``."""
    modules = sorted((REPO / "infra").rglob("*.py")) + sorted((REPO / "account").rglob("*.py"))
    found = {str(p.relative_to(REPO)): _value_lookups(ast.parse(p.read_text())) for p in modules}
    assert {path: names for path, names in found.items() if names} == {}
    assert _value_lookups(ast.parse('v["worker.port"]')) == ["v['worker.port']"]
