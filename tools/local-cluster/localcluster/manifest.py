"""One step from an image's manifest (or index) towards its config digest, the image id.

images.sh follows containerd's content store with it: ``ctr content get <digest> | python3 -m
localcluster.manifest`` prints ``config <digest>`` for an image manifest (docker v2 or OCI) and
``index <digest>`` for an index or manifest list (its linux/amd64 entry, else its first), which
images.sh then fetches in turn. Standard library only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any


class ManifestError(ValueError):
    """The JSON is neither an image manifest nor an index; the message says what it lacks."""


def next_step(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """(``"config"``, digest) for an image manifest; (``"index"``, digest of the manifest to
    read next) for an index. Raises ManifestError when neither shape fits."""
    if "manifests" in manifest:
        entries = manifest["manifests"]
        if not entries:
            raise ManifestError("the index lists no manifests")
        amd64 = [
            d
            for d in entries
            if d.get("platform", {}).get("os") == "linux"
            and d.get("platform", {}).get("architecture") == "amd64"
        ]
        return "index", (amd64 or entries)[0]["digest"]
    try:
        return "config", manifest["config"]["digest"]
    except (KeyError, TypeError):
        raise ManifestError(
            "neither 'manifests' (an index) nor 'config.digest' (a manifest) is there"
        ) from None


def main() -> int:
    try:
        kind, digest = next_step(json.load(sys.stdin))
    except (ValueError, KeyError) as err:  # ManifestError, bad JSON, an entry without digest
        print(f"localcluster.manifest: {err}", file=sys.stderr)
        return 1
    print(kind, digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
