"""The product code carries rules, not lab notes.

- A user's clone has no ../shared beside it, so no product file names it (nor the notes kept
  there). Product here: infra/, trainer/, account/, policy/, tools/, scripts/ and the Pulumi
  project files. One exception: tools/pulumi-toolchain/ is a developer build input that reads
  the alicloud provider's vendored sources from ../shared/vendor/alicloud-provider by default
  ($ALICLOUD_PROVIDER_VENDOR_DIR overrides it; tests/test_docs.py says the same).
- No product file holds a dated result: a YYYY-MM-DD date there is a measurement's, and the
  measurement belongs in docs/benchmarks.md with its machine and date, the code keeping the
  rule it supports. Not results, and so let through: ISO timestamps (``2026-01-02T11:50:00Z``:
  formats and constants) and the few dates in ``ALLOWED_DATES``.

tests/ and benchmarks/ may read ../shared; they are not product.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRODUCT = (
    "infra/",
    "trainer/",
    "account/",
    "policy/",
    "tools/",
    "scripts/",
    "Pulumi.yaml",
    "Pulumi.*.yaml",
)
#: Product paths that may name ../shared: the developer build of the alicloud provider.
MAY_NAME_SHARED = ("tools/pulumi-toolchain/",)
#: ../shared, or a folder of it named alone (``shared/notes/...``).
SHARED = re.compile(r"\.\./shared|(?<![\w./-])shared/(notes|vendor|data|seed|hooks)\b")
#: A calendar date not followed by a time of day in ISO form (``T12:00``).
DATE = re.compile(r"(?<![\w.-])20[0-9]{2}-[0-9]{2}-[0-9]{2}(?!T[0-9])")
#: (file, the text around a date) that is no result: a cited source's publication date and an
#: example of a message that prints the time a run started.
ALLOWED_DATES = (
    ("account/github_ci.py", "GitHub changelog 2023-06-27"),
    ("trainer/README.md", "started 2026-12-05 17:20:01 UTC"),
)


def _product_texts() -> list[tuple[str, str]]:
    """(path, text) of every tracked product file that is UTF-8 text."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *PRODUCT], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    texts = []
    for name in out.split("\0"):
        path = REPO / name
        if not name or not path.is_file():
            continue
        try:
            texts.append((name, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue  # data (the sample's .gz files)
    return texts


def shared_refs(name: str, text: str) -> list[str]:
    """``name:line: text`` for each line of ``text`` that names ../shared or a folder of it."""
    if name.startswith(MAY_NAME_SHARED):
        return []
    return [
        f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if SHARED.search(line)
    ]


def dated_lines(name: str, text: str) -> list[str]:
    """``name:line: text`` for each line of ``text`` with a date that ``ALLOWED_DATES`` does not
    name."""
    allowed = [around for path, around in ALLOWED_DATES if path == name]
    hits = []
    for i, line in enumerate(text.splitlines(), 1):
        if DATE.search(line) and not any(around in line for around in allowed):
            hits.append(f"{name}:{i}: {line.strip()}")
    return hits


def test_the_product_files_are_found() -> None:
    names = {name for name, _ in _product_texts()}
    assert {
        "infra/program.py",
        "trainer/contract/recipe.py",
        "Pulumi.yaml",
        "scripts/train-local.sh",
    } <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "docs/")) for n in names)


def test_no_product_file_names_shared() -> None:
    hits = [hit for name, text in _product_texts() for hit in shared_refs(name, text)]
    assert hits == [], "a user's clone has no ../shared:\n" + "\n".join(hits)


def test_no_product_file_holds_a_dated_result() -> None:
    hits = [hit for name, text in _product_texts() for hit in dated_lines(name, text)]
    assert hits == [], (
        "a dated result belongs in docs/benchmarks.md with its machine and date; the code keeps "
        "the rule:\n" + "\n".join(hits)
    )


def test_the_checks_catch_what_they_are_for() -> None:
    assert shared_refs("infra/x.py", "# see ../shared/notes/stack-facts.md") != []
    assert shared_refs("infra/x.py", "(shared/notes/stack-facts.md)") != []
    assert shared_refs("infra/x.py", "the shared volume, a shared/ path") == []
    assert shared_refs("tools/pulumi-toolchain/x.sh", "# ../shared/vendor") == []
    assert dated_lines("trainer/x.py", "a step took 9.5 ms (2026-12-01)") != []
    assert dated_lines("infra/x.py", "``2026-01-02T11:50:00Z``") == []
    assert dated_lines("account/github_ci.py", "(GitHub changelog 2023-06-27,") == []
    assert dated_lines("account/other.py", "(GitHub changelog 2023-06-27,") != []
    assert all(DATE.search(around) for _, around in ALLOWED_DATES)
