"""The one local cluster a pytest session's cluster tests share (tests/cluster/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kube import Kube, binaries_dir, host_netns, host_sysctls, run_tool


class SessionCluster:
    """The session's one local cluster: up on first use, up again when a test took it down.

    ``local-cluster status`` exits 3 when no cluster runs (tools/local-cluster/local-cluster).
    """

    def __init__(self) -> None:
        self.kube: Kube | None = None

    def get(self) -> Kube:
        """The running cluster, brought up (images built and imported) when none runs.

        Raises:
            pytest.fail.Exception: a cluster this session did not start is running, or ``up`` or
                ``images`` failed (their stderr's end in the message).
        """
        running = run_tool("status").returncode != 3
        if running and self.kube is not None:
            return self.kube
        if running:
            pytest.fail(
                "a local cluster is already running; these tests start and stop their own: "
                "run tools/local-cluster/local-cluster down first"
            )
        bins = binaries_dir()
        before, netns_before = host_sysctls(), host_netns()
        up = run_tool("up")
        if up.returncode != 0:
            run_tool("down")
            pytest.fail(f"local-cluster up failed:\n{up.stderr[-4000:]}")
        self.kube = Kube(
            bins / "kubectl",
            Path(up.stdout.strip().splitlines()[-1]),
            host_before=before,
            netns_before=netns_before,
        )
        images = run_tool("images")
        if images.returncode != 0:
            self.down()
            pytest.fail(f"local-cluster images failed:\n{images.stderr[-4000:]}")
        return self.kube

    def down(self) -> None:
        """Takes the cluster down (a no-op when none runs)."""
        if self.kube is not None or run_tool("status").returncode != 3:
            run_tool("down")
        self.kube = None
