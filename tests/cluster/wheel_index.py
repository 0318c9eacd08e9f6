"""The wheel index the base-image cluster tests serve to the setup Job: the wheels that
infra/bundle.py's requirement files pin, downloaded with their hashes into the local cluster's
cache and laid out as a PEP 503 index.

    python -m tests.cluster.wheel_index      (tools/test-pipeline runs it beside the builds)

downloads the sets the cluster tests will ask for (``cpu`` and ``tensorboard``; ``gpu`` too
with ``TF_MNIST_GPU_WHEELS=1``), so that the download is off the cluster tests' own time. The
tests call :func:`download_wheels` all the same: with the files there, pip checks their hashes
and downloads nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra import bundle

REPO = Path(__file__).resolve().parents[2]
WHEELS = (
    Path(os.environ.get("LOCAL_CLUSTER_CACHE", Path.home() / ".cache" / "tf-mnist-local-cluster")) / "wheels"
)
#: pip download's --platform options for the wheels pip in the base image picks: Debian 12's
#: glibc 2.36 takes manylinux_2_36 down to manylinux_2_17 (manylinux2014). pip names no older
#: tag for a newer one by itself, and the requirement files pin one hash per package, the
#: wheel a pod installs (tensorboard-data-server's manylinux_2_31 one, not its py3-none-any).
POD_PLATFORMS = tuple(
    option
    for tag in (*(f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)), "manylinux2014_x86_64")
    for option in ("--platform", tag)
)


def wanted_sets() -> tuple[str, ...]:
    """The package sets the cluster tests install: cpu and tensorboard, gpu when asked for."""
    return ("cpu", "tensorboard", *(("gpu",) if os.environ.get("TF_MNIST_GPU_WHEELS") else ()))


def download_wheels(sets: tuple[str, ...]) -> Path:
    """The pinned wheels of ``sets`` in WHEELS (pip download with the hashes: the same files the
    pods' pip checks), laid out as a PEP 503 index under WHEELS/simple.

    Raises:
        subprocess.CalledProcessError: pip could not download a wheel or its hash did not match.
    """
    WHEELS.mkdir(parents=True, exist_ok=True)
    for name in sets:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--require-hashes", "--no-deps", "--only-binary", ":all:",
             "--python-version", "3.11", *POD_PLATFORMS, "--implementation", "cp",
             "-d", str(WHEELS / "files"), "-r", str(REPO / bundle.PACKAGE_FILES[name])],
            check=True, timeout=3600, env={**os.environ, "PIP_FIND_LINKS": ""},
        )  # fmt: skip
    index = WHEELS / "simple"
    for wheel in (WHEELS / "files").glob("*.whl"):
        project = wheel.name.split("-")[0].replace("_", "-").replace(".", "-").lower()
        page = index / project
        page.mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../files/{w.name}">{w.name}</a>\n' for w in sorted(
            (WHEELS / "files").glob(f"{wheel.name.split('-')[0]}-*.whl")))  # fmt: skip
        (page / "index.html").write_text(links)
    return WHEELS


if __name__ == "__main__":
    print(download_wheels(wanted_sets()))
