"""The marked walk-through blocks of the README and docs/local-cluster.md: the extractor
(tests/readme_blocks.py) and what the blocks must hold for a reader who pastes them in order."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import readme_blocks as rb

REPO = Path(__file__).resolve().parents[1]

SAMPLE = """# Title

<!-- walkthrough: first -->
```bash
echo one   # a trailing comment stays
# a comment line goes

ls -l \\
  /tmp
```

<!-- walkthrough: second -->

~~~sh
true
~~~

```bash
not marked
```
"""


def test_parse_finds_each_marked_block_and_only_those():
    found = rb.parse(SAMPLE)
    assert list(found) == ["first", "second"]
    assert found["first"].language == "bash" and found["first"].line == 4
    assert (
        found["first"].text
        == "echo one   # a trailing comment stays\n# a comment line goes\n\nls -l \\\n  /tmp\n"
    )
    assert found["second"].language == "sh" and found["second"].text == "true\n"


def test_split_commands_joins_continuations_and_drops_comment_lines():
    assert rb.split_commands(rb.parse(SAMPLE)["first"].text) == [
        "echo one   # a trailing comment stays",
        "ls -l /tmp",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "<!-- walkthrough: a -->\ntext\n",
            r"README.md:1: walkthrough marker 'a' is not followed by a fenced code block",
        ),
        ("<!-- walkthrough: a -->\n", r"README.md:1: walkthrough marker 'a' is not followed"),
        (
            "<!-- walkthrough: a -->\n```bash\nls\n",
            r"README.md:2: the code block of walkthrough 'a' is never closed",
        ),
        (
            "<!-- walkthrough: a -->\n```\nx\n```\n<!-- walkthrough: a -->\n```\ny\n```\n",
            r"README.md:5: walkthrough block 'a' is marked twice \(its first block opens at line 2\)",
        ),
    ],
)
def test_malformed_markers_are_refused_with_the_line(text, message):
    with pytest.raises(rb.BlockError, match=message):
        rb.parse(text)


def test_unknown_name_lists_the_marked_ones(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(SAMPLE)
    with pytest.raises(rb.BlockError, match=r"no walkthrough block 'third'; marked: first, second"):
        rb.block("third", readme)
    assert rb.commands("second", readme) == ["true"]


def test_script_runs_the_blocks_in_one_shell_and_stops_at_the_first_failure(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "<!-- walkthrough: a -->\n```bash\nexport X=1\necho a-out\n```\n"
        '<!-- walkthrough: b -->\n```bash\necho "b $X"\nfalse\necho never\n```\n'
        "<!-- walkthrough: c -->\n```bash\necho c-out\n```\n"
    )
    proc = subprocess.run(["bash", "-c", rb.script(["a", "b", "c"], readme)], capture_output=True, text=True)
    assert proc.returncode == 1
    found = rb.sections(proc.stdout)
    assert list(found) == ["a", "b"]
    assert found["a"][0] == "a-out\n" and found["a"][1] >= 0
    assert found["b"] == ("b 1\n", -1.0)
    ok = subprocess.run(["bash", "-c", rb.script(["a", "c"], readme)], capture_output=True, text=True)
    assert ok.returncode == 0 and [(name, text) for name, (text, _) in rb.sections(ok.stdout).items()] == [
        ("a", "a-out\n"),
        ("c", "c-out\n"),
    ]


def test_scratch_checkout_has_the_tracked_files_and_links_the_venv(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    clone = rb.scratch_checkout(tmp_path / "clone", venv)
    assert (clone / "README.md").read_text() == (REPO / "README.md").read_text()
    assert (clone / "scripts" / "train-local.sh").stat().st_mode & 0o111, "the executable bit is kept"
    assert (clone / ".venv").resolve() == venv.resolve()
    assert not (clone / ".git").exists() and not (clone / "runs").exists()


def test_readme_path_names_the_readme_to_read(tmp_path):
    other = tmp_path / "README.md"
    other.write_text("<!-- walkthrough: only -->\n```bash\necho broken\n```\n")
    code = "from tests import readme_blocks as rb; print(rb.README, rb.commands('only'))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "README_PATH": str(other)},
    )
    assert proc.stdout.strip() == f"{other.resolve()} ['echo broken']", proc.stderr


def test_local_cluster_doc_path_names_the_walkthrough_page_to_read(tmp_path):
    other = tmp_path / "local-cluster.md"
    other.write_text("<!-- walkthrough: local-stack -->\n```bash\necho broken\n```\n")
    code = (
        "from tests import readme_blocks as rb; "
        "print(rb.LOCAL_CLUSTER_DOC, rb.commands('local-stack'), rb.commands('quickstart'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "LOCAL_CLUSTER_DOC_PATH": str(other)},
    )
    assert proc.stdout.strip() == f"{other.resolve()} ['echo broken'] ['scripts/train-local.sh']", proc.stderr


def test_a_name_marked_in_two_pages_is_refused(tmp_path, monkeypatch):
    first, second = tmp_path / "README.md", tmp_path / "local-cluster.md"
    first.write_text("<!-- walkthrough: a -->\n```bash\necho one\n```\n")
    second.write_text("\n<!-- walkthrough: a -->\n```bash\necho two\n```\n")
    monkeypatch.setattr(rb, "DOCUMENTS", (first, second))
    with pytest.raises(
        rb.BlockError,
        match=r"local-cluster.md:3: walkthrough block 'a' is marked in README.md too \(line 2\)",
    ):
        rb.blocks()
    assert rb.commands("a", second) == ["echo two"]


# --- the repository's pages ---------------------------------------------------------------

WALKTHROUGH = ["quickstart", "local-cluster-up", "local-stack", "local-stack-down", "local-cluster-down"]
#: The cloud deployment's blocks (between the quick start and the local cluster), which need an
#: Alibaba Cloud account: tests run the parts that work offline (tests/account,
#: tests/preview/test_teardown.py).
CLOUD = ["account-prepare", "cloud-stack-down"]


def test_readme_marks_the_walkthrough_in_reading_order():
    found = rb.blocks()
    assert list(found) == [WALKTHROUGH[0], *CLOUD, *WALKTHROUGH[1:]]
    assert all(b.language == "bash" for b in found.values())


def test_the_readme_holds_the_quick_start_and_the_cloud_the_local_cluster_page_the_rest():
    assert rb.DOCUMENTS == (REPO / "README.md", REPO / "docs" / "local-cluster.md")
    assert list(rb.blocks(REPO / "README.md")) == [WALKTHROUGH[0], *CLOUD]
    assert list(rb.blocks(REPO / "docs" / "local-cluster.md")) == WALKTHROUGH[1:]
    assert {b.source for b in rb.blocks().values()} == {"README.md", "docs/local-cluster.md"}


def test_quickstart_is_the_main_job():
    assert rb.commands("quickstart") == ["scripts/train-local.sh"]


def test_cluster_comes_down_only_in_its_own_last_block():
    # Pasting the blocks in order must not tear down what a later block needs.
    for name in WALKTHROUGH[:-1]:
        assert not any("local-cluster down" in c for c in rb.commands(name)), name
        assert (
            not any(c.startswith("pulumi destroy") for c in rb.commands(name)) or name == "local-stack-down"
        )
    assert rb.commands("local-cluster-down") == ["tools/local-cluster/local-cluster down"]


def test_local_stack_creates_the_venv_first_and_uses_the_clusters_kubeconfig():
    cmds = rb.commands("local-stack")
    assert cmds[0].startswith("bash scripts/bootstrap.sh")
    assert any(c.startswith('pulumi config set kubeconfig "$KUBECONFIG"') for c in cmds)
    assert not any("/var/lib/tf-mnist-local-cluster" in c for c in cmds)
    assert rb.commands("local-stack-down") == ["pulumi destroy --yes", "pulumi stack rm local --yes"]


def _program_of(command: str) -> list[str]:
    """The repository files a command runs: a script path, or the module of `python -m`."""
    words = shlex.split(command, comments=True)
    out = []
    for i, word in enumerate(words):
        if word in ("bash", "source") and i + 1 < len(words):
            out.append(words[i + 1])
        elif i == 0 and "/" in word and not word.startswith((".venv/", "$")):
            out.append(word)
        elif word == "-m" and i + 1 < len(words):
            module = words[i + 1].replace(".", "/")
            out.append(module + ".py" if (REPO / f"{module}.py").exists() else f"{module}/__main__.py")
    return out


def test_every_repository_program_the_blocks_run_exists():
    checked = []
    for name in WALKTHROUGH + CLOUD:
        for command in rb.commands(name):
            for part in command.split("&&"):
                for path in _program_of(part):
                    assert (REPO / path).is_file(), (
                        f"README block {name!r}: {command!r} runs {path}, which is missing"
                    )
                    checked.append(path)
    assert {
        "scripts/train-local.sh",
        "scripts/bootstrap.sh",
        "tools/local-cluster/local-cluster",
        "tools/pulumi-toolchain/pulumi-offline-env.sh",
        "infra/status/__main__.py",
    } <= set(checked), checked
