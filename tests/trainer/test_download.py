"""trainer.download: a permanent error ends a download at once, a transient one is tried again
within RETRY_WINDOW_S, and the error is one line naming the URL and why."""

from __future__ import annotations

import functools
import http.server
import socket
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loopback_http import serving
from trainer import download as dl
from trainer.download import DownloadError, classify, download

URL = "http://data.example/mnist.npz"


class _Clock:
    """A clock that the fake sleep advances, and the opener's tries by ``per_try`` seconds."""

    def __init__(self, per_try: float = 0.0) -> None:
        self.now, self.per_try, self.slept = 0.0, per_try, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _failing(clock: _Clock, errors: list[OSError]):
    """An opener that raises ``errors`` in turn (each try costing clock.per_try seconds)."""
    tries = iter(errors)

    def opener(url: str, timeout: float):
        assert timeout == dl.SOCKET_TIMEOUT_S
        clock.now += clock.per_try
        raise next(tries)

    return opener


def _http(code: int, reason: str = "x") -> urllib.error.HTTPError:
    return urllib.error.HTTPError(URL, code, reason, {}, None)


@pytest.mark.parametrize(
    "err,line,permanent",
    [
        (_http(404, "File not found"), f"{URL}: not found (HTTP 404)", True),
        (
            _http(403),
            f"{URL}: access denied (HTTP 403): a presigned URL may have expired, or the object is private",
            True,
        ),
        (_http(400, "Bad Request"), f"{URL}: HTTP 400 Bad Request", True),
        (_http(429, "Too Many Requests"), f"{URL}: HTTP 429 Too Many Requests", False),
        (_http(503, "Service Unavailable"), f"{URL}: HTTP 503 Service Unavailable", False),
        (
            urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
            f"{URL}: no such host data.example (Name or service not known)",
            True,
        ),
        (
            urllib.error.URLError(socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")),
            f"{URL}: Temporary failure in name resolution",
            False,
        ),
        (
            urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
            f"{URL}: Connection refused",
            False,
        ),
        (urllib.error.URLError(TimeoutError("timed out")), f"{URL}: no answer in 30 s", False),
        (ConnectionResetError(104, "Connection reset by peer"), f"{URL}: Connection reset by peer", False),
    ],
)
def test_each_error_is_one_line_and_permanent_or_not(err, line, permanent):
    found = classify(URL, err)
    assert (str(found), found.permanent) == (line, permanent)


def test_a_permanent_error_is_not_tried_again(tmp_path):
    clock = _Clock()
    with pytest.raises(DownloadError) as raised:
        download(URL, tmp_path / "f", clock=clock, sleep=clock.sleep, opener=_failing(clock, [_http(404)]))
    assert (
        str(raised.value)
        == f"{URL}: not found (HTTP 404); not tried again (a permanent error: check data.source)"
    )
    assert raised.value.permanent and clock.slept == []


def test_a_transient_error_is_tried_again_then_named_with_the_tries():
    clock = _Clock(per_try=1.0)
    refused = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(DownloadError) as raised:
        download(
            URL,
            Path("/nonexistent/never-opened"),
            clock=clock,
            sleep=clock.sleep,
            opener=_failing(clock, [refused] * dl.ATTEMPTS),
        )
    assert clock.slept == list(dl.BACKOFF_S)
    assert str(raised.value) == f"{URL}: Connection refused; gave up after 3 tries in 10 s"


def test_no_try_starts_after_the_retry_window():
    # A host that never answers: each try waits the socket timeout; the second ends past the window.
    clock = _Clock(per_try=dl.SOCKET_TIMEOUT_S)
    silent = urllib.error.URLError(TimeoutError("timed out"))
    with pytest.raises(DownloadError, match=r"no answer in 30 s; gave up after 2 tries in 62 s"):
        download(
            URL,
            Path("/nonexistent/never-opened"),
            clock=clock,
            sleep=clock.sleep,
            opener=_failing(clock, [silent] * dl.ATTEMPTS),
        )
    assert clock.now < 70  # about a minute, however many tries ATTEMPTS allows


@pytest.fixture()
def flaky_server(tmp_path) -> Iterator[tuple[str, list[int]]]:
    """A server of tmp_path whose first GET answers 503; yields its URL and the statuses it sent."""
    (tmp_path / "f.bin").write_bytes(b"x" * 1000)
    sent: list[int] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            if not sent:
                sent.append(503)
                self.send_error(503)
                return
            sent.append(200)
            super().do_GET()

        def log_message(self, *args) -> None:
            pass

    with serving(functools.partial(Handler, directory=str(tmp_path))) as url:
        yield url, sent


def test_a_503_then_the_file_is_downloaded(tmp_path, flaky_server):
    url, sent = flaky_server
    clock = _Clock()
    download(f"{url}/f.bin", tmp_path / "out", clock=clock, sleep=clock.sleep)
    assert sent == [503, 200] and clock.slept == [dl.BACKOFF_S[0]]
    assert (tmp_path / "out").read_bytes() == b"x" * 1000


@pytest.fixture()
def cutting_server() -> Iterator[tuple[str, list[str]]]:
    """A server whose first answer to each path is cut short, then whole: ``/sized`` promises
    1,000 bytes (Content-Length) and closes after 10; ``/chunked`` sends one chunk and closes
    without the last. Yields its URL and what it sent."""
    body = b"y" * 1000
    sent: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            cut = self.path not in sent
            sent.append(self.path if cut else f"{self.path} whole")
            self.send_response(200)
            if self.path == "/sized":
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:10] if cut else body)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n" % (10, body[:10]))
                if not cut:
                    self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (990, body[10:]))
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args) -> None:
            pass

    with serving(Handler) as url:
        yield url, sent


@pytest.mark.parametrize("path", ["/sized", "/chunked"])
def test_a_cut_download_is_tried_again_not_taken_for_a_bad_file(tmp_path, cutting_server, path):
    """A body that ends early (b"" before its Content-Length, or a chunked one cut short) is a
    transient error, tried again, and the second, whole answer is what lands in the file."""
    url, sent = cutting_server
    clock = _Clock()
    download(f"{url}{path}", tmp_path / "out", clock=clock, sleep=clock.sleep)
    assert sent == [path, f"{path} whole"] and clock.slept == [dl.BACKOFF_S[0]]
    assert (tmp_path / "out").read_bytes() == b"y" * 1000


def test_a_download_cut_every_time_names_the_bytes_it_got(tmp_path):
    class Cut:
        headers = {"Content-Length": "1000"}

        def read(self, n: int) -> bytes:
            self.read = lambda n: b""  # type: ignore[method-assign]
            return b"z" * 10

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

    clock = _Clock()
    with pytest.raises(DownloadError) as error:
        download(URL, tmp_path / "out", clock=clock, sleep=clock.sleep, opener=lambda url, timeout: Cut())
    assert str(error.value) == (
        f"{URL}: the download was cut after 10 of 1000 bytes; gave up after {dl.ATTEMPTS} tries in 7 s"
    )
