"""Helpers for tests against the real local cluster (tools/local-cluster): run the tool, run
kubectl, create objects and wait on what the API server reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "local-cluster" / "local-cluster"
#: The tool's state and runtime directories (tools/local-cluster/localcluster/layout.py).
STATE_DIR = Path(os.environ.get("LOCAL_CLUSTER_STATE", "/var/lib/tf-mnist-local-cluster"))
RUN_DIR = Path(os.environ.get("LOCAL_CLUSTER_RUN", "/run/tf-mnist-local-cluster"))


def cluster_unavailable() -> str:
    """Why the local cluster cannot run here, or '' when it can."""
    if not sys.platform.startswith("linux"):
        return "the local cluster needs Linux"
    if os.geteuid() != 0:
        return "the local cluster needs root (containerd, a kubelet, a bridge)"
    return ""


def run_tool(
    *args: str, timeout: float = 3600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Runs ``local-cluster ARGS`` (``env``: extra environment variables); its stderr
    (progress) is kept for the failure message."""
    return subprocess.run(
        [str(TOOL), *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def binaries_dir() -> Path:
    """The cluster's bin dir (kubectl, ...): what tools/local-cluster/build.sh prints last."""
    proc = subprocess.run(
        ["bash", str(REPO / "tools" / "local-cluster" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, f"build.sh failed:\n{proc.stderr[-3000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass
class Kube:
    """kubectl against one cluster (its kubeconfig) and one namespace."""

    kubectl_bin: Path
    kubeconfig: Path
    namespace: str = "default"
    #: host_sysctls() before the cluster came up
    host_before: dict | None = None
    #: host_netns() before the cluster came up
    netns_before: set[str] | None = None

    def run(
        self, *args: str, input_: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(self.kubectl_bin), f"--kubeconfig={self.kubeconfig}", "-n", self.namespace, *args],
            input=input_,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr}"
        return proc

    def apply(self, *objects: dict) -> None:
        self.run(
            "apply",
            "-f",
            "-",
            input_=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
        )

    def get(self, kind: str, name: str = "") -> dict[str, Any]:
        return json.loads(self.run("get", kind, *([name] if name else []), "-o", "json").stdout)

    def logs(self, what: str, *args: str) -> str:
        return self.run("logs", what, *args).stdout

    def wait_for(
        self, what: str, predicate: Callable[[], Any], timeout: float = 180, every: float = 1.0
    ) -> Any:
        """Polls ``predicate`` every ``every`` s until it returns a truthy value; fails naming
        ``what`` after ``timeout`` s. A poll is usually a kubectl process (a program's start, a
        TLS handshake, a request the API server answers), CPU that a 2-core CI shares with the
        run it waits for: the default polls once a second, and a wait for a state that passes
        in under a second says so with a shorter ``every``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(every)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def pod_phase(kube: Kube, name: str) -> str:
    proc = kube.run("get", "pod", name, "-o", "jsonpath={.status.phase}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def job_pods(kube: Kube, job: str) -> list[dict]:
    """The pods of Job ``job`` (label job-name), as ``kubectl get pods`` lists them."""
    return [p for p in kube.get("pods")["items"] if p["metadata"]["labels"].get("job-name") == job]


def job_condition(kube: Kube, name: str) -> str | None:
    """'Complete' or 'Failed' once the Job has that condition True, else None."""
    status = kube.get("job", name).get("status", {})
    for cond in status.get("conditions", []):
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return cond["type"]
    return None


#: What the CNI plugins or the kubelet could change on the host.
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/ipv4/conf/all/route_localnet")


def host_sysctls() -> dict[str, str]:
    return {
        name: Path("/proc/sys", name).read_text().strip()
        for name in SYSCTLS
        if Path("/proc/sys", name).exists()
    }


def host_netns() -> set[str]:
    """The names `ip netns list` shows (the host's named network namespaces)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def processes_mentioning(*fragments: str) -> list[str]:
    """'pid cmdline' of every live (non-zombie) process whose command line holds a fragment."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(f in cmdline for f in fragments):
            found.append(f"{entry.name} {cmdline.strip()}")
    return found
