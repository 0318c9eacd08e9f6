"""A stand-in Kubernetes API server on 127.0.0.1 for the teardown tests: enough of the API for
pulumi-resource-kubernetes to configure itself, read, delete and await deletion, and for the
program's ownership check to read objects. It answers one bearer token and refuses another with
401, as an API server refuses an expired ACK credential.

What it serves, over TLS on 127.0.0.1 only (client-go sends a kubeconfig's token over TLS only),
with a throwaway self-signed certificate that ``ca_data`` gives the kubeconfig:

* ``/version``; ``/openapi/v2`` as an empty protobuf document (the provider only needs it to
  load); legacy discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``) of
  the kinds in ``RESOURCES``;
* GET of an object from ``objects`` (404 once deleted), LIST of a collection, and WATCH as a
  stream that stays empty until the client goes away or ``WATCH_SECONDS`` pass;
* DELETE, which removes the object and is recorded with the token it came with.

Anything else (POST, PUT, PATCH) is recorded and refused with 405: a teardown must not create
or change objects.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: (group, version, plural, kind, namespaced) of every kind the stack creates, plus the ones the
#: provider reads or watches beside them (events, pods, replica sets; a Service's endpoints,
#: without which its read dereferences nil).
RESOURCES = (
    ("", "v1", "configmaps", "ConfigMap", True),
    ("", "v1", "services", "Service", True),
    ("", "v1", "secrets", "Secret", True),
    ("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("", "v1", "persistentvolumes", "PersistentVolume", False),
    ("", "v1", "namespaces", "Namespace", False),
    ("", "v1", "pods", "Pod", True),
    ("", "v1", "events", "Event", True),
    ("", "v1", "endpoints", "Endpoints", True),
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ("batch", "v1", "jobs", "Job", True),
    ("apps", "v1", "deployments", "Deployment", True),
    ("apps", "v1", "replicasets", "ReplicaSet", True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("events.k8s.io", "v1", "events", "Event", True),
)
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
#: How long an empty watch stays open; the client opens another when it closes.
WATCH_SECONDS = 5


def object_path(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    """The REST path of an object of ``kind`` in ``api_version`` (``batch/v1``, ``v1``).

    Raises:
        KeyError: a kind RESOURCES does not list.
    """
    group, _, version = api_version.rpartition("/")
    plural = next(r[2] for r in RESOURCES if (r[0], r[1], r[3]) == (group, version, kind))
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{plural}/{name}"


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class FakeApiServer:
    """The server's state; ``start`` serves it on a free loopback port.

    Attributes:
        good_token: the token that is let in.
        objects: what the cluster holds: REST path -> object.
        requests: (method, path, token) of every request, in order.
    """

    good_token: str
    objects: dict[str, dict] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""
    #: The server's certificate, base64 (a kubeconfig's certificate-authority-data).
    ca_data: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, tls_dir: Path) -> FakeApiServer:
        """Serve on a free port of 127.0.0.1 with a new key and certificate written to ``tls_dir``.

        Raises:
            subprocess.CalledProcessError: openssl could not make the certificate.
        """
        key, cert = tls_dir / "apiserver.key", tls_dir / "apiserver.crt"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.ca_data = base64.b64encode(cert.read_bytes()).decode()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        handler = type("Handler", (_Handler,), {"api": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def deletes(self) -> list[tuple[str, str]]:
        """(path, token) of every DELETE."""
        return [(path, token) for method, path, token in self.requests if method == "DELETE"]

    def writes(self) -> list[tuple[str, str, str]]:
        """Every request that would create or change an object (refused here)."""
        return [r for r in self.requests if r[0] in ("POST", "PUT", "PATCH")]

    def tokens(self) -> set[str]:
        return {token for _, _, token in self.requests}

    # --- what the handler calls -------------------------------------------------------

    def record(self, method: str, path: str, token: str) -> None:
        with self._lock:
            self.requests.append((method, path, token))

    def get(self, path: str) -> dict | None:
        with self._lock:
            return self.objects.get(path)

    def listed(self, collection: str) -> list[dict]:
        """The objects in ``collection``: a namespace's (``/api/v1/namespaces/ns/configmaps``),
        or a kind's across namespaces (``/apis/batch/v1/jobs``)."""
        base, _, plural = collection.rpartition("/")
        across = re.compile(re.escape(base) + r"(/namespaces/[^/]+)?/" + re.escape(plural) + r"/[^/]+")
        with self._lock:
            return [
                obj
                for path, obj in self.objects.items()
                if path.startswith(collection + "/")
                or ("/namespaces/" not in base and across.fullmatch(path))
            ]

    def delete(self, path: str) -> dict | None:
        with self._lock:
            return self.objects.pop(path, None)

    def stopping(self) -> threading.Event:
        return self._stop


def _discovery(path: str) -> dict | None:
    """The discovery document at ``path``, None when ``path`` is not a discovery path."""
    if path == "/version":
        return {"major": "1", "minor": "31", "gitVersion": "v1.31.0", "platform": "linux/amd64"}
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }
    groups: dict[str, set[str]] = {}
    for group, version, *_ in RESOURCES:
        if group:
            groups.setdefault(group, set()).add(version)
    if path == "/apis":
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in sorted(vs)],
                    "preferredVersion": {"groupVersion": f"{g}/{sorted(vs)[-1]}", "version": sorted(vs)[-1]},
                }
                for g, vs in sorted(groups.items())
            ],
        }
    for group, version in {(r[0], r[1]) for r in RESOURCES}:
        base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
        if path == base:
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": [
                    {
                        "name": plural,
                        "singularName": kind.lower(),
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": VERBS,
                    }
                    for g, v, plural, kind, namespaced in RESOURCES
                    if (g, v) == (group, version)
                ],
            }
    return None


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def _token(self) -> str:
        return (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _admitted(self, method: str) -> str | None:
        """The request's path when its token is the good one; else answers 401 and returns None."""
        url = urlsplit(self.path)
        self.api.record(method, url.path, self._token())
        if self._token() != self.api.good_token:
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return None
        return url.path

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self._admitted("GET")
        if path is None:
            return
        if path == "/openapi/v2":
            # An empty protobuf Document: the provider loads it and needs none of its models.
            self._send(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
            return
        document = _discovery(path)
        if document is not None:
            self._send(200, document)
            return
        found = self.api.get(path)
        if found is not None:
            self._send(200, found)
            return
        if "watch" in parse_qs(urlsplit(self.path).query):
            self._watch()
            return
        if _is_collection(path):
            self._send(
                200,
                {
                    "kind": "List",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "1"},
                    "items": self.api.listed(path),
                },
            )
            return
        self._send(404, _status(404, "NotFound", f"{path} not found"))

    def _watch(self) -> None:
        """An open watch that sends no event; ends after WATCH_SECONDS or at stop."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        deadline = time.monotonic() + WATCH_SECONDS
        while time.monotonic() < deadline and not self.api.stopping().wait(0.2):
            pass
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def do_DELETE(self) -> None:  # noqa: N802
        path = self._admitted("DELETE")
        if path is None:
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        gone = self.api.delete(path)
        if gone is None:
            self._send(404, _status(404, "NotFound", f"{path} not found"))
            return
        self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    def _refuse_write(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self._admitted(self.command) is not None:
            self._send(405, _status(405, "MethodNotAllowed", "a teardown changes nothing"))

    do_POST = do_PUT = do_PATCH = _refuse_write  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


def _is_collection(path: str) -> bool:
    """A path that names a kind's collection (``.../configmaps``), not one object."""
    plurals = {r[2] for r in RESOURCES}
    return path.rsplit("/", 1)[-1] in plurals
