"""The cluster's own cgroup subtree: made before the kubelet starts, emptied and removed by `down`.

The kubelet is told ``cgroupRoot: /tf-mnist-local-cluster`` (config_files.kubelet_config), so
every pod and container cgroup is ``<hierarchy>/tf-mnist-local-cluster/kubepods/...`` in each
cgroup hierarchy mounted under /sys/fs/cgroup (this machine has one per v1 controller plus a
cgroup2 mount). Nothing here reads or removes any other cgroup: another kubelet's
``<hierarchy>/kubepods`` is not ours.
"""

from __future__ import annotations

from pathlib import Path

from localcluster import layout


def hierarchies(cgroup_fs: Path = layout.CGROUP_FS) -> list[Path]:
    """The mounted cgroup hierarchies: directories under ``cgroup_fs`` holding cgroup.procs."""
    try:
        return sorted(d for d in cgroup_fs.iterdir() if (d / "cgroup.procs").exists())
    except OSError:
        return []


def roots(cgroup_fs: Path = layout.CGROUP_FS, root: str | None = None) -> list[Path]:
    """The tool's cgroup root (``root``, default layout.CGROUP_ROOT) in each hierarchy,
    whether it exists or not."""
    return [h / (root or layout.CGROUP_ROOT).lstrip("/") for h in hierarchies(cgroup_fs)]


def create_roots(cgroup_fs: Path = layout.CGROUP_FS) -> None:
    """Makes the tool's cgroup root in every hierarchy: the kubelet refuses a cgroupRoot that
    is missing from any controller it uses."""
    for r in roots(cgroup_fs):
        r.mkdir(parents=True, exist_ok=True)  # parents: under LOCAL_CLUSTER_CGROUP_PARENT


def in_own_cgroup(proc_cgroup: str, root: str | None = None) -> bool:
    """True when a /proc/<pid>/cgroup text puts the process inside the tool's cgroup root
    (``root``, default layout.CGROUP_ROOT) in any hierarchy (lines ``<id>:<controllers>:<path>``)."""
    root = root or layout.CGROUP_ROOT
    for line in proc_cgroup.splitlines():
        path = line.split(":", 2)[-1]
        if path == root or path.startswith(root + "/"):
            return True
    return False


def own_processes(proc: Path = Path("/proc"), root: str | None = None) -> list[int]:
    """Pids of the processes inside the tool's cgroup root (containers the runtime left)."""
    pids = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                if in_own_cgroup((entry / "cgroup").read_text(), root):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def remove_own(cgroup_fs: Path = layout.CGROUP_FS, root: str | None = None) -> list[Path]:
    """Removes the tool's cgroup subtree in every hierarchy, deepest first (a cgroup is
    removed with rmdir once it has no process and no child). Returns what could not be
    removed (still holding a process)."""
    found: list[Path] = []
    for r in roots(cgroup_fs, root):
        if r.is_dir():
            found.extend(d for d in r.rglob("*") if d.is_dir())
            found.append(r)
    left = []
    for cg in sorted(found, key=lambda d: len(d.parts), reverse=True):
        try:
            cg.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            left.append(cg)
    return left
