"""The digest a registry gives for an image tag, through the OCI distribution API.

``lookup_digest("python:3.11-slim")`` asks the registry ``HEAD /v2/<name>/manifests/<tag>``
(distribution-spec v1.1, "Pulling manifests") with the Accept types of an OCI index or
manifest and of a Docker manifest list or v2 manifest, so that a multi-arch tag answers with
its index's digest (what a node of any architecture pulls by), and reads the
``Docker-Content-Digest`` header of the answer. A registry that answers 401 with
``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` (Docker Hub, Alibaba Cloud
Container Registry, most others) is asked for a token at the realm, anonymously or with the
stack's registry login, and asked again with it (the Docker registry token spec); one that
answers ``Basic`` is asked again with the login.

Names are read as Kubernetes' nodes read them (github.com/distribution/reference,
ParseNormalizedNamed): a first segment with a dot or a port, or ``localhost``, is the registry
host; otherwise the image is on Docker Hub (``registry-1.docker.io``), a one-segment name under
``library/`` (``python:3.11-slim`` is ``registry-1.docker.io/library/python``); no tag is
``latest``. Registries are spoken to over HTTPS, except on loopback addresses (``localhost``,
``127.0.0.0/8``, ``[::1]``), which containerd and Docker reach over plain HTTP by default.

Only the standard library (urllib): no dependency for a few HEAD requests.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

#: The manifest types a tag may name, most general first (an index lists per-platform manifests).
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
#: Docker Hub: the host its names are short for, and the one its API answers on.
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({DOCKER_HUB, "index.docker.io", DOCKER_HUB_API})
#: Seconds each request may take (connect and each read): a registry slower than this is
#: treated as unreachable, so `pulumi up` fails in minutes at most instead of hanging.
TIMEOUT_S = 20.0
#: A digest a node accepts (the OCI image spec's registered algorithms, lowercase hex).
_DIGEST = re.compile(r"^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$")
#: One ``key="value"`` parameter of a WWW-Authenticate challenge.
_PARAM = re.compile(r'([A-Za-z]+)="([^"]*)"')


@dataclass(frozen=True)
class RegistryCredentials:
    """A registry login: registryCredentials.* with the server resolved (Settings.registry_server),
    for the pull Secret the stack creates and the digests `pulumi up` asks for.

    Never printed: ``repr`` leaves the fields out, and the program passes them to Kubernetes
    only inside ``pulumi.Output.secret``.
    """

    server: str = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)


def basic(login: RegistryCredentials) -> str:
    """The ``Authorization`` value of HTTP Basic authentication (RFC 7617) with ``login``."""
    return "Basic " + base64.b64encode(f"{login.username}:{login.password}".encode()).decode()


class DigestUnavailable(Exception):
    """The registry gave no digest for the tag; the message says what it answered.

    Attributes:
        status: the HTTP status that refused it (401 and 403 ask for a login); None when
            there was no answer, or an answer without a usable digest.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Repository:
    """Where an image's manifests are asked for.

    Attributes:
        host: the registry host as the reference names it (``docker.io`` for Docker Hub).
        api: the base URL of its API, ``https://registry-1.docker.io`` or ``http://localhost:5000``.
        path: the repository path (``library/python``).
        tag: the tag (``3.11-slim``; ``latest`` when the reference has none).
    """

    host: str
    api: str
    path: str
    tag: str

    @property
    def manifest_url(self) -> str:
        """``<api>/v2/<path>/manifests/<tag>``."""
        return f"{self.api}/v2/{self.path}/manifests/{self.tag}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (without port; an IPv6 address in brackets) is this machine's:
    ``localhost``, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def repository(image: str) -> Repository:
    """The registry, repository and tag of ``image``, an image reference by tag.

    Raises:
        ValueError: ``image`` names a digest (``@``): there is nothing to resolve.
    """
    if "@" in image:
        raise ValueError(f"{image} names a digest already")
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        host, remainder = first, rest
    else:
        host, remainder = DOCKER_HUB, image
    name, colon, tag = remainder.rpartition(":")
    if not colon or "/" in tag:
        name, tag = remainder, "latest"
    if host in _DOCKER_HUB_ALIASES:
        api = f"https://{DOCKER_HUB_API}"
        name = name if "/" in name else f"library/{name}"
        host = DOCKER_HUB
    else:
        bare = urllib.parse.urlsplit(f"//{host}").hostname or host
        api = f"{'http' if is_loopback(bare) else 'https'}://{host}"
    return Repository(host=host, api=api, path=name, tag=tag)


def login_for(repo: Repository, login: RegistryCredentials | None) -> RegistryCredentials | None:
    """``login`` when it is for ``repo``'s registry (Docker Hub under any of its names)."""
    if login is None:
        return None
    server = login.server.removeprefix("https://").removeprefix("http://").rstrip("/")
    if server == repo.host or (server in _DOCKER_HUB_ALIASES and repo.host == DOCKER_HUB):
        return login
    return None


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect with the same method (urllib makes a HEAD a GET), and without the
    ``Authorization`` header when it leads to another host: a login or token is for its own."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None:
            return None
        if urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        new.method = req.get_method()
        return new


_OPENER = urllib.request.build_opener(_Redirects)


def _request(url: str, method: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of one request; an HTTP error status is an answer too.

    Raises:
        DigestUnavailable: no answer (refused, no such host, TLS, timeout).
    """
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=TIMEOUT_S) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers.items()), error.read()
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise DigestUnavailable(f"{url} could not be reached ({reason})") from None


def _header(headers: dict[str, str], name: str) -> str | None:
    """A header's value, its name matched without regard to case (HTTP's rule)."""
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def _answer(status: int, headers: dict[str, str], url: str) -> str:
    """How the registry answered, for a message: status, and the challenge of a 401."""
    challenge = _header(headers, "WWW-Authenticate")
    return f"{url} answered HTTP {status}" + (f" ({challenge})" if status == 401 and challenge else "")


def bearer_token(challenge: str, repo: Repository, login: RegistryCredentials | None) -> str:
    """A token from the realm of a ``Bearer`` challenge, for pulling from ``repo``.

    Asks ``GET <realm>?service=<service>&scope=<scope>`` (scope ``repository:<path>:pull`` when
    the challenge names none), with ``login`` as Basic authentication when given, and reads
    ``token`` (or ``access_token``) of the JSON answer (Docker registry token spec).

    Raises:
        DigestUnavailable: no realm, a realm over plain HTTP off loopback (a login would travel
            in clear), no answer, a status other than 200, or no token in the answer.
    """
    params = dict(_PARAM.findall(challenge))
    realm = params.get("realm")
    if not realm:
        raise DigestUnavailable(f"the registry's challenge names no token realm ({challenge})")
    parsed = urllib.parse.urlsplit(realm)
    if parsed.scheme != "https" and not (parsed.scheme == "http" and is_loopback(parsed.hostname or "")):
        raise DigestUnavailable(f"the registry's token realm {realm} is not an https URL")
    query = {"scope": params.get("scope") or f"repository:{repo.path}:pull"}
    if params.get("service"):
        query["service"] = params["service"]
    url = f"{realm}{'&' if parsed.query else '?'}{urllib.parse.urlencode(query)}"
    headers = {"Authorization": basic(login)} if login else {}
    status, answer_headers, body = _request(url, "GET", headers)
    if status != 200:
        raise DigestUnavailable(f"the token realm: {_answer(status, answer_headers, realm)}", status)
    try:
        answer = json.loads(body)
        token = answer.get("token") or answer.get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise DigestUnavailable(f"the token realm {realm} answered with no token")
    return token


def lookup_digest(image: str, login: RegistryCredentials | None = None) -> str:
    """The digest (``sha256:<64 hex>``) that ``image``'s registry gives for its tag now.

    Args:
        image: an image reference by tag (``registry.example.com/team/trainer:2.21.0-cpu``).
        login: the stack's registry login; offered only to its own registry (``login_for``)
            and to the token realm that registry names.

    Raises:
        DigestUnavailable: the registry could not be reached, refused the request (401, 403,
            404, any status other than 200), or answered without a valid Docker-Content-Digest;
            the message names the URL and what was answered.
    """
    repo = repository(image)
    login = login_for(repo, login)
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    url = repo.manifest_url
    status, answer, _ = _request(url, "HEAD", headers)
    if status == 401:
        challenge = _header(answer, "WWW-Authenticate") or ""
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "bearer":
            headers["Authorization"] = f"Bearer {bearer_token(challenge, repo, login)}"
        elif scheme == "basic" and login is not None:
            headers["Authorization"] = basic(login)
        else:
            raise DigestUnavailable(_answer(status, answer, url), status)
        status, answer, _ = _request(url, "HEAD", headers)
    if status != 200:
        raise DigestUnavailable(_answer(status, answer, url), status)
    digest = _header(answer, "Docker-Content-Digest")
    if digest is None:
        raise DigestUnavailable(f"{url} answered HTTP 200 without a Docker-Content-Digest header")
    if not _DIGEST.match(digest):
        raise DigestUnavailable(
            f"{url} answered Docker-Content-Digest {digest!r}, which is no sha256 or sha512 digest"
        )
    return digest
