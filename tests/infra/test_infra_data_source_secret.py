"""A data.source with credentials (a presigned URL): refused in plain text, kept out of the
staging Job's command and the state's plain text when set with --secret, and signed again it
keeps the data directory and the run."""

from __future__ import annotations

import hashlib
import json

import mock_engine as me
import pytest

from infra.settings import runs
from infra.settings.url_credentials import credentials_in, without_credentials

JOB = "kubernetes:batch/v1:Job"
SECRET = "kubernetes:core/v1:Secret"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
OBJECT = "https://tf-mnist.oss-cn-hangzhou.aliyuncs.com/datasets/mnist.npz"
SIGNED = OBJECT + "?OSSAccessKeyId=LTAI5tExample&Expires=1767225600&Signature=s3cr3tSig%3D"
SIGNED_AGAIN = OBJECT + "?OSSAccessKeyId=LTAI5tExample&Expires=1767312000&Signature=an0therSig%3D"


def _staging(run: me.Run) -> dict:
    return run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    "url, what",
    [
        (SIGNED, "the query parameter 'OSSAccessKeyId'"),
        (
            OBJECT + "?x-oss-signature-version=OSS4-HMAC-SHA256&x-oss-signature=abc",
            "the query parameter 'x-oss-signature-version'",
        ),
        ("https://b.s3.amazonaws.com/mnist.npz?X-Amz-Signature=abc", "the query parameter 'X-Amz-Signature'"),
        ("https://user:pa55@mirror.example.com/mnist.npz", "user info (user:password@)"),
    ],
)
def test_a_url_with_credentials_in_plain_text_is_refused_without_its_value(dev_config, url, what):
    run = me.run_program({**dev_config, "tf-mnist:data.source": url})
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            f"Configuration 'tf-mnist:data.source' holds a credential ({what}) but is not a secret: the stack file, "
            "the staging Job and the state would hold it in plain text.",
            "    fix: pulumi config set --secret data.source <the same value>",
        ]
    )
    assert "s3cr3t" not in str(run.error) and "pa55" not in str(run.error) and "abc" not in str(run.error)
    assert run.registrations == []


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
    urls = [
        f"{OBJECT.rsplit('/', 1)[0]}/{name}?Expires=1&Signature=x{i}"
        for i, name in enumerate(
            [
                "train-images-idx3-ubyte.gz",
                "train-labels-idx1-ubyte.gz",
                "t10k-images-idx3-ubyte.gz",
                "t10k-labels-idx1-ubyte.gz",
            ]
        )
    ]
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
    assert credentials_in(expected) is None
