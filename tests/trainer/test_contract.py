"""The boundary between infra/ and the trainer: infra/ imports only trainer.contract, and the
contract's modules import only the standard library and each other (so the stack needs no
TensorFlow and the trainer image no Pulumi)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from x import y`` gives x and x.y)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _trainer_modules(names: set[str]) -> set[str]:
    return {n for n in names if n == "trainer" or n.startswith("trainer.")}


def test_infra_imports_only_the_contract_of_the_trainer():
    outside = {}
    for path in sorted((REPO / "infra").rglob("*.py")):
        # "from trainer.contract import x" also yields "trainer.contract" itself.
        bad = {
            n
            for n in _trainer_modules(_imports(path))
            if n not in ("trainer", "trainer.contract") and not n.startswith("trainer.contract.")
        }
        if bad:
            outside[str(path.relative_to(REPO))] = sorted(bad)
    assert outside == {}


def test_infra_uses_every_contract_module():
    used = set()
    for path in (REPO / "infra").rglob("*.py"):
        used |= _trainer_modules(_imports(path))
    modules = {
        f"trainer.contract.{p.stem}"
        for p in (REPO / "trainer" / "contract").glob("*.py")
        if p.stem != "__init__"
    }
    assert modules == {
        "trainer.contract.cluster_spec",
        "trainer.contract.exit_codes",
        "trainer.contract.package_folder",
        "trainer.contract.printable",
        "trainer.contract.progress",
        "trainer.contract.recipe",
    }
    assert modules <= used


def test_the_contract_needs_only_the_standard_library():
    stdlib = sys.stdlib_module_names | {"__future__"}
    foreign = {}
    for path in sorted((REPO / "trainer" / "contract").glob("*.py")):
        bad = {
            n
            for n in _imports(path)
            if n.split(".")[0] not in stdlib
            and not (n == "trainer.contract" or n.startswith("trainer.contract."))
        }
        if bad:
            foreign[path.name] = sorted(bad)
    assert foreign == {}
