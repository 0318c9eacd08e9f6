"""The local run's private network (trainer/launcher/netns.py): the tasks' gRPC ports are
refused from the machine's own addresses, and a run where no namespace can be made still
trains, with a warning."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.launcher import netns

REPO = Path(__file__).resolve().parents[2]
RUN = [
    "--epochs",
    "1",
    "--batch_size",
    "64",
    "--log_interval",
    "40",
    "--peer_timeout",
    "120",
    "--workers",
    "1",
    "--ps",
    "1",
]


def _in_child(body) -> str:
    """Run ``body()`` (returning a str) in a forked child; return what it returned, or the
    child's exception as ``"error: ..."``."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        try:
            text = body()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            text = f"error: {type(err).__name__}: {err}"
        os.write(write_fd, text.encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return text


def _loopback_works_in_a_private_network(as_uid: int | None) -> str:
    if as_uid is not None:  # an unprivileged user, as on a laptop
        import ctypes
        import encodings.idna  # noqa: F401 - the interpreter's files are root's only here

        os.setgid(as_uid)
        os.setuid(as_uid)
        # Changing uid clears "dumpable", which would make /proc/self/uid_map root's.
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    outside = os.stat("/proc/self/ns/net").st_ino
    netns.enter_private_network()
    inside = os.stat("/proc/self/ns/net").st_ino
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))  # as TensorFlow's gRPC server binds
        server.listen()
        with socket.create_connection(("127.0.0.1", server.getsockname()[1]), timeout=5):
            pass
    return f"uid {os.geteuid()} moved {inside != outside} loopback ok"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces: Linux")
@pytest.mark.parametrize("as_uid", [None, 65534], ids=["root", "unprivileged"])
def test_a_private_network_has_a_working_loopback(as_uid):
    if as_uid is not None and os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    uid = os.geteuid() if as_uid is None else as_uid
    text = _in_child(lambda: _loopback_works_in_a_private_network(as_uid))
    if text.startswith("error: NamespaceError"):
        pytest.skip(f"this machine allows no network namespace: {text}")
    assert text == f"uid {uid} moved True loopback ok"


def test_refused_namespaces_are_reported_with_every_reason(monkeypatch, tmp_path):
    def refuse(flags: int) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(netns, "_unshare", refuse)
    monkeypatch.setattr(netns.sys, "platform", "linux")
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    report = tmp_path / "network"
    netns.report_private_network(str(report))
    assert report.read_text() == (
        "open unshare(CLONE_NEWNET): Operation not permitted; "
        "unshare(CLONE_NEWUSER|CLONE_NEWNET): Operation not "
        "permitted\n"
    )
    word, line = netns.outcome_line(str(report), os.getpid())
    assert word == netns.OPEN
    assert line.startswith("warning: the tasks' gRPC ports are open on every interface")
    assert "unshare(CLONE_NEWNET): Operation not permitted" in line


def test_other_systems_are_told_apart(monkeypatch):
    monkeypatch.setattr(netns.sys, "platform", "darwin")
    with pytest.raises(
        netns.NamespaceError,
        match="network namespaces are Linux only "
        r"\(this is darwin\)",
    ):
        netns.enter_private_network()


def test_a_namespace_without_loopback_stops_the_run(monkeypatch, tmp_path):
    def no_ioctl() -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(netns, "_unshare", lambda flags: None)
    monkeypatch.setattr(netns, "bring_loopback_up", no_ioctl)
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    report = tmp_path / "network"
    netns.report_private_network(str(report))
    word, line = netns.outcome_line(str(report), os.getpid())
    assert word == netns.BROKEN
    assert line == (
        "error: the tasks' private network does not work (unshare(CLONE_NEWNET) "
        "succeeded, but loopback could not be set up: [Errno 1] Operation not "
        "permitted)"
    )


def _outside_address() -> str | None:
    """One IPv4 address of this machine other than loopback, or None."""
    try:
        out = subprocess.run(
            ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=10
        ).stdout
    except OSError:
        return None
    addresses = [a for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out) if not a.startswith("127.")]
    return addresses[0] if addresses else None


def _connects(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


def _connects_inside(pid: int, port: int) -> bool:
    """Whether 127.0.0.1:``port`` answers inside process ``pid``'s network namespace."""
    code = "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)"
    return (
        subprocess.run(
            ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", code, str(port)],
            capture_output=True,
        ).returncode
        == 0
    )


def _run_and_probe(log_dir: Path, prefix: list[str]) -> tuple[int, str, dict]:
    """Run ``prefix + python -m trainer.local`` on a small run; once the ps serves, probe its
    port; return (exit code, output, probes)."""
    address = _outside_address()
    if address is None:
        pytest.skip("this machine has no IPv4 address besides loopback to probe from")
    cmd = [*prefix, sys.executable, "-m", "trainer.local", "--log_dir", str(log_dir), *RUN]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    lines, probes, ports, pids = [], {}, {}, {}
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[local] cluster spec "):
                ports = json.loads(line.split("cluster spec ", 1)[1])["cluster"]
            if match := re.search(r"\[local\] started (\S+) \(pid (\d+)\)", line):
                pids[match[1]] = int(match[2])
            if "[ps-0] ps 0: serving on" in line and not probes:
                port = int(ports["ps"][0].rsplit(":", 1)[1])
                probes = {"outside": _connects(address, port), "loopback": _connects("127.0.0.1", port)}
                if os.geteuid() == 0 and shutil.which("nsenter"):
                    probes["inside"] = _connects_inside(pids["ps-0"], port)
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, "".join(lines), probes


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces: Linux")
def test_a_local_run_s_ports_are_refused_from_the_machine_s_addresses(tmp_path):
    # Asked of the kernel, not of the run's output: a launcher that stopped isolating its
    # tasks must fail here, not skip.
    allowed = _in_child(lambda: (netns.enter_private_network(), "allowed")[1])
    if allowed != "allowed":
        pytest.skip(f"this machine allows no network namespace: {allowed}")
    code, output, probes = _run_and_probe(tmp_path, [])
    assert code == 0, output[-3000:]
    assert "[local] the tasks run in a network namespace of their own" in output
    assert "[local] every task exited 0" in output, output[-3000:]
    # Refused from the machine's address and its loopback; answered inside the run's own.
    assert probes["outside"] is False and probes["loopback"] is False, probes
    if "inside" in probes:
        assert probes["inside"] is True, probes


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_without_a_namespace_the_run_trains_and_warns_that_its_ports_are_open(tmp_path):
    # In a user namespace with no uid mapped, the kernel refuses both ways of making a
    # network namespace, as a container without CAP_SYS_ADMIN or a kernel without
    # unprivileged user namespaces would.
    if subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode:
        pytest.skip("this machine allows no user namespace to refuse namespaces in")
    code, output, probes = _run_and_probe(tmp_path, ["unshare", "--user"])
    assert code == 0, output[-3000:]
    assert re.search(
        r"\[local\] warning: the tasks' gRPC ports are open on every interface "
        r"of this machine \(no private network namespace: .*Operation not "
        r"permitted\)",
        output,
    ), output[:3000]
    assert "[local] every task exited 0" in output, output[-3000:]
    # The same probe connects: TensorFlow listens on every interface.
    assert probes["outside"] is True, probes
