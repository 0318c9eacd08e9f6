"""Which directories the tool may fill and empty: only those it made itself.

`down` removes the run directory and most of the state directory, so a mistyped
LOCAL_CLUSTER_STATE (``/``, ``/var/lib``, a home directory) must never reach it. Every
directory the tool takes gets a marker file naming its role; `up` takes a directory only when
it is new, empty or already marked with that role, and `down`/`status` touch a directory only
when it carries the marker. Both directories are mode 0700: they hold the cluster's private
keys, kubeconfigs and the containerd socket (root on this machine to whoever can reach it).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The marker's name, in the state and in the run directory.
MARKER = ".tf-mnist-local-cluster"
#: Role -> the environment variable that overrides that directory (layout.paths()).
ROLES = {"state": "LOCAL_CLUSTER_STATE", "run": "LOCAL_CLUSTER_RUN"}


class DirectoryError(RuntimeError):
    """A state or run directory that is not the tool's; the message gives the fix."""


def _marker_text(role: str) -> str:
    return f"tf-mnist local-cluster {role} directory\n"


def _has_marker(directory: Path, role: str) -> bool:
    marker = directory / MARKER
    try:
        return not marker.is_symlink() and marker.read_text() == _marker_text(role)
    except OSError:
        return False


def _foreign(directory: Path, role: str, why: str) -> DirectoryError:
    env = ROLES[role]
    return DirectoryError(
        f"{env}={directory} is refused as the {role} directory: {why}. The tool only fills and "
        f"removes directories it made itself (they hold a {MARKER} file naming their role).\n"
        f"  fix: point {env} at a new or empty directory (the default is the tool's own); if "
        f"{directory} is an old cluster's from before the marker, remove it yourself"
    )


def check_paths(state: Path, run: Path) -> None:
    """Refuses a relative path, and a state and run directory that are one or nest.

    `down` removes the whole run directory and empties the state directory, so neither may
    contain the other. Raises DirectoryError naming the variable and the value.
    """
    for role, d in (("state", state), ("run", run)):
        if not d.is_absolute():
            raise DirectoryError(f"{ROLES[role]}={d} is refused: it must be an absolute path")
    s, r = Path(os.path.abspath(state)), Path(os.path.abspath(run))
    if s == r or s in r.parents or r in s.parents:
        raise DirectoryError(
            f"LOCAL_CLUSTER_STATE={state} and LOCAL_CLUSTER_RUN={run} are refused: "
            "they must be two separate directories, neither inside the other"
        )


def check_claimable(directory: Path, role: str) -> None:
    """Raises DirectoryError unless `claim` would take ``directory``: a path that does not
    exist, an empty directory, or a directory already marked with ``role``."""
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise _foreign(directory, role, "it is not a directory")
    if directory.is_dir() and not _has_marker(directory, role):
        other = [r for r in ROLES if r != role and _has_marker(directory, r)]
        if other:
            raise _foreign(directory, role, f"it is this tool's {other[0]} directory")
        if any(directory.iterdir()):
            raise _foreign(directory, role, "it exists, is not empty and has no marker")


def claim(directory: Path, role: str) -> None:
    """Makes ``directory`` the tool's ``role`` directory (mode 0700, marker written); one that
    does not exist is created with its parents. Raises DirectoryError (check_claimable) and
    leaves everything as it was when the directory is someone else's."""
    check_claimable(directory, role)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    if not _has_marker(directory, role):
        write_private(directory / MARKER, _marker_text(role))


def owned(directory: Path, role: str) -> bool:
    """True when ``directory`` is the tool's ``role`` directory; False when it does not exist.

    Raises DirectoryError when something else is there: `down` and `status` then stop before
    they read, signal or remove anything.
    """
    if not directory.exists() and not directory.is_symlink():
        return False
    if directory.is_symlink() or not directory.is_dir():
        raise _foreign(directory, role, "it is not a directory")
    if not _has_marker(directory, role):
        raise _foreign(directory, role, "it has no marker")
    return True


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` as a 0600 file (also when it existed with a wider mode),
    never through a symbolic link: for keys, kubeconfigs and the markers."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(text)


def private_dir(path: Path) -> Path:
    """``path`` created (with parents) and set to mode 0700; returns it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path
