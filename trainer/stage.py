"""``python -m trainer.stage --dest DIR [--source DIR_OR_URL] [--run_dir RUN_DIR]``: put verified
MNIST files in place (the stack's data step, run as a Job before training), then make the run's
directory that the task pods mount (``make_run_dir``).

Every file is checked against a known SHA-256 before it gets its final name (an IDX file
by the SHA-256 of its decompressed bytes, trainer.data.KNOWN_IDX_SHA256, so the upstream
.gz, a recompressed copy and the raw file are all recognised; or by that of its own bytes,
KNOWN_SHA256), written
under a temporary name in DIR and renamed (``os.replace``, atomic on one file system and on
NFS), so two stagers at once cannot leave a torn file; files already in DIR with a known
checksum are left alone, which makes a second run a no-op.

Sources: a directory (default: the sample bundled with the trainer; the stack's may be one
on the shared volume), an http(s) URL, either of one ``.npz`` file or of a directory holding
the four IDX files (.gz; from a directory also raw, staged under the name they have there),
or a list of http(s) URLs (``--source`` once per file) of the four IDX .gz files, each file
named by its URL's last path segment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from trainer.contract.exit_codes import EXIT_VOLUME_FULL, EXIT_VOLUME_NOT_WRITABLE
from trainer.contract.printable import printable
from trainer.data import (
    ALL_IDX_FILES,
    NPZ_FILE,
    DataError,
    content_sha256,
    idx_path,
    known_idx_set,
    load,
    raw_name,
)
from trainer.download import DownloadError, download
from trainer.flags import BUNDLED_DATA_DIR
from trainer.volume import VolumeFull, full_is_permanent, is_no_space

#: File name -> {sha256: data set}. Sources: trainer/data/mnist-10k/README.md (the bundled
#: sample); Keras' keras.datasets.mnist (mnist.npz, the full 60,000 + 10,000 MNIST);
#: Debian's dataset-fashion-mnist package files (the full Fashion-MNIST, recompressed
#: by Debian, so they differ from upstream's .gz bytes).
KNOWN_SHA256: dict[str, dict[str, str]] = {
    "train-images-idx3-ubyte.gz": {
        "dfcaaca908ab3468006b683de6b626ae74440eaca6c093d581aa5bfcbcdbc656": "mnist-10k",
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7": "fashion-mnist (Debian)",
    },
    "train-labels-idx1-ubyte.gz": {
        "74fcfd64b9ef3a5e6e9d649895d48c343c25b109c0ca51610abe60a1e4e2ba96": "mnist-10k",
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056": "fashion-mnist (Debian)",
    },
    "t10k-images-idx3-ubyte.gz": {
        "f41766449a7b871e440881385b081f4a89d7b170ad4401f545ecb7ebdb8ac28b": "mnist-10k",
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa": "fashion-mnist (Debian)",
    },
    "t10k-labels-idx1-ubyte.gz": {
        "d7b14c219b7a1093465e2181bd805ee63a34467a4e4dad353cbf82c57d2064af": "mnist-10k",
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05": "fashion-mnist (Debian)",
    },
    NPZ_FILE: {
        "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1": "mnist (Keras)",
    },
}


class StageError(RuntimeError):
    """A source that is missing, unreachable, or holds files with unknown checksums."""


class VolumeNotWritable(StageError):
    """``--dest`` cannot be created or written by this process's uid: a directory on the way
    belongs to another uid (a fresh NFS export or node directory belongs to root, mode 0755).
    No retry cures it: ``main`` exits EXIT_VOLUME_NOT_WRITABLE."""


def _nearest_existing(path: Path) -> Path:
    """``path`` itself, or its closest ancestor that exists."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def not_writable_message(dest: Path, blocking: Path, hint: str = "", flag: str = "--dest") -> str:
    """Why ``dest`` (given as ``flag``) cannot be staged into: ``blocking`` (dest or its nearest
    existing ancestor) with its owner and mode, and this process's uid and gid; then ``hint``
    (where the volume lives and how to fix it: the stack passes it, trainer.stage knows neither)."""
    info = blocking.stat()
    what = "cannot write there" if blocking == dest else "cannot create it"
    return (
        f"{flag} {dest}: {what}: {blocking} belongs to uid {info.st_uid}, gid {info.st_gid}, mode "
        f"{stat.S_IMODE(info.st_mode):04o} ({stat.filemode(info.st_mode)}), and this process runs as uid "
        f"{os.getuid()}, gid {os.getgid()}, which may not create files in it." + (f" {hint}" if hint else "")
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def url_list(sources: Sequence[str]) -> dict[str, str]:
    """File name -> URL of a list of file URLs: each an http(s) URL whose last path segment
    (before any query) is one of the four IDX .gz names, all four named once.

    Raises:
        StageError: naming the URL that is no http(s) URL or names no IDX file, or the files
            missing or named twice.
    """
    files: dict[str, str] = {}
    for url in sources:
        name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if not _is_url(url) or name not in ALL_IDX_FILES:
            raise StageError(
                f"--source {url}: in a list of sources, each must be an http(s) URL "
                f"of one of {', '.join(ALL_IDX_FILES)}"
            )
        if name in files:
            raise StageError(f"--source {url}: {name} is already given by {files[name]}")
        files[name] = url
    missing = [n for n in ALL_IDX_FILES if n not in files]
    if missing:
        raise StageError(f"--source: the list of URLs lacks {', '.join(missing)}")
    return {name: files[name] for name in ALL_IDX_FILES}


def _wanted(source: str) -> list[str]:
    """The file names to stage from ``source`` (for IDX files from a directory, the .gz or
    the raw name, whichever the directory holds)."""
    if _is_url(source):
        return [NPZ_FILE] if source.rstrip("/").endswith(".npz") else list(ALL_IDX_FILES)
    directory = Path(source)
    if not directory.is_dir():
        raise StageError(f"--source {source}: not a directory or http(s) URL")
    if (
        any((directory / n).exists() or (directory / raw_name(n)).exists() for n in ALL_IDX_FILES)
        or not (directory / NPZ_FILE).exists()
    ):
        return [idx_path(directory, n).name for n in ALL_IDX_FILES]
    return [NPZ_FILE]


def _standard(name: str) -> str:
    """The standard (.gz) name of a staged file name (raw IDX names map to theirs)."""
    return name if name == NPZ_FILE or name.endswith(".gz") else f"{name}.gz"


def identify(name: str, path: Path) -> tuple[str | None, str]:
    """(data set or None, identity) of the file ``path`` staged as ``name``.

    The identity is what two copies of one file share: for IDX files the SHA-256 of the
    decompressed bytes (any compression of the same data is the same file), else that of
    the file's bytes.
    """
    digest = sha256_of(path)
    known = KNOWN_SHA256.get(name, {}).get(digest)
    if name == NPZ_FILE:
        return known, digest
    try:
        content = content_sha256(path)
    except DataError:  # not gzip, empty, ...: not a known copy (the data checks say why)
        return known, digest
    return known or known_idx_set(_standard(name), content), content


def _fetch(source: str, name: str, tmp: Path, url: str | None = None) -> None:
    """Copy or download one file of ``source`` to ``tmp`` (from ``url`` when given: a file of
    a URL list); a download gives up at once on a permanent error, and tries a transient one
    again for about a minute at most (trainer.download).

    Raises:
        StageError: the file is missing, or its download failed (one line: the URL and why).
    """
    if url is not None or _is_url(source):
        if url is None:
            url = source if name == NPZ_FILE and source.endswith(".npz") else f"{source.rstrip('/')}/{name}"
        try:
            download(url, tmp)  # ENOSPC passes: the caller says whose volume is full
        except DownloadError as err:
            raise StageError(str(err)) from None
    else:
        path = Path(source) / name
        if not path.is_file():
            raise StageError(f"{path}: file is missing")
        shutil.copyfile(path, tmp)


def _source_identity(source: str, name: str) -> tuple[str | None, str]:
    path = Path(source) / name
    if not path.is_file():
        raise StageError(f"{path}: file is missing")
    return identify(name, path)


def _unknown_message(source: str, name: str, path: Path) -> str:
    digest = sha256_of(path)
    try:
        content = f" (nor is {content_sha256(path)} of its decompressed bytes)" if name != NPZ_FILE else ""
    except DataError:
        content = ""
    return (
        f"{source} {name}: sha256 {digest} is not a known checksum of {name}{content}; "
        "refusing to stage it (--allow_unknown stages files that pass the trainer's "
        "data checks)"
    )


def _one_source(source: str | Sequence[str]) -> tuple[str, dict[str, str]]:
    """(the source as text, file name -> URL for a URL list, else {}): a one-item sequence is
    that item; several items are a URL list (``url_list``), shown as its URLs."""
    if isinstance(source, str):
        return source, {}
    if len(source) == 1:
        return source[0], {}
    urls = url_list(source)
    return ", ".join(urls.values()), urls


def _make_dest(dest: Path, hint: str = "", flag: str = "--dest") -> None:
    """Create ``dest`` (given as ``flag``; and its parents) and make sure this process can write
    in it.

    Raises:
        VolumeNotWritable: a directory on the way, or ``dest`` itself, is not writable by
            this process (``not_writable_message``, with ``hint``).
        StageError: ``dest`` is not a directory, or another error creating it.
    """
    if dest.exists() and not dest.is_dir():
        raise StageError(f"{flag} {dest}: not a directory")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise VolumeNotWritable(not_writable_message(dest, _nearest_existing(dest), hint, flag)) from None
    except OSError as err:
        if is_no_space(err):
            raise
        raise StageError(f"{flag} {dest}: cannot create the directory: {err.strerror or err}") from None
    # The staging files are made in dest itself: fail here, before anything is fetched.
    if not os.access(dest, os.W_OK | os.X_OK):
        raise VolumeNotWritable(not_writable_message(dest, dest, hint, flag))


def make_run_dir(run_dir: str | Path, hint: str = "") -> None:
    """Create the run directory ``run_dir`` as this process's uid, the pods': the task pods mount
    it alone, by subPath (docs/design.md, "What a task pod may write"), and the kubelet would
    make a missing subPath as root, which they could not write (a volume of mode 0755), or not
    at all (root squashed). Raises as ``_make_dest``, or VolumeFull."""
    with full_is_permanent(run_dir, f"making {run_dir}", flag="--run_dir"):
        _make_dest(Path(run_dir), hint, flag="--run_dir")


def stage(
    dest: str | Path,
    source: str | Sequence[str] = str(BUNDLED_DATA_DIR),
    allow_unknown: bool = False,
    log=print,
    volume_hint: str = "",
) -> list[str]:
    """Stage the data set of ``source`` (a directory or URL; a sequence: ``_one_source``) into
    ``dest``; return the file names now in place.

    All or nothing: every file that needs staging is fetched into a private temporary
    directory inside ``dest`` and checked (checksums; with ``allow_unknown`` the trainer's
    data checks on the whole set) before any is renamed to its final name, so a failure
    leaves ``dest`` as it was.

    Raises:
        VolumeNotWritable: this uid cannot create or write ``dest`` (ends with ``volume_hint``).
        trainer.volume.VolumeFull: a write in ``dest`` failed with ENOSPC or EDQUOT
            (``dest`` is left as it was).
        StageError: ``dest`` not a directory, a bad URL list, a missing or unreachable source file,
            or a checksum not in KNOWN_SHA256 (unless ``allow_unknown``: then the data checks).
        DataError: with ``allow_unknown``, files that the trainer could not read.
    """
    dest, (source, urls) = Path(dest), _one_source(source)
    names = list(urls) if urls else _wanted(source)
    # For a directory source the file in place must be the source's own bytes; for a URL
    # (which cannot be compared without downloading) any known checksum will do. Every
    # source file is checked here, before anything is written.
    expected: dict[str, str | None] = {}
    for name in names:
        expected[name] = None
        if not urls and not _is_url(source):
            known, expected[name] = _source_identity(source, name)
            if known is None and not allow_unknown:
                raise StageError(_unknown_message(source, name, Path(source) / name))
    with full_is_permanent(dest, f"staging into {dest}", flag="--dest"):
        return _stage_into(dest, source, urls, names, expected, allow_unknown, log, volume_hint)


def _stage_into(
    dest: Path,
    source: str,
    urls: dict[str, str],
    names: list[str],
    expected: dict[str, str | None],
    allow_unknown: bool,
    log,
    volume_hint: str,
) -> list[str]:
    """``stage``'s writes, once every source file is checked: make ``dest``, fetch and check
    into a temporary directory, rename into place (see ``stage``)."""
    _make_dest(dest, volume_hint)
    for name in names:  # the trainer reads the .gz when both forms are there
        other = dest / (raw_name(name) if name.endswith(".gz") else f"{name}.gz")
        if name != NPZ_FILE and other.exists():
            raise StageError(
                f"{dest}: holds {other.name}, the other form of {name}; stage "
                "into an empty directory (the trainer would read the .gz)"
            )
    staged_sets: dict[str, str] = {}
    in_place: list[str] = []
    work = Path(tempfile.mkdtemp(prefix=".stage.", suffix=".tmp", dir=dest))
    try:
        for name in names:
            target = dest / name
            if target.is_file():
                known, identity = identify(name, target)
                if known and (expected[name] is None or identity == expected[name]):
                    staged_sets[name] = known
                    in_place.append(name)
                    continue
            tmp = work / name
            _fetch(source, name, tmp, urls.get(name))
            what, _ = identify(name, tmp)
            if what is None and not allow_unknown:
                raise StageError(_unknown_message(urls.get(name, source), name, tmp))
            staged_sets[name] = what or "unknown checksum"
        known_sets = {v for v in staged_sets.values() if v != "unknown checksum"}
        if len(known_sets) > 1:
            raise StageError(
                f"{dest}: files from different data sets would end up together: "
                f"{staged_sets}; stage into an empty directory"
            )
        if allow_unknown:
            # The trainer's checks (magic numbers, sizes, counts, label range) on the set as
            # it will be, before any file gets its final name.
            for name in in_place:
                shutil.copyfile(dest / name, work / name)
            try:
                load(work)
            except DataError as err:  # name the source's file, not our temporary copy
                raise DataError(str(err).replace(str(work), source.rstrip("/"))) from None
        for name in names:
            if name in in_place:
                log(f"{dest / name}: already staged ({staged_sets[name]}, sha256 {sha256_of(dest / name)})")
                continue
            tmp = work / name
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            tmp.chmod(0o644)
            os.replace(tmp, dest / name)  # atomic: readers see the old file or the whole new one
            log(
                f"{dest / name}: staged from {urls.get(name, source)} ({staged_sets[name]}, "
                f"sha256 {sha256_of(dest / name)})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return names


#: A URL's credentials in what staging prints: the user info before ``@`` and the query string
#: (a presigned URL's signature and key id, e.g. OSS's ``?Expires=..&OSSAccessKeyId=..&Signature=..``),
#: up to the whitespace, or the ``:``, ``,`` or ``)`` before whitespace, that ends the URL in a line.
URL_SECRETS = re.compile(
    r"(?P<scheme>https?://)(?P<userinfo>[^/\s@]+@)?(?P<rest>[^\s?#]*)(?P<query>\?[^\s#]*?)?"
    r"(?=[:,)]?(?:\s|$))"
)


def hide_url_secrets(text: str) -> str:
    """``text`` with the credentials of every http(s) URL in it hidden (URL_SECRETS): the
    user info becomes ``<hidden>@``, the query string ``?<hidden>``; the host and path stay,
    which say which file it is. Logs and pod termination messages outlive the URL's validity."""

    def hide(match: re.Match) -> str:
        return (
            match["scheme"]
            + ("<hidden>@" if match["userinfo"] else "")
            + match["rest"]
            + ("?<hidden>" if match["query"] else "")
        )

    return URL_SECRETS.sub(hide, text)


def sources_from_env(name: str) -> list[str]:
    """The sources in the environment variable ``name``: a JSON list of strings (an empty list:
    the bundled sample).

    Raises:
        StageError: the variable is unset, or not such a list (its value is not shown: it may
            hold credentials).
    """
    text = os.environ.get(name)
    if text is None:
        raise StageError(f"--sources_env {name}: the environment variable {name} is not set")
    try:
        sources = json.loads(text)
    except ValueError:
        sources = None
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise StageError(
            f"--sources_env {name}: the environment variable {name} must hold a JSON list of "
            "strings (its value is not shown)"
        )
    return sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.stage",
        description="Copy or download MNIST-format files into DIR, checksum-verified and "
        "atomic; a no-op when they are already there.",
    )
    parser.add_argument("--dest", required=True, help="directory to stage into (created)")
    parser.add_argument(
        "--source",
        action="append",
        help="directory or http(s) URL (of mnist.npz, or of a directory "
        "with the four IDX files); given four times, the URLs of the four "
        "IDX .gz files; default: the bundled mnist-10k sample",
    )
    parser.add_argument(
        "--sources_env",
        metavar="NAME",
        help="take the sources from the environment variable NAME, a JSON list of "
        "strings, instead of --source: how the stack passes a data source that "
        "holds credentials (from a Kubernetes Secret, never in the command)",
    )
    parser.add_argument(
        "--allow_unknown",
        action="store_true",
        help="accept checksums not in the known list if the files pass the trainer's data checks",
    )
    parser.add_argument(
        "--run_dir",
        help="also make this directory (the run's, which the task pods mount alone) once the "
        "data is in place, as this uid",
    )
    parser.add_argument(
        "--volume_hint",
        default="",
        help="text that ends the error when DIR cannot be written: where the "
        "volume lives and how to fix it (exit code "
        f"{EXIT_VOLUME_NOT_WRITABLE})",
    )
    args = parser.parse_args(argv)
    if args.sources_env and args.source:
        parser.error("--sources_env and --source exclude each other")
    try:
        sources = sources_from_env(args.sources_env) if args.sources_env else args.source
    except StageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        stage(
            args.dest,
            sources or [str(BUNDLED_DATA_DIR)],
            args.allow_unknown,
            log=lambda line: print(printable(hide_url_secrets(line))),
            volume_hint=args.volume_hint,
        )
        if args.run_dir:
            make_run_dir(args.run_dir, args.volume_hint)
    except VolumeNotWritable as err:
        # One line, the pod's last: its termination message (FallbackToLogsOnError).
        print(f"error: {printable(hide_url_secrets(str(err)))}", file=sys.stderr)
        return EXIT_VOLUME_NOT_WRITABLE
    except VolumeFull as err:
        print(f"error: {printable(hide_url_secrets(str(err)))}", file=sys.stderr)
        return EXIT_VOLUME_FULL
    except (StageError, DataError, OSError) as err:
        print(f"error: {printable(hide_url_secrets(str(err)))}", file=sys.stderr)
        return 1
    print(f"staged in {args.dest}" + (f"; run directory {args.run_dir}" if args.run_dir else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
