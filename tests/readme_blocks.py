"""The runnable blocks of the README and docs/local-cluster.md, found by their marker, for tests
that run the walk-through.

A runnable block is a fenced code block directly after a marker line (blank lines between are
allowed):

    <!-- walkthrough: local-stack -->
    ```bash
    pulumi up --yes
    ```

``block("local-stack")`` is the block's text as a bash script; ``commands("local-stack")`` its
commands one per entry, with backslash-continued lines joined and comment-only and blank lines
left out. Markers are unique across the pages: a name given twice is an error, so a test cannot
run the wrong one.

The pages (``DOCUMENTS``, in reading order): README.md (the quick start, the account's
preparation, the cloud teardown) and docs/local-cluster.md (the local-cluster walk-through).
Without a page named, ``blocks``, ``block``, ``commands`` and ``script`` read them all.
``README_PATH`` and ``LOCAL_CLUSTER_DOC_PATH`` (environment) name another copy of either to read,
e.g. a copy with one line broken, to show that the tests running the blocks fail then. ``scratch_checkout`` copies the repository the
way a fresh clone has it, and ``script`` joins blocks into one bash script, run in one shell as a
reader pastes them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = Path(os.environ.get("README_PATH") or REPO / "README.md").resolve()
LOCAL_CLUSTER_DOC = Path(
    os.environ.get("LOCAL_CLUSTER_DOC_PATH") or REPO / "docs" / "local-cluster.md"
).resolve()
#: The pages holding marked blocks, in reading order.
DOCUMENTS = (README, LOCAL_CLUSTER_DOC)
MARKER = re.compile(r"^<!--\s*walkthrough:\s*([a-z0-9][a-z0-9-]*)\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*$")


class BlockError(ValueError):
    """A marker without a fenced block under it, an unclosed fence, a name given twice (in one
    page or in two), or a name no marker has."""


@dataclass(frozen=True)
class Block:
    """One marked block.

    Attributes:
        name: the marker's name (``local-stack``).
        language: the fence's info string (``bash``), empty when none.
        text: the lines between the fences, each ending in a newline.
        line: 1-based line number of the opening fence in its page.
        source: the page, as ``parse`` was told (relative to the repository for DOCUMENTS).
    """

    name: str
    language: str
    text: str
    line: int
    source: str = "README.md"


def parse(text: str, source: str = "README.md") -> dict[str, Block]:
    """Every marked block of Markdown ``text``, by name, in document order.

    Raises:
        BlockError: naming ``source`` and the line, for a marker not followed by a fence, a fence
            never closed, or a name used twice.
    """
    lines = text.splitlines()
    blocks: dict[str, Block] = {}
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        name, marker_line = m.group(1), i + 1
        if name in blocks:
            raise BlockError(
                f"{source}:{marker_line}: walkthrough block {name!r} is marked twice "
                f"(its first block opens at line {blocks[name].line})"
            )
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        fence = FENCE.match(lines[i]) if i < len(lines) else None
        if not fence:
            raise BlockError(
                f"{source}:{marker_line}: walkthrough marker {name!r} is not followed by a fenced code block"
            )
        opening, body_start = fence.group(1), i + 1
        j = body_start
        while j < len(lines) and lines[j].strip() != opening:
            j += 1
        if j == len(lines):
            raise BlockError(f"{source}:{i + 1}: the code block of walkthrough {name!r} is never closed")
        body = "".join(line + "\n" for line in lines[body_start:j])
        blocks[name] = Block(name, fence.group(2), body, i + 1, source)
        i = j + 1
    return blocks


def _label(page: Path) -> str:
    """``page`` relative to the repository when it lies in it, else its file name."""
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


def blocks(readme: Path | None = None) -> dict[str, Block]:
    """Every marked block of ``readme``, or without one of every page of DOCUMENTS, in reading
    order.

    Raises:
        BlockError: as ``parse``; or a name marked in two pages (naming both).
    """
    found: dict[str, Block] = {}
    for page in (readme,) if readme is not None else DOCUMENTS:
        for name, marked in parse(page.read_text(), _label(page)).items():
            if name in found:
                raise BlockError(
                    f"{marked.source}:{marked.line}: walkthrough block {name!r} is marked in "
                    f"{found[name].source} too (line {found[name].line})"
                )
            found[name] = marked
    return found


def block(name: str, readme: Path | None = None) -> str:
    """The text of block ``name`` of ``readme`` (default: of DOCUMENTS), to run as a bash script.

    Raises:
        BlockError: no marker has that name (the message lists the names there are).
    """
    found = blocks(readme)
    if name not in found:
        where = _label(readme) if readme is not None else ", ".join(_label(p) for p in DOCUMENTS)
        raise BlockError(f"{where}: no walkthrough block {name!r}; marked: {', '.join(found) or 'none'}")
    return found[name].text


def split_commands(script: str) -> list[str]:
    """The commands of a shell snippet: lines ending in ``\\`` joined to the next (one space
    where the backslash was), comment-only and blank lines dropped, trailing comments kept."""
    out: list[str] = []
    pending = ""
    for raw in script.splitlines():
        line = raw.strip() if not pending else " " + raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip()
            continue
        out.append((pending + line).strip())
        pending = ""
    if pending:
        out.append(pending.strip())
    return out


def commands(name: str, readme: Path | None = None) -> list[str]:
    """The commands of block ``name`` of ``readme`` (default: of DOCUMENTS), one per entry (see
    split_commands)."""
    return split_commands(block(name, readme))


#: Printed by ``script`` before each block, with the block's name and the epoch time in seconds.
SECTION = "::walkthrough-block::"


def script(names: list[str], readme: Path | None = None) -> str:
    """One bash script running blocks ``names`` of ``readme`` (default: of DOCUMENTS) in order in
    one shell, under ``set -euo pipefail`` (the first failing command ends it with its status).
    Before each block it prints ``SECTION name time`` so that ``sections`` can split the output by block."""
    parts = ["set -euo pipefail\n"]
    for name in names:
        text = block(name, readme)
        parts.append(f'echo "{SECTION} {name} $(date +%s.%N)"\n{text}')
    parts.append(f'echo "{SECTION} end $(date +%s.%N)"\n')
    return "".join(parts)


def sections(output: str) -> dict[str, tuple[str, float]]:
    """The output of a ``script`` run split by block: name -> (its output, its seconds). A block
    the run never reached is missing; the block that failed has no duration (-1.0)."""
    found: dict[str, tuple[str, float]] = {}
    current, start, lines = "", 0.0, []
    for line in output.splitlines(keepends=True):
        if line.startswith(SECTION + " "):
            name, stamp = line.split()[1:3]
            if current:
                found[current] = ("".join(lines), float(stamp) - start)
            current, start, lines = name, float(stamp), []
        else:
            lines.append(line)
    if current and current != "end":
        found[current] = ("".join(lines), -1.0)
    return found


def scratch_checkout(dest: Path, venv: Path = REPO / ".venv") -> Path:
    """Copies the repository's files as a clone of the working tree has them (tracked and
    untracked-but-not-ignored files, as they are on disk) into ``dest``, with ``.venv`` a symlink
    to ``venv`` (bootstrap.sh then finds it up to date). Returns ``dest``.

    Raises:
        subprocess.CalledProcessError: ``git ls-files`` failed (not a checkout).
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if not src.is_file():
            continue  # deleted in the working tree, or a submodule's directory
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
    if venv.exists():
        (dest / ".venv").symlink_to(venv.resolve())
    return dest
