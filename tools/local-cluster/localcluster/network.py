"""The host side of the pod network: the bridge and the sysctls.

`up` records the sysctl values it found (host_state file) before it changes anything; `down`
removes the tool's bridge and puts the recorded values back. The pods' network namespaces are
not here: containerd mounts them under its state directory in the tool's run directory
(config_files.containerd_config), so `down` unmounts them with the rest of that directory and
never touches /var/run/netns, where other runtimes keep theirs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from localcluster import layout

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


def bridge_exists() -> bool:
    return Path("/sys/class/net", layout.BRIDGE).exists()


def record_host(path: Path) -> None:
    """Writes the sysctl values present before `up`."""
    path.write_text(json.dumps({"sysctls": {name: _read_sysctl(name) for name in SYSCTLS}}, indent=2))


def create_bridge() -> None:
    """The tool's bridge with the node address, up (CNI's bridge plugin reuses it)."""
    if not bridge_exists():
        _run("ip", "link", "add", layout.BRIDGE, "type", "bridge")
    _run("ip", "addr", "replace", f"{layout.BRIDGE_IP}/{layout.BRIDGE_PREFIX}", "dev", layout.BRIDGE)
    _run("ip", "link", "set", layout.BRIDGE, "up")


def enable_bridge_netfilter() -> None:
    """Bridged IPv4 packets pass netfilter's hooks (br_netfilter), where the NetworkPolicy agent
    sees pod-to-pod connections; `down` puts the recorded value back."""
    path = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    if not path.exists():
        raise RuntimeError(
            "net.bridge.bridge-nf-call-iptables is missing: this kernel has no br_netfilter, "
            "which the NetworkPolicy agent needs to see pod-to-pod traffic on the bridge"
        )
    path.write_text("1")


def teardown(host_state: Path) -> list[str]:
    """Removes the bridge and its veths, and restores the sysctls `up` recorded.

    Returns a line for each thing it removed or restored (for `down`'s report).
    """
    done: list[str] = []
    try:
        before = json.loads(host_state.read_text())
    except (OSError, ValueError):
        before = {"sysctls": {}}
    if bridge_exists():
        # Deleting the bridge leaves its veth peers in the (already gone) pod namespaces.
        _run("ip", "link", "delete", layout.BRIDGE, check=False)
        done.append(f"bridge {layout.BRIDGE}")
    for name, value in before.get("sysctls", {}).items():
        if value is not None and _read_sysctl(name) not in (None, value):
            Path("/proc/sys", name).write_text(value)
            done.append(f"sysctl {name.replace('/', '.')} = {value}")
    return done
