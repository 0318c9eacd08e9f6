"""How ``infra.status`` reads the cluster: the ``Cluster`` it needs, and kubectl providing it."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Protocol


class StatusError(RuntimeError):
    """The run cannot be read: the message says what and how to fix it."""


class Cluster(Protocol):
    """What the status view reads from Kubernetes (kubectl, or recorded objects in tests)."""

    def get(self, kinds: str, selector: str) -> list[dict]:
        """The objects of ``kinds`` (e.g. "jobs,pods,pvc") matching the label ``selector``."""

    def events(self) -> list[dict]:
        """The namespace's Warning events (``kubectl get events --field-selector type=Warning``)."""

    def nodes(self) -> list[dict]:
        """The cluster's nodes (``kubectl get nodes``; [] when they cannot be listed)."""

    def logs(self, pod: str) -> str:
        """The whole log of ``pod``'s container ("" when it has none yet)."""


class Kubectl:
    """``kubectl --kubeconfig K --namespace NS ...``."""

    def __init__(
        self, kubeconfig: str | None, namespace: str, kubectl: str = "kubectl", timeout_s: float = 30.0
    ) -> None:
        path = shutil.which(kubectl)
        if path is None:
            raise StatusError(f"{kubectl} not found on PATH: install kubectl or pass --kubectl")
        self.base = [path, *(["--kubeconfig", kubeconfig] if kubeconfig else []), "--namespace", namespace]
        self.timeout_s = timeout_s

    def _run(self, *args: str) -> str:
        try:
            proc = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise StatusError(f"kubectl {' '.join(args)}: no answer in {self.timeout_s:g}s") from None
        if proc.returncode != 0:
            raise StatusError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def get(self, kinds: str, selector: str) -> list[dict]:
        return json.loads(self._run("get", kinds, "--selector", selector, "--output", "json"))["items"]

    def events(self) -> list[dict]:
        try:
            return json.loads(
                self._run("get", "events", "--field-selector", "type=Warning", "--output", "json")
            )["items"]
        except StatusError:  # a user who may read the run but not events still gets the rest
            return []

    def nodes(self) -> list[dict]:
        try:
            return json.loads(self._run("get", "nodes", "--output", "json"))["items"]
        except StatusError:  # a user who may read the run but not the nodes: no instance types
            return []

    def logs(self, pod: str) -> str:
        try:
            return self._run("logs", pod)
        except StatusError:  # a pod still pulling its image, or gone
            return ""

    def exec(self, target: str, argv: list[str]) -> str:
        """``kubectl exec TARGET -- ARGV...``: its standard output."""
        return self._run("exec", target, "--", *argv)
