"""A private network for the tasks of a local run: a fresh Linux network namespace with only
its own loopback up.

TensorFlow's gRPC server always listens on ``0.0.0.0:<port>`` (it has no bind address
option), accepts anyone and runs whatever graph it is sent, file reads and writes included.
The fork server (trainer/launcher/forkserver.py) therefore enters a new network namespace
before it imports TensorFlow, and every task is forked from it: the tasks reach each other
on their own ``localhost``, and nothing outside the namespace, this machine's other
processes included, can connect to their ports. The launcher and TensorBoard stay in the
machine's network, so TensorBoard's URL works as before.

How: as root ``unshare(CLONE_NEWNET)``; otherwise (or where root lacks CAP_SYS_ADMIN, as in
a default container) an unprivileged user namespace with it,
``unshare(CLONE_NEWUSER | CLONE_NEWNET)``, mapping this process's own uid and gid to
themselves so that files on --log_dir keep their owner. Either needs a single-threaded
process. Where neither is allowed (not Linux, user namespaces switched off, a seccomp
profile) the run goes on with its ports open on every interface, and says so.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import sys

CLONE_NEWNET = 0x40000000  # <linux/sched.h>
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913  # <linux/sockios.h>
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
#: The fork server's report (see report_private_network): first word, then a reason.
PRIVATE, OPEN, BROKEN = "private", "open", "broken"


class NamespaceError(OSError):
    """A private network namespace could not be made; the message says why. ``entered``:
    the process is in a new namespace nonetheless, whose loopback does not work."""

    entered = False


def _unshare(flags: int) -> None:
    if hasattr(os, "unshare"):  # Python 3.12+
        os.unshare(flags)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _map_own_ids() -> None:
    """In a new user namespace: this uid and gid map to themselves (setgroups must be denied
    before an unprivileged process may write gid_map, user_namespaces(7))."""
    uid, gid = os.geteuid(), os.getegid()
    for name, text in (
        ("uid_map", f"{uid} {uid} 1\n"),
        ("setgroups", "deny\n"),
        ("gid_map", f"{gid} {gid} 1\n"),
    ):
        with open(f"/proc/self/{name}", "wb") as file:  # one write(2), as the kernel wants
            file.write(text.encode())


def bring_loopback_up() -> None:
    """Set ``lo`` up in this process's network namespace (a new one starts with it down).

    Raises:
        OSError: the ioctl was refused (needs CAP_NET_ADMIN in the namespace's owner).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def enter_private_network() -> None:
    """Move this (single-threaded) process into a new network namespace whose only interface
    is an up loopback; its children inherit it.

    Raises:
        NamespaceError: not Linux, or the kernel refused every way (the message gives the
            errors); the process is then still in the machine's network.
    """
    if not sys.platform.startswith("linux"):
        raise NamespaceError(errno.ENOSYS, f"network namespaces are Linux only (this is {sys.platform})")
    tried = []
    attempts = [("unshare(CLONE_NEWNET)", CLONE_NEWNET)] if os.geteuid() == 0 else []
    attempts.append(("unshare(CLONE_NEWUSER|CLONE_NEWNET)", CLONE_NEWUSER | CLONE_NEWNET))
    for name, flags in attempts:
        try:
            _unshare(flags)
        except OSError as err:
            tried.append(f"{name}: {err.strerror or err}")
            continue
        try:
            if flags & CLONE_NEWUSER:
                _map_own_ids()
            bring_loopback_up()
        except OSError as err:
            broken = NamespaceError(
                err.errno or errno.EPERM, f"{name} succeeded, but loopback could not be set up: {err}"
            )
            broken.entered = True
            raise broken from None
        return
    raise NamespaceError(errno.EPERM, "; ".join(tried))


def report_private_network(report_path: str) -> None:
    """Enter a private network (enter_private_network) and write the outcome to
    ``report_path``: ``private``, ``open <reason>`` (still in the machine's network) or
    ``broken <reason>`` (in a namespace without a working loopback: tasks cannot connect)."""
    try:
        enter_private_network()
        outcome = PRIVATE
    except NamespaceError as err:
        outcome = f"{BROKEN if err.entered else OPEN} {err.strerror or err}"
    with open(report_path, "w", encoding="utf-8") as file:
        file.write(outcome + "\n")


def read_report(report_path: str) -> tuple[str, str]:
    """(PRIVATE | OPEN | BROKEN, reason) from a report_private_network file; (OPEN, why)
    when there is none (the fork server was started without being asked)."""
    try:
        with open(report_path, encoding="utf-8") as file:
            text = file.read().strip()
    except OSError:
        return OPEN, "the fork server did not report on its network"
    word, _, reason = text.partition(" ")
    return (word, reason) if word in (PRIVATE, OPEN, BROKEN) else (OPEN, f"report {text!r}")


def same_network(pid: int) -> bool | None:
    """Whether process ``pid`` shares this process's network namespace; None when that cannot
    be read (no /proc, or the process is gone)."""
    try:
        mine = os.stat("/proc/self/ns/net")
        theirs = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def outcome_line(report_path: str, task_pid: int) -> tuple[str, str]:
    """(PRIVATE | OPEN | BROKEN, the launcher's line about it) once the first task
    ``task_pid`` has been forked: the fork server's report, checked against the task's
    namespace where /proc shows it (a fork server started earlier never reported)."""
    word, reason = read_report(report_path)
    same = same_network(task_pid)
    if same is False and word == OPEN:
        word = PRIVATE
    elif same is True and word == PRIVATE:
        word, reason = OPEN, "the tasks share the launcher's network namespace"
    if word == PRIVATE:
        return word, (
            "the tasks run in a network namespace of their own: their gRPC ports "
            "accept connections from the tasks' loopback only"
        )
    if word == BROKEN:
        return word, f"error: the tasks' private network does not work ({reason})"
    return word, (
        "warning: the tasks' gRPC ports are open on every interface of this "
        f"machine (no private network namespace: {reason}); anyone who can reach "
        "it can run graphs on them, so use a trusted network"
    )
