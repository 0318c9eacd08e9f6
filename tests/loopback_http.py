"""An HTTP server for a test, in a thread, for the length of a ``with`` block."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def serving(handler, host: str = "127.0.0.1") -> Iterator[str]:
    """Serves ``handler`` (a BaseHTTPRequestHandler class or factory) on a free port of ``host``
    and yields its base URL, ``http://<host>:<port>``; shut down and closed when the block ends."""
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
