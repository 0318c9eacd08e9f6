"""What a data.source URL set in plain text may hold (an allowlist), and what names its file.

A data.source set without ``--secret`` lands in the stack file, the staging Job's command and the
state's plain text, so a plain URL is ``scheme://host[:port]/path`` and nothing else
(``not_plain``): no user info (``user:password@``), no query string, no fragment. What may
travel there is a credential whenever the server asks for one, and no list of names keeps up
with the ways to write it: a presigned OSS, S3 or GCS URL's signature, an Azure SAS ``sig``,
COS's ``q-signature``, a plain ``?token=``, a password before ``@``. The stack needs none of
them in plain text (trainer/stage.py names each file by its URL's last path segment, never by
the query), so any URL that has one is set with ``--secret`` and reaches staging through a
Kubernetes Secret (infra/components/staging.py). A token inside the path cannot be told from a
directory name: such a URL must be set with ``--secret`` by whoever knows it is one.

``without_credentials`` is not a check: it names the file a URL downloads, for the data
directory's key (infra/runs.py), so that a presigned URL signed again keeps its run.
It drops the user info and the signing parameters the providers document:

- Alibaba Cloud OSS: V1 ``OSSAccessKeyId``, ``Expires``, ``Signature``, ``security-token``;
  V4 ``x-oss-signature-version``, ``x-oss-credential``, ``x-oss-date``, ``x-oss-expires``,
  ``x-oss-signature``, ``x-oss-additional-headers``, ``x-oss-security-token``.
- AWS S3: SigV2 ``AWSAccessKeyId``, ``Expires``, ``Signature``; SigV4 ``X-Amz-*``.
- Google Cloud Storage: V2 ``GoogleAccessId``, ``Expires``, ``Signature``; V4 ``X-Goog-*``.

Every other query parameter stays in the key (``?versionId=2`` names another file).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: Signing parameters by exact name (compared lower-case), for the data key only.
SIGNING_NAMES = frozenset(
    {"ossaccesskeyid", "awsaccesskeyid", "googleaccessid", "expires", "signature", "security-token"}
)
#: Signing parameters by prefix (compared lower-case), for the data key only.
SIGNING_PREFIXES = ("x-oss-", "x-amz-", "x-goog-")
#: What replaces a hidden part of a URL in a message (trainer/stage.py prints the same).
HIDDEN = "<hidden>"


def _is_url(source: str) -> bool:
    return urlsplit(source).scheme in ("http", "https")


def not_plain(source: str) -> str | None:
    """What keeps ``source`` out of plain text, for an error message (never its value):
    ``"user info (user:password@)"``, ``"a query string (?...)"`` or ``"a fragment (#...)"``;
    None for a path, or a URL of scheme, host, port and path alone.

    A ``?`` or ``#`` with nothing after it counts too: what follows it is a credential's place,
    and an empty one is no reason to keep it.
    """
    if not _is_url(source):
        return None
    parts = urlsplit(source)
    if "@" in parts.netloc:
        return "user info (user:password@)"
    if "?" in source.split("#", 1)[0]:
        return "a query string (?...)"
    if "#" in source:
        return "a fragment (#...)"
    return None


def redacted(source: str) -> str:
    """``source`` as a message may show it: user info, query and fragment each replaced by
    ``<hidden>``; the scheme, host, port and path stay, which say which file it is."""
    if not_plain(source) is None:
        return source
    parts = urlsplit(source)
    netloc = parts.netloc.rpartition("@")
    shown = f"{parts.scheme}://{HIDDEN + '@' if netloc[1] else ''}{netloc[2]}{parts.path}"
    if "?" in source.split("#", 1)[0]:
        shown += f"?{HIDDEN}"
    if "#" in source:
        shown += f"#{HIDDEN}"
    return shown


def _is_signing(name: str) -> bool:
    lower = name.lower()
    return lower in SIGNING_NAMES or lower.startswith(SIGNING_PREFIXES)


def without_credentials(source: str) -> str:
    """``source`` without user info and signing parameters: what names the file, which a URL
    signed again keeps. A source with neither comes back unchanged, character for character
    (its data key, and so its run key, stay what they were before this rule)."""
    if not _is_url(source):
        return source
    parts = urlsplit(source)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in query if not _is_signing(name)]
    if "@" not in parts.netloc and len(kept) == len(query):
        return source
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept), parts.fragment))
