"""Fixtures for the real-engine preview tests (marker ``engine``).

The toolchain comes from PATH, as scripts/test.sh puts it there (``tools/pulumi-toolchain/pulumi-toolchain.sh``
prints the directory). Missing binaries skip these tests with the reason, except when
``REQUIRE_PULUMI_ENGINE=1`` (scripts/test.sh, CI): then they fail. A binary the toolchain
script recorded as BLOCKED (the Go module proxy refused its module) skips only the tests that
need it, with the recorded refusal as the reason: nothing here can build it. The exception is
pulumi-resource-alicloud where its vendored sources are beside the checkout
(``../shared/vendor/alicloud-provider``, or ``$ALICLOUD_PROVIDER_VENDOR_DIR``): the toolchain
builds it from them, so it is expected like any other binary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .engine import PulumiProject, Toolchain, alicloud_vendor_dir, find_toolchain, install_plugins

REPO = Path(__file__).resolve().parents[2]

#: What a copy of the project needs to run: the program, the packages it imports, its config,
#: and docker/'s requirement files (the setup Job of a stack without images of its own).
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.dev.yaml", "infra", "trainer", "docker")


def _require_engine() -> bool:
    return os.environ.get("REQUIRE_PULUMI_ENGINE") == "1"


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    """The toolchain on PATH; skip or fail (REQUIRE_PULUMI_ENGINE=1) when a binary is missing."""
    found = find_toolchain()
    unexplained = [name for name in found.missing if name not in found.blocked]
    if unexplained:
        message = (
            f"Pulumi engine binaries not found on PATH: {', '.join(unexplained)} "
            "(run `bash tools/pulumi-toolchain/pulumi-toolchain.sh` and put the directory it prints on PATH)"
        )
        if _require_engine():
            pytest.fail(message + "; REQUIRE_PULUMI_ENGINE=1")
        pytest.skip(message)
    return found


def require_binary(toolchain: Toolchain, name: str) -> None:
    """Skip a test that needs ``name`` when the toolchain recorded it as blocked; where the
    alicloud provider's vendored sources exist, its absence fails (REQUIRE_PULUMI_ENGINE=1) or
    skips with the fix instead."""
    if toolchain.has(name):
        return
    vendor = alicloud_vendor_dir(REPO) if name == "pulumi-resource-alicloud" else None
    if vendor is not None:
        message = (
            f"{name} is not in the toolchain ({toolchain.bin_dir}) although its vendored sources are in "
            f"{vendor}: run `bash tools/pulumi-toolchain/pulumi-toolchain.sh`, which builds it from them"
        )
        if _require_engine():
            pytest.fail(message + "; REQUIRE_PULUMI_ENGINE=1")
        pytest.skip(message)
    pytest.skip(toolchain.blocked.get(name, f"{name} is missing"))


@pytest.fixture(scope="session")
def pulumi_home(toolchain: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private PULUMI_HOME with the toolchain's provider plugins installed (no download)."""
    home = tmp_path_factory.mktemp("pulumi-home")
    providers = [name for name in ("kubernetes", "alicloud") if toolchain.has(f"pulumi-resource-{name}")]
    install_plugins(toolchain, home, providers)
    return home


@pytest.fixture
def dev_project(toolchain: Toolchain, pulumi_home: Path, tmp_path: Path) -> Iterator[PulumiProject]:
    """A copy of this repository's project with the dev stack created in a local file backend."""
    missing = [name for name in PROJECT_FILES if not (REPO / name).exists()]
    if missing:
        pytest.fail(f"the Pulumi project is incomplete: {', '.join(missing)} not found in {REPO}")
    committed = (REPO / "Pulumi.dev.yaml").read_bytes()
    project = PulumiProject(
        REPO, tmp_path, toolchain, include=PROJECT_FILES, pulumi_home=pulumi_home, venv=REPO / ".venv"
    )
    project.init_stack("dev")
    yield project
    assert (REPO / "Pulumi.dev.yaml").read_bytes() == committed, "a test edited the committed Pulumi.dev.yaml"
