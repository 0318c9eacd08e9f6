"""The preview job's Alibaba Cloud credentials (.github/workflows/preview.yml): OIDC when the
repository variables of the account stack's role are set, the key secrets otherwise, never a
mix of the two, and the OIDC values the same as the account program's (account/github_ci.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from account import github_ci
from tests.account.test_account_program import run_account
from tests.test_workflow import PRESENCE, WORKFLOW, _preview_job, _step, _workflow

#: The outputs aliyun/configure-aliyun-credentials-action v1.0.7 sets (its action.yml and
#: index.js, setOutput); v1.0.6, where the tag v1 points, sets none.
ACTION_OUTPUTS = ("aliyun-access-key-id", "aliyun-access-key-secret", "aliyun-security-token")
OIDC_ACTION = "aliyun/configure-aliyun-credentials-action@"


def _creds_step() -> dict:
    return next(s for s in _preview_job()["steps"] if s.get("id") == "creds")


def _oidc_step() -> dict:
    return _step(_preview_job(), uses=OIDC_ACTION)


def test_only_the_preview_job_may_request_an_oidc_token():
    wf = _workflow()
    assert "id-token" not in wf["permissions"], "the whole workflow may request OIDC tokens"
    assert _preview_job()["permissions"]["id-token"] == "write"
    test_job = wf["jobs"]["test"]
    assert "id-token" not in (test_job.get("permissions") or {}), "the test job may request OIDC tokens"


def test_oidc_needs_both_variables_and_a_pull_request_from_this_repository():
    value = _creds_step()["env"]["HAVE_OIDC"]
    assert PRESENCE.fullmatch(value), value
    terms = {term.strip() for term in value.strip("${} ").split("&&")}
    assert terms == {
        "vars.ALICLOUD_OIDC_PROVIDER_ARN != ''",
        "vars.ALICLOUD_ROLE_ARN != ''",
        "github.event.pull_request.head.repo.full_name == github.repository",
    }


def _check(tmp_path: Path, oidc: bool, keys: bool, passphrase: bool = True, backend: bool = True):
    """Run the credentials check's script with these presences; its exit status, its outputs
    (``name=value`` lines of $GITHUB_OUTPUT) and what it printed."""
    out = tmp_path / f"output-{oidc}-{keys}-{passphrase}-{backend}"
    out.write_text("")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GITHUB_OUTPUT": str(out),
        "HAVE_OIDC": str(oidc).lower(),
        "HAVE_ALICLOUD_KEYS": str(keys).lower(),
        "HAVE_PASSPHRASE": str(passphrase).lower(),
        "HAVE_BACKEND": str(backend).lower(),
    }
    proc = subprocess.run(["bash", "-euc", _creds_step()["run"]], env=env, capture_output=True, text=True)
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return proc.returncode, outputs, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "oidc, keys, auth",
    [(True, False, "oidc"), (True, True, "oidc"), (False, True, "keys")],
)
def test_oidc_wins_and_the_keys_are_the_fallback(tmp_path: Path, oidc: bool, keys: bool, auth: str):
    rc, outputs, printed = _check(tmp_path, oidc, keys)
    assert (rc, outputs) == (0, {"present": "true", "auth": auth}), printed


def test_no_credentials_skip_the_preview(tmp_path: Path):
    rc, outputs, printed = _check(tmp_path, oidc=False, keys=False)
    assert (rc, outputs) == (0, {}) and "skipping the cloud preview" in printed


def test_oidc_without_the_state_secrets_fails_naming_them(tmp_path: Path):
    rc, outputs, printed = _check(tmp_path, oidc=True, keys=False, passphrase=False)
    assert rc == 1 and outputs == {}
    assert "credentials (oidc) are set but these secrets are not: PULUMI_CONFIG_PASSPHRASE" in printed


def test_the_oidc_step_is_alibabas_action_at_a_fixed_commit():
    step = _oidc_step()
    ref = step["uses"].removeprefix(OIDC_ACTION)
    assert re.fullmatch(r"[0-9a-f]{40}", ref), f"the OIDC action is not pinned to a commit: {step['uses']}"
    assert step["if"] == "steps.creds.outputs.auth == 'oidc'"
    assert step["id"] == "oidc"
    assert {k: step["with"][k] for k in ("oidc-provider-arn", "role-to-assume")} == {
        "oidc-provider-arn": "${{ vars.ALICLOUD_OIDC_PROVIDER_ARN }}",
        "role-to-assume": "${{ vars.ALICLOUD_ROLE_ARN }}",
    }
    # The token's audience is the OIDC provider's client ID and the role's oidc:aud.
    assert step["with"]["audience"] == github_ci.AUDIENCE
    assert int(step["with"]["role-session-expiration"]) <= github_ci.MAX_SESSION_SECONDS
    assert int(step["with"]["role-session-expiration"]) >= 60 * _preview_job()["timeout-minutes"]


def test_the_oidc_credentials_reach_the_preview_step_only():
    """The action exports its credentials to every later step: it runs last before the preview."""
    steps = _preview_job()["steps"]
    preview = _step(_preview_job(), uses="pulumi/actions", with_command="preview")
    assert steps.index(_oidc_step()) == steps.index(preview) - 1


def test_the_preview_gets_credentials_of_one_kind():
    """The OIDC step's outputs when it ran (all three are then set), else the keys without a
    security token; the provider and the state backend's S3 client get the same."""
    env = _step(_preview_job(), uses="pulumi/actions", with_command="preview")["env"]
    key_id, secret, token = (f"steps.oidc.outputs.{name}" for name in ACTION_OUTPUTS)
    for names, value in (
        (("ALICLOUD_ACCESS_KEY", "AWS_ACCESS_KEY_ID"), f"${{{{ {key_id} || secrets.ALICLOUD_ACCESS_KEY }}}}"),
        (
            ("ALICLOUD_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
            f"${{{{ {secret} || secrets.ALICLOUD_SECRET_KEY }}}}",
        ),
        (("ALICLOUD_SECURITY_TOKEN", "AWS_SESSION_TOKEN"), f"${{{{ {token} }}}}"),
    ):
        for name in names:
            assert env.get(name) == value, f"the preview's {name} is {env.get(name)!r}, expected {value!r}"


def test_the_header_names_the_account_outputs_the_variables_come_from():
    run = run_account({"tf-mnist-account:github.repository": "octo-org/tf-mnist"}, account=[])
    header = "".join(line for line in WORKFLOW.read_text().splitlines(keepends=True) if line.startswith("#"))
    for output, variable in (
        ("githubOidcProviderArn", "ALICLOUD_OIDC_PROVIDER_ARN"),
        ("githubRoleArn", "ALICLOUD_ROLE_ARN"),
    ):
        assert output in run.outputs, f"the account stack has no output {output}"
        assert output in header and variable in header
    assert "github.repository" in header
