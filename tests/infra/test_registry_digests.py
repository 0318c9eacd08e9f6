"""infra/registry_digests.py over real HTTP: a tag's digest from a registry (tests/infra/
registry_stub.py on loopback), through its Bearer or Basic challenge, and each way it can fail."""

from __future__ import annotations

import socket

import pytest
import registry_stub as stub

from infra.registry_digests import (
    MANIFEST_TYPES,
    DigestUnavailable,
    RegistryCredentials,
    Repository,
    bearer_token,
    lookup_digest,
    repository,
)


@pytest.fixture
def registry():
    with stub.served(
        stub.Registry(
            public={"team/trainer": {"2.21.0-cpu": stub.digest(1)}},
            bearer={"team/board": {"2.21.0": stub.digest(2)}, "team/private": {"1": stub.digest(3)}},
            basic={"team/basic": {"1": stub.digest(4)}},
            private={"team/private"},
            no_digest={"team/nodigest"},
        )
    ) as served:
        yield served


def login(server: str) -> RegistryCredentials:
    return RegistryCredentials(server, *stub.LOGIN)


@pytest.mark.parametrize(
    ("image", "host", "api", "path", "tag"),
    [
        ("python:3.11-slim", "docker.io", "https://registry-1.docker.io", "library/python", "3.11-slim"),
        ("ubuntu", "docker.io", "https://registry-1.docker.io", "library/ubuntu", "latest"),
        ("docker.io/team/x:1", "docker.io", "https://registry-1.docker.io", "team/x", "1"),
        (
            "index.docker.io/library/python:3",
            "docker.io",
            "https://registry-1.docker.io",
            "library/python",
            "3",
        ),
        (
            "registry.example.com/team/trainer:2.21.0-cpu",
            "registry.example.com",
            "https://registry.example.com",
            "team/trainer",
            "2.21.0-cpu",
        ),
        (
            "registry.example.com:5000/team/x",
            "registry.example.com:5000",
            "https://registry.example.com:5000",
            "team/x",
            "latest",
        ),
        ("localhost:5000/a/b:2", "localhost:5000", "http://localhost:5000", "a/b", "2"),
        ("127.0.0.1:5000/a:3", "127.0.0.1:5000", "http://127.0.0.1:5000", "a", "3"),
    ],
)
def test_a_reference_names_its_registry_repository_and_tag_as_a_node_reads_it(image, host, api, path, tag):
    assert repository(image) == Repository(host=host, api=api, path=path, tag=tag)


def test_a_reference_by_digest_has_nothing_to_resolve():
    with pytest.raises(ValueError, match="names a digest already"):
        repository("python:3.11-slim@" + stub.digest(1))


def test_a_public_tag_answers_its_digest_to_one_head_with_every_manifest_type(registry):
    assert lookup_digest(f"{registry.host}/team/trainer:2.21.0-cpu") == stub.digest(1)
    ((method, path, headers),) = registry.requests
    assert (method, path) == ("HEAD", "/v2/team/trainer/manifests/2.21.0-cpu")
    assert [t.strip() for t in headers["Accept"].split(",")] == list(MANIFEST_TYPES)
    assert "Authorization" not in headers


def test_a_bearer_challenge_is_answered_with_an_anonymous_token(registry):
    assert lookup_digest(f"{registry.host}/team/board:2.21.0") == stub.digest(2)
    methods = [(m, p.split("?")[0]) for m, p, _ in registry.requests]
    assert methods == [
        ("HEAD", "/v2/team/board/manifests/2.21.0"),
        ("GET", "/token"),
        ("HEAD", "/v2/team/board/manifests/2.21.0"),
    ]
    token_path = registry.requests[1][1]
    assert "scope=repository%3Ateam%2Fboard%3Apull" in token_path and "service=stub-registry" in token_path
    assert "Authorization" not in registry.requests[1][2]
    assert registry.requests[2][2]["Authorization"] == "Bearer token-for-team/board"


def test_a_private_repository_gets_its_token_with_the_stack_s_login(registry):
    assert lookup_digest(f"{registry.host}/team/private:1", login(registry.host)) == stub.digest(3)
    assert registry.requests[1][2]["Authorization"].startswith("Basic ")


def test_a_private_repository_without_a_login_is_a_401_that_names_the_realm(registry):
    with pytest.raises(DigestUnavailable) as raised:
        lookup_digest(f"{registry.host}/team/private:1")
    assert raised.value.status == 401
    assert f"the token realm: http://{registry.host}/token answered HTTP 401" in str(raised.value)


def test_a_login_is_offered_to_its_own_registry_only(registry):
    with pytest.raises(DigestUnavailable):
        lookup_digest(f"{registry.host}/team/private:1", login("registry.example.com"))
    assert all(
        "Authorization" not in headers for _, path, headers in registry.requests if path.startswith("/token")
    )


def test_a_basic_challenge_is_answered_with_the_login(registry):
    assert lookup_digest(f"{registry.host}/team/basic:1", login(f"http://{registry.host}/")) == stub.digest(4)
    with pytest.raises(DigestUnavailable) as raised:
        lookup_digest(f"{registry.host}/team/basic:1")
    assert raised.value.status == 401
    assert f'http://{registry.host}/v2/team/basic/manifests/1 answered HTTP 401 (Basic realm="stub")' in str(
        raised.value
    )


def test_a_redirect_keeps_the_head_and_leaves_the_login_behind_on_another_host(registry):
    port = registry.host.rsplit(":", 1)[1]
    # localhost is another host name than 127.0.0.1 for the client, though the same stub serves it.
    registry.redirects["team/basic"] = f"http://localhost:{port}/v2/team/trainer/manifests/2.21.0-cpu"
    assert lookup_digest(f"{registry.host}/team/basic:1", login(registry.host)) == stub.digest(1)
    method, path, headers = registry.requests[-1]
    assert (method, path) == ("HEAD", "/v2/team/trainer/manifests/2.21.0-cpu")
    assert headers["Host"] == f"localhost:{port}" and "Authorization" not in headers
    assert registry.requests[-2][2]["Authorization"].startswith("Basic ")


def test_an_unknown_tag_is_a_404_that_names_the_url(registry):
    with pytest.raises(DigestUnavailable) as raised:
        lookup_digest(f"{registry.host}/team/trainer:9.9.9")
    assert raised.value.status == 404
    assert str(raised.value) == f"http://{registry.host}/v2/team/trainer/manifests/9.9.9 answered HTTP 404"


def test_an_answer_without_a_digest_header_is_refused(registry):
    with pytest.raises(DigestUnavailable, match="answered HTTP 200 without a Docker-Content-Digest header"):
        lookup_digest(f"{registry.host}/team/nodigest:1")


def test_a_registry_that_does_not_answer_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port once the socket is closed: the connection is refused.
    with pytest.raises(DigestUnavailable) as raised:
        lookup_digest(f"127.0.0.1:{port}/team/trainer:1")
    assert raised.value.status is None
    assert f"http://127.0.0.1:{port}/v2/team/trainer/manifests/1 could not be reached" in str(raised.value)


def test_a_token_realm_off_loopback_must_be_https():
    repo = repository("registry.example.com/team/x:1")
    with pytest.raises(
        DigestUnavailable, match="token realm http://auth.example.com/token is not an https URL"
    ):
        bearer_token('Bearer realm="http://auth.example.com/token",service="x"', repo, None)
