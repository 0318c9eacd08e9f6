"""A data.source URL with more than scheme, host, port and path (a presigned URL, a token, user
info): refused in plain text whoever signed it, kept out of the staging Job's command and the
state's plain text when set with --secret, and signed again it keeps the data directory and the run."""

from __future__ import annotations

import hashlib
import json

import mock_engine as me
import pytest

from infra import runs
from infra.url_credentials import not_plain, redacted, without_credentials

JOB = "kubernetes:batch/v1:Job"
SECRET = "kubernetes:core/v1:Secret"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
OBJECT = "https://tf-mnist.oss-cn-hangzhou.aliyuncs.com/datasets/mnist.npz"
SIGNED = OBJECT + "?OSSAccessKeyId=LTAI5tExample&Expires=1767225600&Signature=s3cr3tSig%3D"
IDX_FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]
SIGNED_AGAIN = OBJECT + "?OSSAccessKeyId=LTAI5tExample&Expires=1767312000&Signature=an0therSig%3D"


def _staging(run: me.Run) -> dict:
    return run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"][0]


#: What a plain data.source may not hold, whoever signs or serves it: each is refused by one
#: rule (scheme, host, port and path only), with no list of parameter names to keep up with.
NOT_PLAIN = [
    (SIGNED, OBJECT + "?<hidden>", "a query string (?...)"),
    (
        OBJECT + "?x-oss-signature-version=OSS4-HMAC-SHA256&x-oss-signature=s3cr3t",
        OBJECT + "?<hidden>",
        "a query string (?...)",
    ),
    (
        "https://b.s3.amazonaws.com/mnist.npz?X-Amz-Signature=s3cr3t",
        "https://b.s3.amazonaws.com/mnist.npz?<hidden>",
        "a query string (?...)",
    ),
    # Azure Blob SAS, Tencent COS, a bare token, an unknown name: not signing names the stack knows.
    (
        "https://acct.blob.core.windows.net/data/mnist.npz?sv=2022-11-02&se=2027-01-01&sp=r&sig=s3cr3t%3D",
        "https://acct.blob.core.windows.net/data/mnist.npz?<hidden>",
        "a query string (?...)",
    ),
    (
        "https://b-1250000000.cos.ap-guangzhou.myqcloud.com/mnist.npz?q-sign-algorithm=sha1&q-signature=s3cr3t",
        "https://b-1250000000.cos.ap-guangzhou.myqcloud.com/mnist.npz?<hidden>",
        "a query string (?...)",
    ),
    (
        "https://mirror.example.com/mnist.npz?token=s3cr3t",
        "https://mirror.example.com/mnist.npz?<hidden>",
        "a query string (?...)",
    ),
    (
        "https://mirror.example.com/mnist.npz?",
        "https://mirror.example.com/mnist.npz?<hidden>",
        "a query string (?...)",
    ),
    (
        "https://mirror.example.com/mnist.npz#s3cr3t",
        "https://mirror.example.com/mnist.npz#<hidden>",
        "a fragment (#...)",
    ),
    (
        "https://user:s3cr3t@mirror.example.com/mnist.npz",
        "https://<hidden>@mirror.example.com/mnist.npz",
        "user info (user:password@)",
    ),
    (
        "http://user:s3cr3t@10.0.0.5:8080/mnist/",
        "http://<hidden>@10.0.0.5:8080/mnist/",
        "user info (user:password@)",
    ),
    (
        "https://s3cr3t@mirror.example.com/mnist.npz",
        "https://<hidden>@mirror.example.com/mnist.npz",
        "user info (user:password@)",
    ),
]


def _not_plain_error(shown: str, what: str) -> str:
    return "\n".join(
        [
            HEADER_1,
            f"Configuration 'tf-mnist:data.source' value '{shown}' is not a secret but holds {what}: a data.source "
            "in plain text is an http(s) URL of scheme, host, port and path only, since user info, a query or a "
            "fragment carries a credential whenever the server asks for one (a presigned URL's signature, an Azure "
            "SAS sig, a token), which the stack file, the staging Job's command and the state would hold in plain "
            "text.",
            "    fix: pulumi config set --secret data.source <the same value>",
        ]
    )


@pytest.mark.parametrize("url, shown, what", NOT_PLAIN)
def test_a_url_with_more_than_a_path_in_plain_text_is_refused_without_its_secret(
    dev_config, url, shown, what
):
    run = me.run_program({**dev_config, "tf-mnist:data.source": url})
    assert str(run.error) == _not_plain_error(shown, what)
    assert "s3cr3t" not in str(run.error)
    assert run.registrations == []


@pytest.mark.parametrize("url, shown, what", NOT_PLAIN)
def test_any_url_is_accepted_as_a_secret_and_kept_out_of_the_command(dev_config, url, shown, what):
    run = me.run_program({**dev_config, "tf-mnist:data.source": me.secret(url)})
    assert run.error is None, run.error
    assert "--source" not in _staging(run)["command"]
    others = [r.inputs for r in run.registrations if (r.type, r.name) != (SECRET, "mnist-data-source")]
    assert "s3cr3t" not in json.dumps(others, default=str) + json.dumps(run.outputs, default=str)


def test_a_list_in_plain_text_is_shown_with_each_urls_secret_hidden(dev_config):
    base = "https://mirror.example.com/mnist"
    urls = [f"{base}/{name}" for name in IDX_FILES]
    urls[2] += "?sig=s3cr3t"
    run = me.run_program({**dev_config, "tf-mnist:data.source": json.dumps(urls)})
    shown = json.dumps([*urls[:2], f"{base}/{IDX_FILES[2]}?<hidden>", urls[3]], separators=(",", ":"))
    assert str(run.error) == _not_plain_error(shown, "a query string (?...)")


def test_a_secret_source_reaches_staging_through_a_secret_only(dev_config):
    run = me.run_program(
        {**dev_config, "tf-mnist:data.source": SIGNED}, secret_keys=("tf-mnist:data.source",)
    )
    assert run.error is None, run.error
    container = _staging(run)
    assert container["command"][:7] == [
        "python",
        "-m",
        "trainer.stage",
        "--dest",
        run.outputs["dataDir"],
        "--sources_env",
        "DATA_SOURCES",
    ]
    assert "--source" not in container["command"]
    assert {
        "name": "DATA_SOURCES",
        "valueFrom": {"secretKeyRef": {"name": "mnist-data-source", "key": "sources"}},
    } in container["env"]
    secret = run.one(SECRET, "mnist-data-source")
    assert me.is_secret_value(secret.inputs["stringData"])
    assert json.loads(me.to_manifest(secret.inputs["stringData"])["sources"]) == [SIGNED]
    # Nowhere else: no other object's inputs, and no output, holds the signature.
    others = [r.inputs for r in run.registrations if r is not secret]
    assert "s3cr3tSig" not in json.dumps(others, default=str) + json.dumps(run.outputs, default=str)


def test_a_list_of_urls_set_as_a_secret_goes_into_the_secret_as_that_list(dev_config):
    urls = [f"{OBJECT.rsplit('/', 1)[0]}/{name}?Expires=1&Signature=x{i}" for i, name in enumerate(IDX_FILES)]
    run = me.run_program(
        {**dev_config, "tf-mnist:data.source": json.dumps(urls)}, secret_keys=("tf-mnist:data.source",)
    )
    assert run.error is None, run.error
    secret = run.one(SECRET, "mnist-data-source")
    assert json.loads(me.to_manifest(secret.inputs["stringData"])["sources"]) == urls


def test_signed_again_the_source_keeps_its_data_directory_and_run(dev_config):
    first = me.run_program(
        {**dev_config, "tf-mnist:data.source": SIGNED}, secret_keys=("tf-mnist:data.source",)
    )
    again = me.run_program(
        {**dev_config, "tf-mnist:data.source": SIGNED_AGAIN}, secret_keys=("tf-mnist:data.source",)
    )
    plain = me.run_program({**dev_config, "tf-mnist:data.source": OBJECT})
    assert first.outputs["dataDir"] == again.outputs["dataDir"] == plain.outputs["dataDir"]
    assert first.outputs["runDir"] == again.outputs["runDir"] == plain.outputs["runDir"]


def test_a_plain_source_keeps_its_key_and_staging_command(dev_config):
    # The data key of a URL without credentials is the SHA-256 of the URL as JSON, as it was
    # before credentials were removed from it: an upgraded stack keeps its data and its run.
    assert runs.source_key(OBJECT) == hashlib.sha256(json.dumps(OBJECT).encode()).hexdigest()[:12]
    assert runs.source_key("/data/mnist-full") == hashlib.sha256(b'"/data/mnist-full"').hexdigest()[:12]
    run = me.run_program({**dev_config, "tf-mnist:data.source": OBJECT})
    assert _staging(run)["command"][5:7] == ["--source", OBJECT]
    assert not [r for r in run.registrations if r.type == SECRET and r.name == "mnist-data-source"]


@pytest.mark.parametrize(
    "url, expected",
    [
        (SIGNED, OBJECT),
        (OBJECT + "?versionId=7&Signature=x&Expires=1", OBJECT + "?versionId=7"),
        (
            "https://u:p@Mirror.Example.com:8443/m.npz?X-Goog-Signature=1",
            "https://mirror.example.com:8443/m.npz",
        ),
        ("https://[::1]:8080/m.npz?X-Amz-Date=1", "https://[::1]:8080/m.npz"),
        (OBJECT + "?raw=true", OBJECT + "?raw=true"),
        ("/data/mnist", "/data/mnist"),
    ],
)
def test_without_credentials_keeps_what_names_the_file(url, expected):
    assert without_credentials(url) == expected
    assert without_credentials(expected) == expected  # what names the file, once


@pytest.mark.parametrize("url, shown, what", NOT_PLAIN)
def test_not_plain_names_the_part_and_redacted_hides_it(url, shown, what):
    assert not_plain(url) == what
    assert redacted(url) == shown


@pytest.mark.parametrize(
    "source", [OBJECT, "http://10.244.0.1:8080/", "https://[::1]:8080/m.npz", "/data/mnist"]
)
def test_scheme_host_port_and_path_are_plain(source):
    assert not_plain(source) is None and redacted(source) == source
