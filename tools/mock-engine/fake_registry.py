"""What the registries answer the program for image tags under the mock engine
(tools/mock-engine/program_mocks.py run_program's ``registry``)."""

from __future__ import annotations

import hashlib


def fake_digest(image: str) -> str:
    """The digest ``FakeRegistry`` gives ``image``'s tag unless told another: sha256 of the name."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def pinned(image: str, digest: str | None = None) -> str:
    """What the pods run of ``image`` (a tag) after `pulumi up` resolved it: ``<image>@<digest>``."""
    return f"{image}@{digest or fake_digest(image)}"


class FakeRegistry:
    """What the registries answer the program for tags (infra/image_pins.py's lookup): a tag
    of ``digests`` its digest, one of ``errors`` that DigestUnavailable, any other
    ``fake_digest``. ``asked`` records each ``(image, login)`` asked, in order. The real
    lookup over HTTP is tested on its own (tests/infra/test_registry_digests.py)."""

    def __init__(self, digests: dict | None = None, errors: dict | None = None) -> None:
        self.digests = dict(digests or {})
        self.errors = dict(errors or {})
        self.asked: list = []

    def lookup(self, image: str, login) -> str:
        self.asked.append((image, login))
        if image in self.errors:
            raise self.errors[image]
        return self.digests.get(image) or fake_digest(image)
