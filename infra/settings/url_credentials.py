"""The credentials a data.source URL may carry: user info, and a presigned URL's signature.

A presigned URL (OSS, S3, GCS) grants whoever holds it a download until it expires: the stack
must keep it out of the stack file, the Job's command and the state's plain text, and must not
start a new run just because it was signed again. The query parameters that carry the signing,
by the providers' own documentation:

- Alibaba Cloud OSS: V1 ``OSSAccessKeyId``, ``Expires``, ``Signature``, ``security-token``;
  V4 ``x-oss-signature-version``, ``x-oss-credential``, ``x-oss-date``, ``x-oss-expires``,
  ``x-oss-signature``, ``x-oss-additional-headers``, ``x-oss-security-token``.
- AWS S3: SigV2 ``AWSAccessKeyId``, ``Expires``, ``Signature``; SigV4 ``X-Amz-*``.
- Google Cloud Storage: V2 ``GoogleAccessId``, ``Expires``, ``Signature``; V4 ``X-Goog-*``.

Every other query parameter names what is downloaded (``?version=2``) and stays.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: Signing parameters by exact name (compared lower-case).
SIGNING_NAMES = frozenset(
    {"ossaccesskeyid", "awsaccesskeyid", "googleaccessid", "expires", "signature", "security-token"}
)
#: Signing parameters by prefix (compared lower-case).
SIGNING_PREFIXES = ("x-oss-", "x-amz-", "x-goog-")


def _is_signing(name: str) -> bool:
    lower = name.lower()
    return lower in SIGNING_NAMES or lower.startswith(SIGNING_PREFIXES)


def credentials_in(source: str) -> str | None:
    """What in ``source`` is a credential, for an error message (never its value): ``"user
    info"`` or ``"the query parameter 'Signature'"``; None when there is none (a path, or a URL
    without user info or signing parameters)."""
    parts = urlsplit(source)
    if parts.scheme not in ("http", "https"):
        return None
    if parts.username is not None or parts.password is not None:
        return "user info (user:password@)"
    signing = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if _is_signing(name)]
    return f"the query parameter {signing[0]!r}" if signing else None


def without_credentials(source: str) -> str:
    """``source`` without user info and signing parameters: what names the file, which a URL
    signed again keeps. A source with neither comes back unchanged, character for character
    (its data key, and so its run key, stay what they were before this rule)."""
    if credentials_in(source) is None:
        return source
    parts = urlsplit(source)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    kept = [
        (name, value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not _is_signing(name)
    ]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept), parts.fragment))
