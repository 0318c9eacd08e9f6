"""infra/kube_credentials.py: a kubeconfig's client key never waits on disk for a normal exit.

Real processes: a KubeconfigCluster read with a kubeconfig carrying inline CA, client
certificate and client key (made with openssl) reaches an API server on loopback that takes
the connection and never answers; the process is SIGKILLed mid-request, and its temp
directory holds nothing, during the request or after.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

READ = """
import sys
from infra.cluster_objects import KubeconfigCluster, ObjectRef
KubeconfigCluster(open(sys.argv[1]).read()).read(ObjectRef("kubernetes:core/v1:ConfigMap", "tf-mnist", "x"))
"""


def _credentials(tmp: Path) -> dict[str, str]:
    """A self-signed certificate and its key, base64 as a kubeconfig holds them inline."""
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(tmp / "key.pem"),
            "-out",
            str(tmp / "cert.pem"),
            "-days",
            "1",
            "-subj",
            "/CN=me",
        ],
        check=True,
        capture_output=True,
    )
    pem = {name: base64.b64encode((tmp / f"{name}.pem").read_bytes()).decode() for name in ("key", "cert")}
    (tmp / "key.pem").unlink()
    return pem


@pytest.mark.skipif(
    shutil.which("openssl") is None or not hasattr(os, "memfd_create"), reason="openssl, Linux"
)
def test_a_killed_read_leaves_no_credential_file(tmp_path):
    pem = _credentials(tmp_path)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    connected = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = server.accept()  # the TLS handshake then waits for an answer that never comes
        held.append(conn)
        connected.set()

    threading.Thread(target=accept, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{server.getsockname()[1]}\n"
        f"    certificate-authority-data: {pem['cert']}\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: me}\ncurrent-context: x\n"
        f"users:\n- name: me\n  user:\n    client-certificate-data: {pem['cert']}\n"
        f"    client-key-data: {pem['key']}\n"
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", READ, str(kubeconfig)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not connected.wait(0.1):  # until the client has loaded its key and connected
            assert child.poll() is None, child.stderr.read()
        assert sorted(p.name for p in temp.rglob("*")) == []  # none while it runs
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        for conn in held:
            conn.close()
        server.close()
    assert sorted(p.name for p in temp.rglob("*")) == []  # none after a kill
