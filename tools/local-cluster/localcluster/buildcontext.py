"""The build context `buildah bud` sends for a Dockerfile after its .dockerignore, and its hash.

images.sh rebuilds an image only when the hash of what it would send has changed. The rules
are Docker's (moby/patternmatcher, which buildah uses too):

- one pattern a line; a line starting with ``#`` is a comment; blank lines are skipped;
  ``!`` before a pattern makes it an exception (re-includes what it matches);
- each pattern is cleaned like Go's ``filepath.Clean`` and loses a leading ``/``;
- the last pattern that matches a path decides; a pattern that matches a parent directory
  matches everything under it;
- ``*`` and ``?`` stop at ``/``, ``**`` crosses directories (``**/`` also matches nothing),
  ``[...]`` is a character class, ``\\`` escapes the next character.

Command line (images.sh runs it with the system python3; standard library only)::

    python3 -m localcluster.buildcontext hash ROOT IGNOREFILE   # one sha256 hex line
    python3 -m localcluster.buildcontext list ROOT IGNOREFILE   # one path a line, dirs end in /

IGNOREFILE ``-`` or a file that does not exist means no patterns (the whole of ROOT).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pattern:
    """One .dockerignore line: its cleaned text, whether it is a ``!`` exception, its regex."""

    text: str
    negated: bool
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        """True when ``path`` (relative, ``/``-separated) or one of its parents matches."""
        if self.regex.match(path):
            return True
        parts = path.split("/")[:-1]
        return any(self.regex.match("/".join(parts[:k])) for k in range(1, len(parts) + 1))


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The anchored regex for one cleaned pattern, translated as patternmatcher does."""
    out, i, n = "^", 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 1
                if i + 1 < n and pattern[i + 1] == "/":
                    i += 1  # "**/" is "**": it may also match no directory at all
                out += ".*" if i + 1 >= n else "(.*/)?"
            else:
                out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\" and i + 1 < n:
            i += 1
            out += re.escape(pattern[i])
        elif ch == "[" and "]" in pattern[i + 1 :]:
            j = pattern.index("]", i + 1)
            cls = pattern[i + 1 : j]
            out += "[" + cls.replace("\\", "\\\\") + "]"
            i = j
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + "$")


def parse_patterns(lines: Iterable[str]) -> list[Pattern]:
    """The patterns of a .dockerignore's lines, in file order (comments and blanks dropped)."""
    patterns = []
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        if line:
            line = os.path.normpath(line)
            if len(line) > 1 and line.startswith("/"):
                line = line.lstrip("/")
        patterns.append(Pattern(line, negated, compile_pattern(line)))
    return patterns


def read_ignorefile(path: Path | None) -> list[Pattern]:
    """The patterns of the file at ``path``; none when ``path`` is None or does not exist."""
    if path is None or not path.exists():
        return []
    # Docker accepts a UTF-8 byte-order mark at the start of the file.
    with open(path, encoding="utf-8-sig") as f:
        return parse_patterns(f)


def excluded(path: str, patterns: Sequence[Pattern]) -> bool:
    """True when ``path`` (relative to the context root, ``/``-separated) is left out."""
    matched = False
    for p in patterns:
        # Only a pattern that could change the verdict is tried: an exclusion while the path is
        # still in, an exception once it is out.
        if p.negated != matched:
            continue
        if p.matches(path):
            matched = not p.negated
    return matched


def _literal_prefix(pattern: str) -> str:
    m = re.search(r"[*?\[\\]", pattern)
    return pattern if m is None else pattern[: m.start()]


def may_reinclude(directory: str, patterns: Sequence[Pattern]) -> bool:
    """True when an exception pattern could match something under the excluded ``directory``.

    Conservative (it may say True for a directory that ends up empty): the walk then goes on
    into the directory, and each path in it is still judged by ``excluded``.
    """
    prefix = directory + "/"
    for p in patterns:
        if not p.negated:
            continue
        literal = _literal_prefix(p.text)
        if (
            (p.text + "/").startswith(prefix)
            or (literal != p.text and prefix.startswith(literal))
            or prefix.startswith(p.text + "/")
        ):
            return True
    return False


@dataclass(frozen=True, order=True)
class Entry:
    """One path of the context: ``kind`` is ``d`` (directory), ``f<mode>`` (regular file) or
    ``l`` (symbolic link); ``detail`` is the directory's octal mode, the file's sha256 or the
    link's target. A change to any field changes the context hash."""

    path: str
    kind: str
    detail: str

    def line(self) -> str:
        return "\0".join((self.path, self.kind, self.detail)) + "\n"


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def context_entries(root: Path, patterns: Sequence[Pattern]) -> list[Entry]:
    """Every directory, regular file and symbolic link under ``root`` that the build would
    send, sorted by path. Symbolic links are recorded, never followed; other file types
    (sockets, devices) are left out, as buildah leaves them out."""
    entries = []
    for top, dirs, files in os.walk(root, topdown=True, followlinks=False):
        rel_top = os.path.relpath(top, root)
        rel_top = "" if rel_top == "." else rel_top + "/"
        keep = []
        for d in sorted(dirs):
            rel, full = rel_top + d, os.path.join(top, d)
            if os.path.islink(full):
                files.append(d)
                continue
            if excluded(rel, patterns):
                if may_reinclude(rel, patterns):
                    keep.append(d)
                continue
            keep.append(d)
            entries.append(Entry(rel, "d", f"{stat.S_IMODE(os.lstat(full).st_mode):o}"))
        dirs[:] = keep
        for fn in sorted(files):
            rel, full = rel_top + fn, os.path.join(top, fn)
            if excluded(rel, patterns):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                entries.append(Entry(rel, "l", os.readlink(full)))
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, f"f{stat.S_IMODE(st.st_mode):o}", _file_sha256(full)))
    return sorted(entries)


def context_hash(entries: Iterable[Entry]) -> str:
    """The sha256 (hex) over the entries' lines, in the order given (context_entries sorts)."""
    h = hashlib.sha256()
    for e in entries:
        h.update(e.line().encode())
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m localcluster.buildcontext",
        description="The build context of a Dockerfile after its .dockerignore.",
    )
    parser.add_argument("mode", choices=("hash", "list"))
    parser.add_argument("root", type=Path, help="the build context directory")
    parser.add_argument("ignorefile", help="the .dockerignore to apply, or - for none")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"root {str(args.root)!r} is not a directory")
    patterns = read_ignorefile(None if args.ignorefile == "-" else Path(args.ignorefile))
    entries = context_entries(args.root, patterns)
    if args.mode == "list":
        for e in entries:
            print(e.path + ("/" if e.kind == "d" else ""))
    else:
        print(context_hash(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
