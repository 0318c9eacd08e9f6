"""tools/pulumi-toolchain/pulumi-offline-env.sh with the real Pulumi CLI: the provider plugins
it installs into PULUMI_HOME, again over an install that was killed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]


def _source_and_list_plugins(home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PULUMI_HOME": str(home), "PULUMI_BACKEND_URL": f"file://{tmp_path}"}
    return subprocess.run(
        ["bash", "-c", "source tools/pulumi-toolchain/pulumi-offline-env.sh && pulumi plugin ls"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )


def test_a_killed_plugin_install_is_installed_again(toolchain, tmp_path):
    # What a `pulumi plugin install` killed mid-copy leaves: an empty directory and its marker.
    plugins = tmp_path / "home" / "plugins"
    killed = plugins / "resource-kubernetes-v4.25.0"
    killed.mkdir(parents=True)
    (plugins / "resource-kubernetes-v4.25.0.partial").touch()
    proc = _source_and_list_plugins(tmp_path / "home", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (killed / "pulumi-resource-kubernetes").stat().st_size > 1_000_000
    assert not (plugins / "resource-kubernetes-v4.25.0.partial").exists()
    listed = [line.split()[:3] for line in proc.stdout.splitlines() if line.strip()]
    assert ["kubernetes", "resource", "4.25.0"] in listed, proc.stdout
