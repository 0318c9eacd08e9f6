"""What the pods of a stack without images of its own run on: a public Python image, by region
(``regional_runtime``), and what they get from the stack: the trainer's code and its bundled
sample (as ConfigMaps, infra/components/setup.py) and the hash-pinned package files the setup
Job installs, from a package index by region, each named by the SHA-256 of its content.

Read from the project's own files at ``pulumi up`` (the repository holding infra/):
``trainer/**/*.py``, ``trainer/data/mnist-10k/*.gz`` and the requirement files of docker/
(``PACKAGE_FILES``), the same files the images built from docker/ install. A change to any of
them is a new name (a ConfigMap, a package folder) and, because the hashes are part of the run
key (infra/runs.py), a new run.

Standard library only; nothing here talks to Pulumi or a cluster.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path

from trainer.contract import package_folder as package_folder_mod

#: The repository: the parent of infra/.
REPO = Path(__file__).resolve().parents[1]
#: Package set -> its requirement file, relative to the repository: every package at an exact
#: version with the sha256 of its CPython 3.11 x86_64 wheel (docker/pin_requirements.py writes
#: them). ``cpu``: tensorflow-cpu and tensorboard (ps, a CPU chief, CPU workers, staging);
#: ``gpu``: tensorflow[and-cuda] with the CUDA 12 and cuDNN 9 wheels, and tensorboard (GPU
#: workers and a GPU chief); ``tensorboard``: TensorBoard alone.
PACKAGE_FILES = {
    "cpu": "docker/trainer-cpu-requirements.txt",
    "gpu": "docker/trainer-gpu-requirements.txt",
    "tensorboard": "docker/tensorboard-requirements.txt",
}
#: The public Python 3.11 image the pods run without images of your own (baseImage unset), by
#: region (``alicloud:region``): the code comes from ConfigMaps and the packages from the
#: shared volume (infra/components/setup.py), so it holds neither.
#: - elsewhere (and with no region): Docker Hub's official python:3.11-slim, by the digest of its
#:   multi-arch index. Not resolved here (no registry was reachable where this was written): the
#:   digest is the one public repositories' lock records give for python:3.11-slim, also
#:   tagged 3.11.16-slim-trixie (Python 3.11.16 on Debian trixie) when it was pinned.
#:   Check it with `skopeo inspect docker://python:3.11-slim` before relying on it.
#: - cn-* regions: Alibaba Cloud Linux 3's public Python 3.11 image, on a registry in mainland
#:   China (Docker Hub is slow or out of reach from there). By TAG, not digest: no digest of it
#:   could be looked up where this was written and none is invented; `pulumi up` resolves the
#:   tag to its digest, which every pod runs (infra/image_pins.py). baseImage <image>@sha256:...
#:   pins one for good.
PYTHON_SLIM_IMAGE = "python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7"
ALINUX_PYTHON_IMAGE = "alibaba-cloud-linux-3-registry.cn-hangzhou.cr.aliyuncs.com/alinux3/python:3.11.1"
#: The package index the setup Job installs from (packageIndex unset), by region: PyPI, or in
#: cn-* regions Alibaba Cloud's public PyPI mirror (PyPI is slow or out of reach from mainland
#: China). pip's --require-hashes checks every wheel against its pinned sha256, so a mirror can
#: only fail an install, never change what is installed.
PYPI_INDEX = "https://pypi.org/simple/"
ALIYUN_PYPI_MIRROR = "https://mirrors.aliyun.com/pypi/simple/"
#: The bundled sample staged when data.source is unset (trainer/data/mnist-10k/README.md).
SAMPLE_DIR = "trainer/data/mnist-10k"
#: The folder of a set's folder that holds its packages (trainer/install.py SITE).
SITE = "site"
#: Hex digits of a content name: 48 bits, as the run key's (infra/runs.py KEY_DIGITS)
#: and the package folders' (trainer/contract/package_folder.py).
HASH_DIGITS = package_folder_mod.DIGEST_DIGITS
#: The most bytes of file content one ConfigMap holds. The API server refuses a ConfigMap over
#: 1 MiB (data and binaryData together, core/v1 validation), and binaryData travels base64 (4/3
#: larger) in a request that etcd caps at 1.5 MiB: 768 KiB is 1 MiB in base64, under both.
CONFIG_MAP_BYTES = 768 * 1024


def regional_runtime(region: str | None) -> tuple[str, str]:
    """``(base image, package index)`` for ``region`` (alicloud:region; None without one)."""
    if region is not None and region.startswith("cn-"):
        return ALINUX_PYTHON_IMAGE, ALIYUN_PYPI_MIRROR
    return PYTHON_SLIM_IMAGE, PYPI_INDEX


def _hash(files: Mapping[str, bytes]) -> str:
    """HASH_DIGITS hex digits of the SHA-256 of ``files`` (path -> bytes), in path order, each
    path with its content's SHA-256 (so a renamed file changes it too)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path}\0{hashlib.sha256(files[path]).hexdigest()}\n".encode())
    return digest.hexdigest()[:HASH_DIGITS]


def code_files(root: Path = REPO) -> dict[str, bytes]:
    """The trainer's Python modules: repository path (``trainer/stage.py``) -> bytes, every
    ``*.py`` under trainer/ outside ``__pycache__``, in path order.

    Raises:
        FileNotFoundError: ``root`` has no trainer/ package (a copy of infra/ alone).
        ValueError: the modules pass CONFIG_MAP_BYTES together: they would not fit the one
            ConfigMap the pods mount.
    """
    package = root / "trainer"
    if not (package / "__init__.py").is_file():
        raise FileNotFoundError(f"{package}: the trainer package, whose code the pods run, is not there")
    found = (p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(found)}
    size = sum(map(len, files.values()))
    if size > CONFIG_MAP_BYTES:
        raise ValueError(
            f"{package}: its modules hold {size} bytes, more than the {CONFIG_MAP_BYTES} of the code ConfigMap "
            "(infra/bundle.py CONFIG_MAP_BYTES): split the code into several ConfigMaps"
        )
    return files


def sample_files(root: Path = REPO) -> dict[str, bytes]:
    """The bundled sample's IDX files: file name (``train-images-idx3-ubyte.gz``) -> bytes.

    Raises:
        FileNotFoundError: ``root`` has no such file (a copy without trainer/data/): staging
            would have nothing to copy.
    """
    files = {p.name: p.read_bytes() for p in sorted((root / SAMPLE_DIR).glob("*.gz"))}
    if not files:
        raise FileNotFoundError(
            f"{root / SAMPLE_DIR}: the bundled sample, which staging copies, has no .gz file"
        )
    return files


@functools.lru_cache(maxsize=4)
def code_hash(root: Path = REPO) -> str:
    """The content name of the trainer's code: HASH_DIGITS hex digits. Cached per ``root``: one
    ``pulumi up`` reads the files once. The sample is not in it: trainer/stage.py accepts only
    the sample's known checksums, so a changed sample is a changed module too."""
    return _hash(code_files(root))


@functools.lru_cache(maxsize=4)
def sample_hash(root: Path = REPO) -> str:
    """The content name of the bundled sample alone (the folder the setup Job joins it into)."""
    return _hash(sample_files(root))


def lock_text(package_set: str, root: Path = REPO) -> str:
    """The requirement file of ``package_set`` (a key of PACKAGE_FILES) as text.

    Raises:
        KeyError: ``package_set`` is none of PACKAGE_FILES'.
        FileNotFoundError: the file is missing from ``root``.
    """
    return (root / PACKAGE_FILES[package_set]).read_text()


@functools.lru_cache(maxsize=8)
def lock_hash(package_set: str, root: Path = REPO) -> str:
    """The content name of ``package_set``'s requirement file: HASH_DIGITS hex digits of its
    SHA-256 (trainer/contract/package_folder.py, which trainer/install.py names its folder by)."""
    return package_folder_mod.requirements_digest(lock_text(package_set, root).encode())


def package_folder(packages_dir: str, package_set: str, root: Path = REPO) -> str:
    """Where ``package_set`` is installed under ``packages_dir``: ``<dir>/<set>-<lock hash>``, the
    folder trainer/install.py installs it into (trainer/contract/package_folder.py)."""
    return f"{packages_dir}/{package_folder_mod.folder_name(package_set, lock_hash(package_set, root))}"


def package_path(packages_dir: str, package_set: str, root: Path = REPO) -> str:
    """The pods' PYTHONPATH entry for ``package_set``: the folder's SITE, where pip installed."""
    return f"{package_folder(packages_dir, package_set, root)}/{SITE}"


def config_map_key(path: str) -> str:
    """A file's key in a ConfigMap: its path with ``/`` as ``.`` (keys may hold only letters,
    digits, ``-``, ``_`` and ``.``); the pods' volume maps each key back to its path."""
    return path.replace("/", ".")


def split_parts(files: Mapping[str, bytes], limit: int = CONFIG_MAP_BYTES) -> list[dict[str, bytes]]:
    """``files`` cut into ConfigMaps of at most ``limit`` content bytes each.

    A file over ``limit`` is cut into ``<name>.part-<i>`` pieces of ``limit`` bytes (the last
    shorter), which trainer/install.py joins in ``i`` order; every other file keeps its name
    as ``<name>.part-0``, so that all are joined alike. Pieces fill the ConfigMaps in name
    order, a new one starting when the next piece would pass ``limit``.

    Returns:
        One dict (piece name -> bytes) per ConfigMap; empty for no files.

    Raises:
        ValueError: ``limit`` is not positive.
    """
    if limit <= 0:
        raise ValueError(f"limit {limit}: must be a positive number of bytes")
    groups: list[dict[str, bytes]] = []
    size = 0
    for name in sorted(files):
        data = files[name]
        for index, start in enumerate(range(0, max(len(data), 1), limit)):
            piece = data[start : start + limit]
            if not groups or size + len(piece) > limit:
                groups.append({})
                size = 0
            groups[-1][f"{name}.part-{index}"] = piece
            size += len(piece)
    return groups
