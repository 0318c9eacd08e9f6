"""The house's size and comment rules, checked on every tracked file (CONTRIBUTING.md).

- No source file over 500 lines: a longer one holds more than one responsibility.
- No function over 80 lines in infra/ or trainer/: a longer one reads as several phases that
  deserve names.
- No comment, docstring or doc cites "issue N" or a "team contract": a reader cannot look those
  up; the text states the rule itself.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
SOURCE_SUFFIXES = (".py", ".sh")
UNREADABLE_CITATION = re.compile(r"issue [0-9]|team contract", re.IGNORECASE)


def tracked(*patterns: str) -> list[Path]:
    """Files git tracks under REPO matching the pathspecs (all files without any)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", *patterns], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return [REPO / name for name in out.split("\0") if name and (REPO / name).is_file()]


def test_no_source_file_over_500_lines() -> None:
    sources = [p for p in tracked() if p.suffix in SOURCE_SUFFIXES]
    assert len(sources) > 50, "git ls-files found too few sources: is this a checkout?"
    long = {
        str(p.relative_to(REPO)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert long == {}, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_function_over_80_lines_in_infra_or_trainer() -> None:
    sources = tracked("infra/*.py", "trainer/*.py")
    assert len(sources) > 20
    long = {}
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(REPO)}:{node.lineno} {node.name}"] = lines
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_comment_cites_an_issue_number_or_a_team_contract() -> None:
    files = [
        p
        for p in tracked()
        if p.suffix in (*SOURCE_SUFFIXES, ".md", ".yaml", ".yml", ".toml") or p.name.endswith("Dockerfile")
    ]
    this = Path(__file__).resolve()
    hits = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in files
        if p.resolve() != this
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if UNREADABLE_CITATION.search(line)
    ]
    assert hits == [], "state the rule instead of citing it:\n" + "\n".join(hits)
