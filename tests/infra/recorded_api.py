"""A recorded Kubernetes API server on loopback for the real kubernetes client
(infra/cluster_objects.py): ``RecordedApi.answers`` maps a GET's path (with its query) to
(status, JSON body), 404 otherwise; ``RecordedApi.seen`` records each GET as (path, Accept,
Authorization). The ``api_server`` fixture serves it and yields its URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.loopback_http import serving


class RecordedApi(BaseHTTPRequestHandler):
    answers: dict = {}
    seen: list = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status, body = self.answers.get(self.path, (404, {"kind": "Status", "code": 404}))
        self.seen.append((self.path, self.headers.get("Accept"), self.headers.get("Authorization")))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[str]:
    """The recorded server's URL; ``answers`` and ``seen`` start empty."""
    RecordedApi.answers, RecordedApi.seen = {}, []
    with serving(RecordedApi) as url:
        yield url
