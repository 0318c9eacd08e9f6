"""The documentation's shape: a short README, links that resolve, and no product file that
points into ../shared.

- README.md is a user's guide of at most 300 lines; the reference (every key, the local cluster,
  the deployment's details, the design, building, benchmarks) lives in docs/.
- Every relative link and image in a tracked Markdown file names a tracked file, and an anchor
  (``page.md#heading``) names a heading of that page, as GitHub spells heading anchors.
- A user's clone has no ../shared beside it, so no product file names it. Product: what a user
  runs or reads: README.md, the Pulumi project files, infra/, trainer/, account/, scripts/,
  docker/, docs/, and of tools/ the local cluster a user starts (tools/local-cluster/). Not
  product, and free to name it: tests/ and benchmarks/ (they read the development machine's
  data there), CONTRIBUTING.md, CI (.ci/, .github/), the test pipeline (tools/test-pipeline/),
  and two developer build inputs: tools/pulumi-toolchain/ reads the alicloud provider's
  sources from ../shared/vendor/alicloud-provider by default ($ALICLOUD_PROVIDER_VENDOR_DIR
  overrides it; without them it says the provider is BLOCKED, which a kubeconfig stack does not
  need), and docs/building.md and docs/benchmarks.md describe that build and the development
  machine's full-MNIST runs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_README_LINES = 300

PRODUCT = (
    "README.md",
    "Pulumi.yaml",
    "Pulumi.*.yaml",
    "infra/",
    "trainer/",
    "account/",
    "scripts/",
    "docker/",
    "docs/",
    "tools/local-cluster/",
)
#: Developer pages under docs/ that describe the development machine's ../shared inputs.
DEVELOPER_DOCS = ("docs/building.md", "docs/benchmarks.md")

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked(*patterns: str) -> list[str]:
    """Paths (relative, as git prints them) of the files git tracks, matching the pathspecs."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *patterns], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return [name for name in out.split("\0") if name and (REPO / name).is_file()]


def test_the_readme_has_at_most_300_lines() -> None:
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move reference material to docs/"


def _product_files() -> list[str]:
    files = tracked(*PRODUCT)
    return [f for f in files if f not in DEVELOPER_DOCS]


def test_product_files_are_the_ones_meant() -> None:
    files = _product_files()
    assert {
        "README.md",
        "Pulumi.yaml",
        "infra/program.py",
        "trainer/data.py",
        "docs/local-cluster.md",
        "tools/local-cluster/localcluster/components.py",
        "scripts/train-local.sh",
    } <= set(files)
    assert not any(f.startswith(("tests/", "benchmarks/", "tools/pulumi-toolchain/")) for f in files)


def test_no_product_file_refers_to_shared() -> None:
    hits = []
    for name in _product_files():
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # data (the sample's .gz files), images
        hits += [
            f"{name}:{i}: {line.strip()}"
            for i, line in enumerate(text.splitlines(), 1)
            if "../shared" in line
        ]
    assert hits == [], "a user's clone has no ../shared:\n" + "\n".join(hits)


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading's text: lower case, backticks and punctuation but
    hyphens and underscores dropped, spaces turned into hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of ``text`` outside fenced code blocks."""
    out, fenced = [], None
    for i, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and (fenced is None or m.group(1) == fenced):
            fenced = m.group(1) if fenced is None else None
            continue
        if fenced is None:
            out.append((i, line))
    return out


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated heading's get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose(page.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Any Kubernetes cluster (`kubeconfig`)", "any-kubernetes-cluster-kubeconfig"),
        ("Where one batch's time goes", "where-one-batchs-time-goes"),
        ("The targets: 0.95x of one process, 12 s to 0.99", "the-targets-095x-of-one-process-12-s-to-099"),
    ],
)
def test_slug_spells_anchors_as_github_does(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def _link_problems(name: str, files: set[str], root: Path = REPO) -> list[str]:
    """Each relative link of page ``name`` (under ``root``) that names no file of ``files`` (paths
    relative to ``root``), or a heading its page lacks, as ``page:line: target (why)``."""
    page = root / name
    problems = []
    for i, line in _prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            rel = (
                dest.relative_to(root.resolve()).as_posix()
                if dest.is_relative_to(root.resolve())
                else str(dest)
            )
            if path and rel not in files and not any(f.startswith(rel + "/") for f in files):
                problems.append(f"{name}:{i}: {target} (no tracked {rel})")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{name}:{i}: {target} (no heading #{anchor} in {rel})")
    return problems


def test_every_relative_link_in_the_docs_resolves() -> None:
    files = set(tracked())
    pages = [f for f in files if f.endswith(".md")]
    assert {"README.md", "docs/configuration.md", "docs/local-cluster.md", "docs/design.md"} <= set(pages)
    problems = [p for name in sorted(pages) for p in _link_problems(name, files)]
    assert problems == [], "broken links:\n" + "\n".join(problems)


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n\n## The run monitor\n")
    lines = [
        "[ok](design.md#the-run-monitor) [gone](no-such-page.md) [bad anchor](design.md#no-such-heading)",
        "```",
        "[in code](ignored.md)",
        "```",
        "[web](https://example.org/x.md) ![up](../README.md)",
    ]
    (tmp_path / "docs" / "page.md").write_text("\n".join(lines) + "\n")
    (tmp_path / "README.md").write_text("# Title\n")
    files = {"docs/design.md", "docs/page.md", "README.md"}
    assert _link_problems("docs/page.md", files, tmp_path) == [
        "docs/page.md:1: no-such-page.md (no tracked docs/no-such-page.md)",
        "docs/page.md:1: design.md#no-such-heading (no heading #no-such-heading in docs/design.md)",
    ]
    assert _link_problems("docs/page.md", files - {"README.md"}, tmp_path)[-1] == (
        "docs/page.md:5: ../README.md (no tracked README.md)"
    )
