"""images.sh's build-context rules and hash (localcluster.buildcontext) and its manifest walk
(localcluster.manifest), on small trees made in tmp_path."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from localcluster import buildcontext, manifest
from localcluster.buildcontext import (
    Entry,
    compile_pattern,
    context_entries,
    context_hash,
    excluded,
    parse_patterns,
)

from .conftest import LOCAL_CLUSTER_DIR

REPO = LOCAL_CLUSTER_DIR.parents[1]


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("*", "a", True),
        ("*", "a/b", False),
        ("*.md", "README.md", True),
        ("*.md", "docs/x.md", False),
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("?", "/", False),
        ("**/x", "x", True),
        ("**/x", "a/x", True),
        ("**/x", "a/b/x", True),
        ("**/x", "ax", False),
        ("a/**", "a/b/c", True),
        ("a/**", "b/c", False),
        ("**", "any/thing", True),
        ("trainer/**/__pycache__", "trainer/__pycache__", True),
        ("trainer/**/__pycache__", "trainer/data/__pycache__", True),
        ("[ab].py", "a.py", True),
        ("[ab].py", "c.py", False),
        ("[^ab].py", "c.py", True),
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
        ("a.b", "axb", False),
        ("a+b", "a+b", True),
    ],
)
def test_patterns_translate_as_docker_does(pattern: str, path: str, expected: bool) -> None:
    assert bool(compile_pattern(pattern).match(path)) is expected, (pattern, path)


def test_ignore_lines_are_cleaned_comments_and_blanks_dropped() -> None:
    patterns = parse_patterns(
        ["# a comment\n", "\n", "   \n", "  /build/  \n", "! ./docs/./a.md\n", "x/../y\n", "#not a pattern\n"]
    )
    assert [(p.text, p.negated) for p in patterns] == [("build", False), ("docs/a.md", True), ("y", False)]


def test_a_bom_at_the_start_of_the_file_is_not_part_of_the_first_pattern(tmp_path: Path) -> None:
    ignore = tmp_path / ".dockerignore"
    ignore.write_bytes(b"\xef\xbb\xbf*.log\n")
    assert [p.text for p in buildcontext.read_ignorefile(ignore)] == ["*.log"]
    assert buildcontext.read_ignorefile(tmp_path / "missing") == []
    assert buildcontext.read_ignorefile(None) == []


@pytest.mark.parametrize(
    "path, expected",
    [
        ("README.md", True),
        ("trainer", False),
        ("trainer/train.py", False),
        ("trainer/__pycache__/train.cpython-311.pyc", True),
        ("trainer/data/__pycache__/x.pyc", True),
        ("trainer/data/mnist.npz", False),
        ("infra/program.py", True),
    ],
)
def test_the_trainer_images_ignorefile_sends_only_the_package(path: str, expected: bool) -> None:
    patterns = buildcontext.read_ignorefile(REPO / "docker" / "trainer-cpu.Dockerfile.dockerignore")
    assert excluded(path, patterns) is expected, path


def test_the_last_matching_pattern_decides_and_a_parent_match_covers_children() -> None:
    assert not excluded("README.md", parse_patterns(["*.md", "!README.md"]))
    assert excluded("NOTES.md", parse_patterns(["*.md", "!README.md"]))
    assert excluded("README.md", parse_patterns(["!README.md", "*.md"]))
    assert excluded("build/a/b/c.o", parse_patterns(["build"]))
    assert not excluded("build/keep/c.o", parse_patterns(["build", "!build/keep"]))
    assert not excluded("anything", [])


def _tree(root: Path) -> None:
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("print('a')\n")
    (root / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"\0compiled")
    (root / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (root / "pkg" / "run.sh").chmod(0o755)
    (root / "pkg" / "link").symlink_to("a.py")
    (root / "other.txt").write_text("not sent\n")
    (root / "pkg").chmod(0o755)


PKG_ONLY = ["*", "!pkg/", "pkg/**/__pycache__"]


def test_entries_list_what_is_sent_with_modes_hashes_and_link_targets(tmp_path: Path) -> None:
    _tree(tmp_path)
    entries = context_entries(tmp_path, parse_patterns(PKG_ONLY))
    sha_a = hashlib.sha256(b"print('a')\n").hexdigest()
    sha_run = hashlib.sha256(b"#!/bin/sh\n").hexdigest()
    assert entries == [
        Entry("pkg", "d", "755"),
        Entry("pkg/a.py", "f644", sha_a),
        Entry("pkg/link", "l", "a.py"),
        Entry("pkg/run.sh", "f755", sha_run),
    ]
    # The recorded line format is what the hashes kept in the image cache were made from.
    expected = hashlib.sha256(
        "".join(f"{e.path}\0{e.kind}\0{e.detail}\n" for e in entries).encode()
    ).hexdigest()
    assert context_hash(entries) == expected


def test_the_hash_follows_sent_content_and_modes_only(tmp_path: Path) -> None:
    _tree(tmp_path)
    patterns = parse_patterns(PKG_ONLY)
    first = context_hash(context_entries(tmp_path, patterns))
    (tmp_path / "other.txt").write_text("changed, but not sent\n")
    (tmp_path / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"recompiled")
    assert context_hash(context_entries(tmp_path, patterns)) == first
    (tmp_path / "pkg" / "a.py").chmod(0o600)
    second = context_hash(context_entries(tmp_path, patterns))
    assert second != first
    (tmp_path / "pkg" / "a.py").write_text("print('b')\n")
    assert context_hash(context_entries(tmp_path, patterns)) not in (first, second)


def test_the_command_line_lists_and_hashes_as_images_sh_calls_it(tmp_path: Path) -> None:
    _tree(tmp_path)
    ignore = tmp_path / "x.dockerignore"
    ignore.write_text("\n".join(PKG_ONLY) + "\nx.dockerignore\n")
    env = {**os.environ, "PYTHONPATH": str(LOCAL_CLUSTER_DIR)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "localcluster.buildcontext", *args],
            env=env,
            capture_output=True,
            text=True,
        )

    listed = cli("list", str(tmp_path), str(ignore))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["pkg/", "pkg/a.py", "pkg/link", "pkg/run.sh"]
    hashed = cli("hash", str(tmp_path), str(ignore))
    assert hashed.stdout.strip() == context_hash(context_entries(tmp_path, parse_patterns(PKG_ONLY)))
    everything = cli("list", str(tmp_path), "-")
    assert "other.txt" in everything.stdout.splitlines() and "pkg/__pycache__/a.pyc" in everything.stdout
    missing = cli("hash", str(tmp_path / "nope"), "-")
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def test_manifest_steps_from_index_to_config() -> None:
    index = {
        "manifests": [
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}},
        ]
    }
    assert manifest.next_step(index) == ("index", "sha256:amd")
    assert manifest.next_step({"manifests": [{"digest": "sha256:only"}]}) == ("index", "sha256:only")
    assert manifest.next_step({"schemaVersion": 2, "config": {"digest": "sha256:cfg"}}) == (
        "config",
        "sha256:cfg",
    )
    with pytest.raises(manifest.ManifestError, match="lists no manifests"):
        manifest.next_step({"manifests": []})
    with pytest.raises(manifest.ManifestError, match="config.digest"):
        manifest.next_step({"schemaVersion": 2})


def test_manifest_command_line_reads_stdin() -> None:
    env = {**os.environ, "PYTHONPATH": str(LOCAL_CLUSTER_DIR)}
    ok = subprocess.run(
        [sys.executable, "-m", "localcluster.manifest"],
        env=env,
        capture_output=True,
        text=True,
        input=json.dumps({"config": {"digest": "sha256:abc"}}),
    )
    assert (ok.returncode, ok.stdout) == (0, "config sha256:abc\n")
    bad = subprocess.run(
        [sys.executable, "-m", "localcluster.manifest"],
        env=env,
        capture_output=True,
        text=True,
        input="not json",
    )
    assert bad.returncode == 1 and bad.stdout == "" and "localcluster.manifest:" in bad.stderr
