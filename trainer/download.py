"""One http(s) download for trainer.stage: a permanent error ends it at once, a transient one is
tried again within a bound, and either way the error is one line that says which.

Permanent (a new try gets the same answer): an HTTP status 4xx other than 408, 425 and 429 (the
file is not there, or the URL's credentials or signature are refused or expired), and a host
name that does not exist (getaddrinfo's EAI_NONAME or EAI_NODATA). Transient: any other HTTP
status (5xx, 408, 425, 429), a name server that did not answer (EAI_AGAIN), a refused, reset or
timed-out connection, a cut download (fewer bytes than the response's Content-Length, or a
chunked body that ends early).

Transient errors are tried again ``ATTEMPTS`` times at most, after ``BACKOFF_S`` seconds, and not
once ``RETRY_WINDOW_S`` seconds have passed since the first try began, so that a source that is
down fails staging in about a minute (the staging Job then fails with this one line, its
termination message, and `pulumi up` prints it). A download that has run longer than that
window is not started again: a large data set over a slow link is not fetched twice.
"""

from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from trainer.contract.printable import printable
from trainer.volume import is_no_space

#: Seconds a connection or a read may stay silent before the try fails (socket timeout).
SOCKET_TIMEOUT_S = 30.0
#: Bytes read from the response at a time.
COPY_CHUNK = 1 << 20
#: Tries of one file at most, and the pause before each try after the first.
ATTEMPTS = 3
BACKOFF_S = (2.0, 5.0)
#: No try starts after this many seconds since the first began: with SOCKET_TIMEOUT_S, a host that
#: never answers fails in about 65 s (30 + 2 + 30 s), a refused connection in about 7 s.
RETRY_WINDOW_S = 40.0
#: HTTP statuses under 500 that a later try may not get: Request Timeout, Too Early, Too Many Requests.
TRANSIENT_HTTP = frozenset({408, 425, 429})
#: getaddrinfo's "no such host" errors (glibc's EAI_NONAME, EAI_NODATA); EAI_AGAIN is transient.
NO_SUCH_HOST = frozenset(
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
)
#: What the common permanent statuses mean for a data source.
HTTP_MEANING = {
    401: "not authorised (HTTP 401): the URL's credentials are refused",
    403: "access denied (HTTP 403): a presigned URL may have expired, or the object is private",
    404: "not found (HTTP 404)",
    410: "gone (HTTP 410)",
}


class DownloadError(RuntimeError):
    """A download that failed; the message is one line naming the URL and why.

    Attributes:
        permanent: a new try would get the same answer (see the module docstring).
    """

    def __init__(self, message: str, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


def classify(url: str, err: OSError) -> DownloadError:
    """The DownloadError of one failed try of ``url``: permanent or not, and one line saying why."""
    if isinstance(err, urllib.error.HTTPError):
        permanent = 400 <= err.code < 500 and err.code not in TRANSIENT_HTTP
        meaning = HTTP_MEANING.get(err.code, f"HTTP {err.code} {printable(str(err.reason))}")
        return DownloadError(f"{url}: {meaning}", permanent)
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, socket.gaierror) and reason.errno in NO_SUCH_HOST:
        host = urllib.parse.urlsplit(url).hostname
        return DownloadError(f"{url}: no such host {host} ({reason.strerror})", True)
    if isinstance(reason, TimeoutError):
        return DownloadError(f"{url}: no answer in {SOCKET_TIMEOUT_S:g} s", False)
    text = getattr(reason, "strerror", None) or str(reason)
    return DownloadError(f"{url}: {printable(text)}", False)


def _copy_whole(response, out) -> None:
    """Copies ``response`` into ``out``; raises ConnectionError (a cut download: transient) when
    the body ends early. http.client returns b"" at an early close of a body with a
    Content-Length, so the bytes are counted against it; a chunked body cut short raises
    IncompleteRead, which is not an OSError."""
    length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
    copied = 0
    try:
        while chunk := response.read(COPY_CHUNK):
            out.write(chunk)
            copied += len(chunk)
    except http.client.IncompleteRead as err:
        raise ConnectionError(f"the download was cut after {copied + len(err.partial)} bytes") from None
    if length is not None and length.isdigit() and copied != int(length):
        raise ConnectionError(f"the download was cut after {copied} of {int(length)} bytes")


def download(
    url: str,
    dest: Path,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> None:
    """Fetch ``url`` into the file ``dest`` (overwritten on each try).

    Raises:
        DownloadError: a permanent error at once; a transient one once ATTEMPTS tries have
            failed or RETRY_WINDOW_S has passed (the message then says how many tries in how long).
        OSError: ENOSPC or EDQUOT writing ``dest`` (the caller says whose volume is full).
    """
    started = clock()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with opener(url, timeout=SOCKET_TIMEOUT_S) as response, open(dest, "wb") as out:
                _copy_whole(response, out)
            return
        except OSError as err:
            if is_no_space(err):  # our write, not the download
                raise
            failure = classify(url, err)
        elapsed = clock() - started
        pause = BACKOFF_S[min(attempt, len(BACKOFF_S)) - 1]
        if failure.permanent:
            raise DownloadError(f"{failure}; not tried again (a permanent error: check data.source)", True)
        if attempt == ATTEMPTS or elapsed + pause >= RETRY_WINDOW_S:
            raise DownloadError(f"{failure}; gave up after {attempt} tries in {elapsed:.0f} s", False)
        sleep(pause)
