"""A small OCI distribution registry for tests, served on loopback by tests/loopback_http.py.

It answers ``HEAD /v2/<path>/manifests/<tag>`` as a registry does for what it was given:

- ``public``: path -> {tag: digest}, answered to anyone;
- ``bearer``: the same, answered only with a token from ``GET /token`` (a 401 before, with
  ``WWW-Authenticate: Bearer realm="<base>/token",service="stub-registry",scope="repository:<path>:pull"``);
  the token endpoint gives one anonymously unless the path is in ``private``, for which it
  wants the Basic login ``LOGIN``;
- ``basic``: the same, answered only with the Basic login ``LOGIN`` (a 401 with ``Basic``);
- ``no_digest``: paths whose tags exist (200) but whose answer has no Docker-Content-Digest;
- ``redirects``: path -> URL, answered (once authorized) with a 307 to the URL;
- anything else: 404 with the distribution spec's MANIFEST_UNKNOWN body.

``requests`` records every request as ``(method, path with query, headers)``.
"""

from __future__ import annotations

import base64
import http.server
import json
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.loopback_http import serving

#: The login the stub accepts: (username, password).
LOGIN = ("ml-team", "not-a-real-password")
SERVICE = "stub-registry"


def digest(n: int) -> str:
    """A valid made-up digest, ``sha256:`` and 64 hex digits of ``n``."""
    return f"sha256:{n:064x}"


@dataclass
class Registry:
    """What the stub holds and what it was asked; ``host`` is ``127.0.0.1:<port>`` once served."""

    public: dict[str, dict[str, str]] = field(default_factory=dict)
    bearer: dict[str, dict[str, str]] = field(default_factory=dict)
    basic: dict[str, dict[str, str]] = field(default_factory=dict)
    private: set[str] = field(default_factory=set)
    no_digest: set[str] = field(default_factory=set)
    redirects: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    host: str = ""

    def token(self, path: str) -> str:
        return f"token-for-{path}"


def _basic_ok(header: str | None) -> bool:
    expected = "Basic " + base64.b64encode(":".join(LOGIN).encode()).decode()
    return header == expected


def handler(registry: Registry) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _record(self) -> None:
            registry.requests.append((self.command, self.path, dict(self.headers.items())))

        def do_GET(self) -> None:
            self._record()
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/token":
                self._send(404, {})
                return
            query = urllib.parse.parse_qs(url.query)
            scope = query.get("scope", [""])[0]
            path = scope.removeprefix("repository:").rsplit(":", 1)[0]
            if path in registry.private and not _basic_ok(self.headers.get("Authorization")):
                self._send(
                    401, {"WWW-Authenticate": 'Basic realm="stub token"'}, b'{"details":"login needed"}'
                )
                return
            self._send(
                200,
                {"Content-Type": "application/json"},
                json.dumps({"token": registry.token(path)}).encode(),
            )

        def do_HEAD(self) -> None:
            self._record()
            path, _, tag = self.path.removeprefix("/v2/").rpartition("/manifests/")
            auth = self.headers.get("Authorization")
            if path in registry.bearer:
                if auth != f"Bearer {registry.token(path)}":
                    realm = f"http://{registry.host}/token"
                    challenge = f'Bearer realm="{realm}",service="{SERVICE}",scope="repository:{path}:pull"'
                    self._send(401, {"WWW-Authenticate": challenge})
                    return
                tags = registry.bearer[path]
            elif path in registry.basic:
                if not _basic_ok(auth):
                    self._send(401, {"WWW-Authenticate": 'Basic realm="stub"'})
                    return
                tags = registry.basic[path]
            else:
                tags = registry.public.get(path, {})
            if path in registry.redirects:
                self._send(307, {"Location": registry.redirects[path]})
            elif path in registry.no_digest:
                self._send(200, {"Content-Type": "application/vnd.oci.image.index.v1+json"})
            elif tag in tags:
                headers = {
                    "Content-Type": "application/vnd.oci.image.index.v1+json",
                    "Docker-Content-Digest": tags[tag],
                }
                self._send(200, headers)
            else:
                self._send(404, {"Content-Type": "application/json"})

    return Handler


@contextmanager
def served(registry: Registry) -> Iterator[Registry]:
    """``registry`` served on a free loopback port for the block (``registry.host`` set)."""
    with serving(handler(registry)) as base:
        registry.host = base.removeprefix("http://")
        yield registry
