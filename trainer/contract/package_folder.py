"""The folder a package set is installed into on the shared volume: ``<set>-<digest>``, the
digest being DIGEST_DIGITS hex digits of the SHA-256 of the set's requirement file.

Two sides must agree on it: the setup Job installs each set there (trainer/install.py) and the
stack points the pods' PYTHONPATH at it (infra/bundle.py). A changed requirement file is a
new folder, so a set is never changed under a running pod. Standard library only.
"""

from __future__ import annotations

import hashlib

#: Hex digits of the digest: 48 bits, as the stack's other content names (infra/bundle.py).
DIGEST_DIGITS = 12


def requirements_digest(requirements: bytes) -> str:
    """DIGEST_DIGITS lower-case hex digits of the SHA-256 of ``requirements`` (a requirement
    file's bytes)."""
    return hashlib.sha256(requirements).hexdigest()[:DIGEST_DIGITS]


def folder_name(package_set: str, digest: str) -> str:
    """``<package_set>-<digest>``, e.g. ``cpu-0123456789ab``: the name of the set's folder (its
    packages under ``<folder>/site``); ``digest`` is ``requirements_digest`` of the set's
    requirement file."""
    return f"{package_set}-{digest}"
