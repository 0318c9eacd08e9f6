"""`up`, `down` and `status` of the single-node cluster (one run at a time per state dir)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localcluster import cgroups, components, config_files, dirs, layout, network, pki
from localcluster.layout import Paths
from localcluster.processes import Daemon, pids_with_cmdline, stop_pid

TOOL = "local-cluster"
#: Debian packages the node needs, by the file each one provides.
PACKAGES = {
    "/usr/bin/containerd": "containerd",
    "/usr/bin/ctr": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/usr/lib/cni/host-local": "containernetworking-plugins",
    "/usr/lib/cni/loopback": "containernetworking-plugins",
    "/usr/bin/openssl": "openssl",
    "/usr/sbin/ip": "iproute2",
    "/usr/sbin/iptables": "iptables",
    "/usr/sbin/conntrack": "conntrack",
    "/usr/bin/socat": "socat",
    "/usr/sbin/ethtool": "ethtool",
    "/usr/bin/buildah": "buildah",
    "/usr/sbin/debootstrap": "debootstrap",
}
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubectl",
    "coredns",
    "crictl",
    "network-policies",
)


class ClusterError(RuntimeError):
    """A failure worth one clear message: which part, what happened, what to do."""


def say(msg: str) -> None:
    print(f"[{TOOL}] {msg}", file=sys.stderr, flush=True)


def daemons(p: Paths) -> dict[str, Daemon]:
    return {name: Daemon(name, p.pids, p.logs) for name in components.NAMES}


def checked_paths(*, claim: bool) -> Paths:
    """The cluster's directories once they are known to be the tool's own (dirs.py).

    ``claim`` (for `up`): a new or empty directory is taken (0700, marker written). Otherwise
    (`down`, `status`, `images`) a directory that exists must already carry the marker.
    Raises dirs.DirectoryError, with the fix, before anything is read, signalled or removed.
    """
    p = layout.paths()
    dirs.check_paths(p.state, p.run)
    both = ((p.state, "state"), (p.run, "run"))
    for d, role in both:
        if claim:
            dirs.check_claimable(d, role)  # both first: a refusal leaves no new directory behind
        else:
            dirs.owned(d, role)
    if claim:
        for d, role in both:
            dirs.claim(d, role)
    return p


@contextmanager
def locked(p: Paths) -> Iterator[None]:
    """One `up`/`down` at a time per state directory; a second one waits for the first.
    Without a state directory there is nothing to guard (and nothing is created)."""
    if not p.state.is_dir():
        yield
        return
    with open(p.lock, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another {TOOL} command holds {p.lock}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


# ---------------------------------------------------------------- preflight
def ensure_packages() -> None:
    """Installs the Debian packages the node needs when any is missing (apt-get, as root)."""
    missing = sorted({pkg for path, pkg in PACKAGES.items() if not os.path.exists(path)})
    if not missing:
        return
    say(f"installing Debian packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise ClusterError(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}): "
                f"{proc.stderr.strip()[-600:]}\n  fix: install {' '.join(missing)} by hand"
            )


def bin_dir(p: Paths) -> Path:
    """The directory with the Kubernetes, etcd, CoreDNS and crictl binaries: $LOCAL_CLUSTER_BIN,
    else what tools/local-cluster/build.sh prints last (it builds whatever is missing)."""
    if os.environ.get("LOCAL_CLUSTER_BIN"):
        d = Path(os.environ["LOCAL_CLUSTER_BIN"])
    else:
        proc = subprocess.run(["bash", str(layout.TOOL_DIR / "build.sh")], stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise ClusterError(
                f"building the cluster's binaries failed (exit {proc.returncode}); "
                f"the messages above name the module; logs in {p.cache / 'logs'}"
            )
        d = Path(proc.stdout.strip().splitlines()[-1])
    missing = [b for b in BINARIES if not os.access(d / b, os.X_OK)]
    if missing:
        raise ClusterError(f"{d} lacks {', '.join(missing)}: run `bash {layout.TOOL_DIR / 'build.sh'}`")
    return d


def _port_owner(port: int) -> str:
    proc = subprocess.run(["ss", "-Hltnup", f"sport = :{port}"], capture_output=True, text=True)
    return proc.stdout.strip().split("users:")[-1] if proc.stdout.strip() else "unknown process"


def check_ports() -> None:
    """Fails naming every component whose address is taken, and by whom."""
    taken = []
    for e in layout.ENDPOINTS:
        kind = socket.SOCK_DGRAM if e.purpose == "dns" else socket.SOCK_STREAM
        if e.host == layout.BRIDGE_IP and not network.bridge_exists():
            host = "0.0.0.0"  # the bridge address does not exist yet: any holder of the port blocks it
        else:
            host = e.host
        with socket.socket(socket.AF_INET, kind) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, e.port))
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    raise
                taken.append(
                    f"  {e.component} needs {e.host}:{e.port} ({e.purpose}), in use by {_port_owner(e.port)}"
                )
    if taken:
        raise ClusterError(
            "cannot start: ports in use\n"
            + "\n".join(taken)
            + "\n  fix: stop those processes (or an old cluster: "
            f"`tools/local-cluster/{TOOL} down`), then run up again"
        )


# ---------------------------------------------------------------- up
def _write_configs(p: Paths) -> None:
    """Keys, certificates and kubeconfigs (0600 in 0700 directories), then the config files."""
    dirs.private_dir(p.etc)
    pki.make_pki(p.pki)
    for client in pki.CLIENTS:
        pki.write_kubeconfig(components.kubeconfig_path(p, client), p.pki, client, components.APISERVER_URL)
    pki.write_kubeconfig(p.kubeconfig, p.pki, "admin", components.APISERVER_URL)
    # The kubelet writes its serving key into --cert-dir and would make both directories 0755.
    dirs.private_dir(p.kubelet_root / "pki")
    dirs.private_dir(p.kubelet_root)
    (p.etc / "containerd.toml").write_text(config_files.containerd_config(p, SANDBOX_IMAGE))
    p.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    (p.cni_conf_dir / "10-tf-mnist.conflist").write_text(config_files.cni_config(p))
    (p.etc / "Corefile").write_text(config_files.corefile(p))
    (p.etc / "kubelet.json").write_text(config_files.kubelet_config(p))
    # Search domains only; the nameserver is the cluster DNS the kubelet adds.
    (p.etc / "pod-resolv.conf").write_text("")


#: The pod sandbox image, built from tools/local-cluster/pause by images.sh.
SANDBOX_IMAGE = "localhost/tf-mnist/pause:3.10"


def kubectl(p: Paths, bins: Path, *args: str, input_: str | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(
        [str(bins / "kubectl"), f"--kubeconfig={p.kubeconfig}", *args],
        input=input_,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _wait(what: str, ok, timeout: float, daemon: Daemon | None = None) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if daemon is not None and not daemon.running():
            raise ClusterError(
                f"{what} exited during start-up; its log {daemon.log_file} ends with:\n{daemon.log_tail()}"
            )
        if ok():
            return time.monotonic() - start
        time.sleep(0.2)
    tail = f"; its log {daemon.log_file} ends with:\n{daemon.log_tail()}" if daemon else ""
    raise ClusterError(f"{what} was not ready within {timeout:.0f} s{tail}")


def node_ready(p: Paths, bins: Path) -> bool:
    """The node is Ready and schedulable: the node-lifecycle controller has also removed the
    node.kubernetes.io/not-ready taint (a second or so after Ready), so pods created right
    after `up` are not held Pending."""
    try:
        out = kubectl(p, bins, "get", "node", layout.NODE_NAME, "-o", "json", timeout=10)
    except (ClusterError, subprocess.TimeoutExpired, OSError):
        return False
    node = json.loads(out)
    ready = any(
        c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
    )
    taints = [t["key"] for t in node.get("spec", {}).get("taints", [])]
    return ready and "node.kubernetes.io/not-ready" not in taints


def import_images(p: Paths) -> None:
    """Imports every image images.sh has built, building the pod sandbox (pause) image first
    when it is missing: no pod starts without it."""
    script = str(layout.TOOL_DIR / "images.sh")
    for argv in (
        ["bash", script, "build", "pause"],
        ["bash", script, "import", "--address", str(p.containerd_socket), "--skip-missing"],
    ):
        if subprocess.run(argv).returncode != 0:
            raise ClusterError(f"`{' '.join(argv[1:])}` failed; see the messages above")


def up() -> int:
    """Starts every component (see components.ALL), prints the kubeconfig path last."""
    p = checked_paths(claim=True)
    with locked(p):
        ds = daemons(p)
        running = [n for n, d in ds.items() if d.running()]
        if running and len(running) == len(ds):
            say("already up: nothing to do")
            print(p.kubeconfig)
            return 0
        if running:
            raise ClusterError(
                f"partly up ({', '.join(running)} running, "
                f"{', '.join(n for n in ds if n not in running)} not): "
                f"run `tools/local-cluster/{TOOL} down`, then up"
            )
        t0 = time.monotonic()
        ensure_packages()
        bins = bin_dir(p)
        check_ports()
        _clear_state(p)
        p.logs.mkdir(parents=True, exist_ok=True)
        for f in p.logs.glob("*.log"):
            f.unlink()
        network.record_host(p.host_state)
        # Before the bridge and the cgroup root exist: a `down` of this state may then remove them.
        p.shared_names.write_text(json.dumps({"cgroup_root": layout.CGROUP_ROOT, "bridge": layout.BRIDGE}))
        try:
            _write_configs(p)
            network.create_bridge()
            network.enable_bridge_netfilter()
            cgroups.create_roots()
            for make in components.ALL:
                c = make(p, bins)
                d = ds[c.name]
                d.start(c.argv)
                took = _wait(c.name, c.healthy, c.start_timeout, d)
                say(f"{c.name} ready in {took:.1f} s (pid {d.pid()}, log {d.log_file})")
                if c.name == "kube-apiserver":
                    kubectl(p, bins, "apply", "-f", "-", input_=config_files.COREDNS_RBAC)
                    kubectl(p, bins, "apply", "-f", "-", input_=config_files.NETWORK_POLICIES_RBAC)
                if c.name == "containerd":
                    import_images(p)
            took = _wait(
                f"node {layout.NODE_NAME} Ready and schedulable",
                lambda: node_ready(p, bins),
                90,
                ds["kubelet"],
            )
            say(f"node {layout.NODE_NAME} Ready and schedulable in {took:.1f} s")
        except BaseException as err:
            say(
                f"up failed: {err}" if isinstance(err, ClusterError) else f"up interrupted or failed: {err!r}"
            )
            say("stopping what was started")
            _down(p, quiet=True)
            raise
        say(f"cluster up in {time.monotonic() - t0:.1f} s; use it with:")
        say(f"  export KUBECONFIG={p.kubeconfig} PATH={bins}:$PATH")
        print(p.kubeconfig)
        return 0


# ---------------------------------------------------------------- down
def _mounts_under(*roots: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if any(mount_point == str(r) or mount_point.startswith(str(r) + "/") for r in roots):
            found.append(mount_point)
    return sorted(set(found), key=len, reverse=True)


def _remove_pods(p: Paths, bins: Path | None) -> list[str]:
    done = []
    sock = str(p.containerd_socket)
    crictl = bins / "crictl" if bins else None
    if crictl and crictl.exists() and p.containerd_socket.exists():
        proc = subprocess.run(
            [str(crictl), f"--runtime-endpoint=unix://{sock}", "rmp", "--all", "--force"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        removed = [line for line in proc.stdout.splitlines() if line.startswith("Removed sandbox")]
        if removed:
            done.append(f"{len(removed)} pod sandbox(es)")
    return done


def _down(p: Paths, quiet: bool = False) -> list[str]:
    done: list[str] = []
    ds = daemons(p)
    bins = _cached_bin(p)
    # The kubelet first, so that it does not restart the containers removed below.
    if ds["kubelet"].stop():
        done.append("kubelet")
    if ds["containerd"].running():
        done += _remove_pods(p, bins)
    if ds["containerd"].stop():
        done.append("containerd")
    for pid in pids_with_cmdline(f"-address {p.containerd_socket}"):
        stop_pid(pid, 5)
        done.append(f"containerd-shim pid {pid}")
    # The cgroup root, the bridge and the nftables table have machine-wide names: only a state
    # whose `up` made them (its record) may remove them; else they are another cluster's.
    shared = _shared_names(p)
    for pid in cgroups.own_processes(root=shared["cgroup_root"]) if shared else []:
        stop_pid(pid, 2)
        done.append(f"container process pid {pid}")
    for name in (
        "network-policies",
        "coredns",
        "kube-scheduler",
        "kube-controller-manager",
        "apiserver-relay",
        "kube-apiserver",
        "etcd",
    ):
        if ds[name].stop():
            done.append(name)
    if shared and bins is not None and (bins / "network-policies").exists():
        # Its own SIGTERM handler removes its nftables table; this covers an agent that was killed.
        subprocess.run([str(bins / "network-policies"), "-remove-rules"], capture_output=True, timeout=30)
    for mount_point in _mounts_under(p.state, p.run):
        subprocess.run(["umount", "-l", mount_point], capture_output=True)
        done.append(f"mount {mount_point}")
    if shared:
        left_cgroups = cgroups.remove_own(root=shared["cgroup_root"])
        if left_cgroups:
            done.append(f"WARNING: cgroups still holding processes: {', '.join(map(str, left_cgroups))}")
        done += network.teardown(p.host_state)
    elif not quiet:
        say(f"down: the cgroup root and bridge {layout.BRIDGE} are not this state's: left alone")
    _clear_state(p)
    if dirs.owned(p.run, "run"):
        shutil.rmtree(p.run, ignore_errors=True)
    left = pids_with_cmdline(str(p.state)) + pids_with_cmdline(str(p.run))
    if left:
        done.append(f"WARNING: processes still running: {left}")
    if not quiet:
        for line in done:
            say(f"removed {line}")
    return done


def _shared_names(p: Paths) -> dict[str, str] | None:
    """The machine-wide names this state's `up` took (Paths.shared_names), or None (none held)."""
    try:
        record = json.loads(p.shared_names.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("cgroup_root") else None


def _cached_bin(p: Paths) -> Path | None:
    """The binaries `up` used, without building anything: $LOCAL_CLUSTER_BIN, else the cache's
    bin dir if it exists (down and status must work while a build is impossible)."""
    if os.environ.get("LOCAL_CLUSTER_BIN"):
        return Path(os.environ["LOCAL_CLUSTER_BIN"])
    d = p.cache / "bin"
    return d if d.is_dir() else None


def _clear_state(p: Paths) -> None:
    """Empties the state directory but the logs, the image store, the lock and the marker.
    Raises dirs.DirectoryError (removing nothing) when the directory is not the tool's."""
    if not dirs.owned(p.state, "state"):
        return
    keep = {p.logs.name, p.containerd_root.name, p.lock.name, dirs.MARKER}
    for entry in p.state.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def down() -> int:
    """Stops every component by pid and removes pods, namespaces, the bridge and mounts.

    The cgroup root, the bridge and its nftables table have machine-wide names, so they belong
    to whichever cluster is up (one started with other LOCAL_CLUSTER_STATE and
    LOCAL_CLUSTER_RUN, perhaps): they are removed only while this state's record of its `up`
    exists (Paths.shared_names), which `down` then removes; a second `down`, or one of a state
    that never came up, leaves them alone. With neither the state nor the run directory
    present nothing is touched at all."""
    p = checked_paths(claim=False)
    if not p.state.exists() and not p.run.exists():
        say(f"down: nothing was running ({p.state} and {p.run} do not exist)")
        return 0
    with locked(p):
        done = _down(p)
        say("down: nothing was running" if not done else "down: done")
    return 0


# ---------------------------------------------------------------- status
def status() -> int:
    """Prints each component's pid and health and the node's readiness.

    Exit status: 0 all healthy, 1 partly up or unhealthy, 3 down.
    """
    p = checked_paths(claim=False)
    ds = daemons(p)
    healthy = 0
    rows = []
    for make in components.ALL:
        c = make(p, _cached_bin(p) or p.cache / "bin")
        d = ds[c.name]
        pid = d.pid()
        ok = pid is not None and c.healthy()
        healthy += ok
        rows.append(
            f"{c.name:<24} {'pid ' + str(pid) if pid else 'not running':<14} "
            f"{'healthy' if ok else ('UNHEALTHY' if pid else '-')}"
        )
    print("\n".join(rows))
    if healthy == 0 and not any(d.running() for d in ds.values()):
        print("cluster: down")
        return 3
    bins = _cached_bin(p)
    ready = bins is not None and node_ready(p, bins)
    print(f"node {layout.NODE_NAME}: {'Ready' if ready else 'not Ready'}")
    print(f"kubeconfig: {p.kubeconfig}")
    return 0 if healthy == len(ds) and ready else 1


# ---------------------------------------------------------------- images
def images() -> int:
    """Builds the project's images (images.sh build) and imports them when the cluster is up."""
    p = checked_paths(claim=False)
    ensure_packages()
    proc = subprocess.run(["bash", str(layout.TOOL_DIR / "images.sh"), "build"])
    if proc.returncode != 0:
        raise ClusterError("building the images failed; see the messages above")
    if Daemon("containerd", p.pids, p.logs).running():
        proc = subprocess.run(
            ["bash", str(layout.TOOL_DIR / "images.sh"), "import", "--address", str(p.containerd_socket)]
        )
        if proc.returncode != 0:
            raise ClusterError("importing the images into containerd failed; see the messages above")
    else:
        say("cluster is down: the images are built; `up` imports them")
    return 0


def kubeconfig_path() -> int:
    print(layout.paths().kubeconfig)
    return 0
