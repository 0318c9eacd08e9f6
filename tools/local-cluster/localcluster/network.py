"""The host side of the pod network: the bridge, the sysctls and the pods' network namespaces.

`up` records what it found (host_state file) before it changes anything; `down` removes only
what is not in that record and puts the recorded sysctl values back.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from localcluster import layout

NETNS_DIR = Path("/var/run/netns")
#: containerd 1.6's CRI names each pod's namespace cni-<uuid> under /var/run/netns.
POD_NETNS_PREFIX = "cni-"
#: Sysctls that the CNI plugins or the kubelet may change; restored by `down`.
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/ipv4/conf/all/route_localnet")


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()}")
    return proc


def _read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def pod_netns() -> set[str]:
    """Names of the network namespaces under /var/run/netns that look like pods' (cni-*)."""
    try:
        return {e.name for e in NETNS_DIR.iterdir() if e.name.startswith(POD_NETNS_PREFIX)}
    except OSError:
        return set()


def bridge_exists() -> bool:
    return Path("/sys/class/net", layout.BRIDGE).exists()


def record_host(path: Path) -> None:
    """Writes the sysctl values and pod-like network namespaces present before `up`."""
    path.write_text(json.dumps({
        "sysctls": {name: _read_sysctl(name) for name in SYSCTLS},
        "netns": sorted(pod_netns()),
    }, indent=2))


def create_bridge() -> None:
    """The tool's bridge with the node address, up (CNI's bridge plugin reuses it)."""
    if not bridge_exists():
        _run("ip", "link", "add", layout.BRIDGE, "type", "bridge")
    _run("ip", "addr", "replace", f"{layout.BRIDGE_IP}/{layout.BRIDGE_PREFIX}", "dev", layout.BRIDGE)
    _run("ip", "link", "set", layout.BRIDGE, "up")


def teardown(host_state: Path) -> list[str]:
    """Removes the pods' leftover namespaces, the bridge and its veths, and restores sysctls.

    Returns a line for each thing it removed or restored (for `down`'s report).
    """
    done: list[str] = []
    try:
        before = json.loads(host_state.read_text())
    except (OSError, ValueError):
        before = {"sysctls": {}, "netns": []}
    for ns in sorted(pod_netns() - set(before.get("netns", []))):
        _run("ip", "netns", "delete", ns, check=False)
        done.append(f"network namespace {ns}")
    if bridge_exists():
        # Deleting the bridge leaves its veth peers in the (already gone) pod namespaces.
        _run("ip", "link", "delete", layout.BRIDGE, check=False)
        done.append(f"bridge {layout.BRIDGE}")
    for name, value in before.get("sysctls", {}).items():
        if value is not None and _read_sysctl(name) not in (None, value):
            Path("/proc/sys", name).write_text(value)
            done.append(f"sysctl {name.replace('/', '.')} = {value}")
    return done
