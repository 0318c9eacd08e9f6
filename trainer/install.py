"""``python -m trainer.install``: put the pinned packages of the stack's pods, and the trainer's
sample, on the shared volume (the stack's setup Job, on a plain Python 3.11 base image).

    python -m trainer.install --dest /data/packages --index_url https://pypi.org/simple/ \\
        --lock cpu=/locks/cpu.txt --lock tensorboard=/locks/tensorboard.txt \\
        [--sample_parts /sample --sample_dest /data/sample/<hash>]

Each ``--lock NAME=FILE`` (a requirement file of docker/: every package at an exact version
with its wheel's sha256) is installed into ``<dest>/<NAME>-<hash>/site``, ``hash`` being 12 hex
digits of the SHA-256 of FILE (infra/bundle.py names the same folder in the pods' PYTHONPATH):

1. a folder already there is complete (it only ever appears by a rename) and is reused;
2. the index is asked for the file's first package (a PEP 503 page): an index that cannot be
   reached fails here, by its URL, before anything is written;
3. ``pip install --require-hashes --no-deps --only-binary :all: --target`` into a temporary
   folder beside it (``.<NAME>-<hash>.<pid>``, pip's own temporary files inside it): pip
   refuses a wheel whose sha256 is not the pinned one, so any index or mirror is safe;
4. the set's first module (``tensorflow``, or ``tensorboard``) is imported from there, timed;
5. the folder is renamed to its name (atomic on one file system, NFS included).

Any failure removes the temporary folder, so the volume never holds a half-installed set, and
ends the program with one line naming what failed: the index and why it cannot be reached; the
wheel file whose hash does not match, with both hashes; the volume without room, with its free
space. What it cost is printed per set: pip's seconds, the bytes on the volume, the first
import's seconds (also as one ``install-measure {json}`` line, for tests and benchmarks).

``--sample_parts`` joins the sample's ``<file>.part-<i>`` pieces (cut to fit ConfigMaps,
infra/bundle.py split_parts) into ``--sample_dest`` the same way: in a temporary folder, then
renamed; a folder already there is kept.

Standard library only (and the trainer's stdlib-only exit codes): it runs before any package
is installed.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from trainer.contract import package_folder
from trainer.contract.exit_codes import EXIT_BAD_FLAGS, EXIT_RETRY, EXIT_VOLUME_FULL, EXIT_VOLUME_NOT_WRITABLE

#: Exit codes, the trainer's (trainer/contract/exit_codes.py): 1 a set could not be installed
#: (index, hash, pip), 2 bad flags or a Python the wheels are not for, 4 the volume has no
#: room, 6 the volume is not writable by the pod's uid.
EXIT_FAILED, EXIT_USAGE, EXIT_NO_ROOM, EXIT_NOT_WRITABLE = (
    EXIT_RETRY,
    EXIT_BAD_FLAGS,
    EXIT_VOLUME_FULL,
    EXIT_VOLUME_NOT_WRITABLE,
)
#: The first module of each set, imported once installed: what the pods import first.
FIRST_IMPORT = {"cpu": "tensorflow", "gpu": "tensorflow", "tensorboard": "tensorboard"}
#: The folder under a set's folder that pip installs into, and the pods put on PYTHONPATH
#: (infra/bundle.py SITE); beside it only the INSTALLED marker.
SITE = "site"
#: Seconds the index probe waits for an answer; pip itself retries its downloads.
PROBE_TIMEOUT = 30
#: A temporary folder older than this (seconds) was left by a setup pod that was killed (its
#: node lost, SIGKILL): removed at the next start. Twice the setup Job's activeDeadlineSeconds
#: (infra/components/setup.py SETUP_TIMEOUT_SECONDS, 3600): no live setup pod is that old.
STALE_SECONDS = 7200
#: What pip prints when a download fails on the network, not on the index's answer.
_NETWORK = re.compile(
    r"Max retries exceeded|Failed to establish a new connection|Temporary failure in name "
    r"resolution|Name or service not known|Connection refused|timed out|ConnectionError"
)
_MISMATCH = "DO NOT MATCH THE HASHES"


class SetupError(Exception):
    """A set could not be installed; ``str`` is the one-line message, ``code`` the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def content_name(lock: Path, name: str) -> str:
    """``<name>-<12 hex digits of the SHA-256 of lock's bytes>``: the set's folder name, as the
    stack names it too (trainer/contract/package_folder.py)."""
    return package_folder.folder_name(name, package_folder.requirements_digest(lock.read_bytes()))


def check_python(machine: str = platform.machine(), version: tuple[int, ...] = sys.version_info[:2]) -> None:
    """The pinned wheels are CPython 3.11 x86_64 ones (docker/pin_requirements.py).

    Raises:
        SetupError: another version or machine, naming both and the fix (baseImage).
    """
    if tuple(version[:2]) != (3, 11) or machine != "x86_64":
        raise SetupError(
            f"this base image runs Python {'.'.join(map(str, version))} on {machine}; the pinned wheels are "
            "CPython 3.11 on x86_64: set baseImage to a Python 3.11 image for linux/amd64",
            EXIT_USAGE,
        )


def first_package(lock: Path) -> str:
    """The first ``name==version`` requirement's name in ``lock``, normalised (PEP 503).

    Raises:
        SetupError: the file pins no package.
    """
    for line in lock.read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if found:
            return re.sub(r"[-_.]+", "-", found.group(1)).lower()
    raise SetupError(f"--lock {lock}: pins no package (name==version lines)", EXIT_USAGE)


def probe_index(index_url: str, package: str, opener: Callable = urllib.request.urlopen) -> None:
    """Ask ``index_url`` for ``package``'s page, so that an index out of reach fails by name.

    Raises:
        SetupError: no answer (DNS, refused, timeout, TLS) or an error status, with the URL,
            the reason and the fix (packageIndex).
    """
    url = f"{index_url.rstrip('/')}/{package}/"
    fix = "set packageIndex to an index or mirror the pods can reach (docs/deploying.md, section Packages)"
    try:
        with opener(url, timeout=PROBE_TIMEOUT) as answer:
            answer.read(1)
    except urllib.error.HTTPError as err:
        raise SetupError(
            f"package index {index_url} answered {url} with HTTP {err.code} {err.reason}: {fix}"
        ) from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise SetupError(f"package index {index_url} cannot be reached ({reason}): {fix}") from None


def pip_command(lock: Path, target: Path, index_url: str) -> list[str]:
    """pip's command line: hashes required, wheels only, no dependency resolution (the file
    lists every package), no cache (one install per volume); ``--trusted-host`` for an http
    index, which pip refuses otherwise (the hashes still decide what is installed)."""
    parts = urllib.parse.urlsplit(index_url)
    trusted = ["--trusted-host", parts.hostname or ""] if parts.scheme == "http" else []
    return [
        sys.executable, "-m", "pip", "install", "--require-hashes", "--no-deps", "--only-binary", ":all:",
        "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        "--index-url", index_url, *trusted, "--target", str(target), "-r", str(lock),
    ]  # fmt: skip


def mismatches(output: str) -> list[str]:
    """The files pip refused for their hash, from its report: ``<file>: expected <sha256>,
    got <sha256>`` for each; empty when it reported none."""
    if _MISMATCH not in output:
        return []
    found = re.findall(
        r"from (\S+?)(?: \(from .*\))?:\s*\n\s*Expected sha256 (\w+)\s*\n\s*Got\s+(\w+)", output
    )
    return [
        f"{Path(urllib.parse.urlsplit(url).path).name or url}: expected sha256 {want}, got {got}"
        for url, want, got in found
    ]


def pip_failure(output: str, name: str, lock_name: str, index_url: str, dest: Path) -> SetupError:
    """The SetupError for pip's failed run, by what its output says, most specific first."""
    refused = mismatches(output)
    if refused or _MISMATCH in output:
        files = "; ".join(refused) or "see pip's report above"
        return SetupError(
            f"package set {name}: the index {index_url} served a wheel whose sha256 is not the one "
            f"{lock_name} pins ({files}); nothing was installed: the index or a proxy changed the file"
        )
    if os.strerror(errno.ENOSPC) in output or "[Errno 28]" in output or "Disk quota exceeded" in output:
        return no_room(name, dest)
    if _NETWORK.search(output):
        line = next((s.strip() for s in output.splitlines() if _NETWORK.search(s)), "")
        return SetupError(
            f"package set {name}: a download from {index_url} failed on the network: {line[:300]}"
        )
    last = [s.strip() for s in output.splitlines() if s.strip()][-1:] or ["(no output)"]
    return SetupError(f"package set {name}: pip failed: {last[0][:300]}")


def no_room(name: str, dest: Path) -> SetupError:
    """The error for a volume that ran out of room while ``name`` was installed under ``dest``."""
    try:
        free = f"{shutil.disk_usage(dest).free / 1e6:.0f} MB free"
    except OSError:
        free = "free space unknown"
    return SetupError(
        f"package set {name}: the volume holding {dest} has no room for its packages ({free} once the partial "
        "install was removed): enlarge persistence.pvc.storage or free the volume, then run "
        "`pulumi up` again",
        EXIT_NO_ROOM,
    )


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (what the set takes on the volume)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def timed_import(module: str, folder: Path, run: Callable = subprocess.run) -> float:
    """Seconds a new Python takes to ``import module`` from ``folder`` (PYTHONPATH).

    Raises:
        SetupError: the import failed (its last line), so the set is not swapped in.
    """
    env = {**os.environ, "PYTHONPATH": str(folder)}
    start = time.monotonic()
    done = run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        last = [s for s in (done.stderr or "").splitlines() if s.strip()][-1:] or ["(no output)"]
        raise SetupError(f"import {module} from the installed packages failed: {last[0][:300]}")
    return seconds


def sweep(dest: Path, now: float | None = None) -> None:
    """Remove temporary folders (``.<name>.<pid>``) older than STALE_SECONDS under ``dest``."""
    now = time.time() if now is None else now
    for entry in dest.glob(".*"):
        try:
            if entry.is_dir() and now - entry.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def swap_in(tmp: Path, folder: Path) -> bool:
    """Rename ``tmp`` to ``folder``; False (and ``tmp`` removed) when another setup pod put
    ``folder`` there first, whose copy is then the one used."""
    try:
        os.rename(tmp, folder)
        return True
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not folder.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return False


def install(name: str, lock: Path, dest: Path, index_url: str, run: Callable = subprocess.run) -> dict:
    """Install the set ``name`` pinned by ``lock`` into ``dest/<content name>``, or reuse it.

    Returns:
        What it cost: ``{"set", "folder", "reused", "pip_seconds", "bytes", "import_seconds"}``
        (the last three None when reused).

    Raises:
        SetupError: the index, a hash, pip, the import or the volume failed; no folder of the
            set is left behind but an earlier complete one.
    """
    folder = dest / content_name(lock, name)
    if folder.is_dir():
        return {"set": name, "folder": str(folder), "reused": True, "pip_seconds": None, "bytes": None,
                "import_seconds": None}  # fmt: skip
    probe_index(index_url, first_package(lock))
    tmp = dest / f".{folder.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / ".pip-tmp").mkdir(parents=True)
        start = time.monotonic()
        # pip unpacks into TMPDIR before it moves files into --target: on the volume, not the
        # pod's small scratch emptyDir, which the GPU set's wheels (GBs) would overflow.
        env = {**os.environ, "TMPDIR": str(tmp / ".pip-tmp")}
        done = run(pip_command(lock, tmp / SITE, index_url), env=env, capture_output=True, text=True)
        pip_seconds = time.monotonic() - start
        output = (done.stdout or "") + (done.stderr or "")
        print(output, end="", flush=True)
        if done.returncode != 0:
            raise pip_failure(output, name, lock.name, index_url, dest)
        shutil.rmtree(tmp / ".pip-tmp")
        import_seconds = timed_import(FIRST_IMPORT.get(name, name), tmp / SITE, run)
        size = folder_bytes(tmp)
        (tmp / "INSTALLED").write_text(json.dumps({"lock": lock.name, "index": index_url}) + "\n")
        swap_in(tmp, folder)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_room(name, dest) from None
        raise SetupError(f"package set {name}: {err}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"set": name, "folder": str(folder), "reused": False, "pip_seconds": round(pip_seconds, 1),
            "bytes": size, "import_seconds": round(import_seconds, 2)}  # fmt: skip


def join_sample(parts: Path, dest: Path) -> bool:
    """Join ``parts``' ``<file>.part-<i>`` pieces into ``dest/<file>`` (in a temporary folder,
    then renamed); False when ``dest`` was already there.

    Raises:
        SetupError: a file's pieces do not run 0, 1, ... without a gap.
    """
    if dest.is_dir():
        return False
    pieces: dict[str, dict[int, Path]] = {}
    for path in parts.iterdir():
        found = re.match(r"^(.+)\.part-(\d+)$", path.name)
        if found:
            pieces.setdefault(found.group(1), {})[int(found.group(2))] = path
    tmp = dest.parent / f".{dest.name}.{os.getpid()}"
    try:
        tmp.mkdir(parents=True)
        for name, numbered in sorted(pieces.items()):
            if sorted(numbered) != list(range(len(numbered))):
                raise SetupError(f"--sample_parts {parts}: {name} has pieces {sorted(numbered)}, not 0..n")
            with open(tmp / name, "wb") as out:
                for index in range(len(numbered)):
                    out.write(numbered[index].read_bytes())
        return swap_in(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def measure_line(cost: dict) -> str:
    """The human line for one set's cost, from ``install``'s dict."""
    if cost["reused"]:
        return f"package set {cost['set']}: reused {cost['folder']}"
    return (
        f"package set {cost['set']}: installed into {cost['folder']} in {cost['pip_seconds']} s (pip), "
        f"{cost['bytes'] / 1e6:.0f} MB on the volume; first import {FIRST_IMPORT.get(cost['set'], cost['set'])} "
        f"from the volume: {cost['import_seconds']} s"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainer.install", description=__doc__.split("\n")[0])
    parser.add_argument("--dest", required=True, type=Path, help="folder of the package sets on the volume")
    parser.add_argument("--index_url", required=True, help="PEP 503 package index (PyPI or a mirror)")
    parser.add_argument("--lock", action="append", default=[], metavar="NAME=FILE", help="a set to install")
    parser.add_argument("--sample_parts", type=Path, help="folder of the sample's .part-<i> pieces")
    parser.add_argument("--sample_dest", type=Path, help="where the joined sample goes")
    args = parser.parse_args(argv)
    for item in args.lock:
        if "=" not in item or not item.split("=", 1)[0] or not Path(item.split("=", 1)[1]).is_file():
            parser.error(f"--lock {item!r}: must be NAME=FILE naming an existing requirement file")
    if (args.sample_parts is None) != (args.sample_dest is None):
        parser.error("--sample_parts and --sample_dest go together")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_python()
        try:
            args.dest.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise SetupError(
                f"--dest {args.dest}: not writable by uid {os.getuid()}: make the volume's directory the pods' "
                "(docker/README.md, 'Pod security') or set pods.runAsUser to its owner",
                EXIT_NOT_WRITABLE,
            ) from None
        sweep(args.dest)
        if args.sample_parts is not None:
            joined = join_sample(args.sample_parts, args.sample_dest)
            print(f"sample: {'joined into' if joined else 'reused'} {args.sample_dest}", flush=True)
        for item in args.lock:
            name, lock = item.split("=", 1)
            cost = install(name, Path(lock), args.dest, args.index_url)
            print(measure_line(cost), flush=True)
            print("install-measure " + json.dumps(cost, sort_keys=True), flush=True)
    except SetupError as err:
        # The last line is the container's termination message, which `pulumi up` shows.
        print(f"trainer.install: {err}", file=sys.stderr, flush=True)
        return err.code
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            print(f"trainer.install: {no_room('sample', args.dest)}", file=sys.stderr, flush=True)
            return EXIT_NO_ROOM
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
