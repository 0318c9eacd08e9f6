"""What the host shows of the local cluster, for its own tests (test_local_cluster.py): file
modes, TLS requests to etcd and the API server, cgroups (another kubelet's pod cgroups, made
and removed here), and the NetworkPolicy agent's NFQUEUE readers and rules."""

from __future__ import annotations

import http.client
import ssl
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .kube import Kube


def file_mode(path: Path) -> int:
    """The permission bits of ``path`` itself (a link is not followed)."""
    return stat.S_IMODE(path.lstat().st_mode)


def tls_context(ca: Path, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """A client context that trusts ``ca``, presenting ``cert`` (certificate, key) if given."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def http_get(host: str, port: int, path: str, ctx: ssl.SSLContext | None) -> tuple[int, str]:
    """(status, body) of one GET; raises what the connection raises (a TLS alert, a reset)."""
    conn = (
        http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        if ctx
        else http.client.HTTPConnection(host, port, timeout=10)
    )
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def cgroup_hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies: the root alone under cgroup v2, else each v1 controller's."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.procs").exists():  # cgroup v2 only
        return [root]
    return sorted(d for d in root.iterdir() if (d / "cgroup.procs").exists())


@contextmanager
def foreign_kubepods() -> Iterator[tuple[list[Path], subprocess.Popen]]:
    """Another kubelet's pod cgroups (<hierarchy>/kubepods/besteffort/pod-foreign-test in two
    hierarchies) with a process in one; everything made here is removed here."""
    made: list[Path] = []
    leaves = []
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        for h in cgroup_hierarchies()[:2]:
            leaf = h / "kubepods" / "besteffort" / "pod-foreign-test"
            for d in (h / "kubepods", leaf.parent, leaf):
                if not d.exists():
                    d.mkdir()
                    made.append(d)
            leaves.append(leaf)
        (leaves[0] / "cgroup.procs").write_text(str(sleeper.pid))
        yield leaves, sleeper
    finally:
        sleeper.kill()
        sleeper.wait()
        for d in reversed(made):
            d.rmdir()


def nfqueue_readers(queue: int) -> list[str]:
    """The lines of /proc/net/netfilter/nfnetlink_queue for NFQUEUE ``queue`` (one per reader)."""
    lines = Path("/proc/net/netfilter/nfnetlink_queue").read_text().splitlines()
    return [line for line in lines if line.split() and line.split()[0] == str(queue)]


def agent_rules_present(kube: Kube) -> bool:
    """Whether the NetworkPolicy agent's forward rule is in (its own ``-rules-present`` check)."""
    agent = kube.kubectl_bin.parent / "network-policies"
    proc = subprocess.run([str(agent), "-rules-present"], capture_output=True, text=True, timeout=30)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode == 0
