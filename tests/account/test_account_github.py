"""GitHub Actions' OIDC access in the account program (account/github_ci.py) under Pulumi's mock
engine: with ``github.repository`` the account gets an OIDC provider for GitHub's tokens and a
read-only role that only that repository's pull-request runs may assume; without it, nothing;
with a bad value, a message naming the key, the value and the rule before anything is created.
"""

from __future__ import annotations

import json

import pytest

from account import github_ci, program
from tests.account.github_trust import REPOSITORY, expected_trust_policy
from tests.account.test_account_program import (
    ACCOUNT_ID,
    ARN_ACCOUNT,
    ATTACHMENT,
    GET_ACCOUNT,
    OIDC_PROVIDER,
    ROLE,
    Run,
    run_account,
)

FLAT = {"tf-mnist-account:github.repository": REPOSITORY}
READ_ONLY = [
    "AliyunCSReadOnlyAccess",
    "AliyunECSReadOnlyAccess",
    "AliyunNASReadOnlyAccess",
    "AliyunSLBReadOnlyAccess",
    "AliyunVPCReadOnlyAccess",
]


def _one(run: Run, type_: str, name: str) -> dict:
    (found,) = [r for r in run.registrations if r["type"] == type_ and r["name"] == name]
    return found


def _trust(run: Run) -> dict:
    return json.loads(_one(run, ROLE, "tf-mnist-github-preview")["inputs"]["assumeRolePolicyDocument"])


def test_without_a_repository_the_account_gets_no_github_access():
    run = run_account(account=[])
    assert run.error is None
    assert run.names(OIDC_PROVIDER) == [] and "tf-mnist-github-preview" not in run.names(ROLE)
    assert GET_ACCOUNT not in run.tokens()
    assert set(run.outputs) == {"roles", "services"}


def test_a_repository_gets_an_oidc_provider_for_githubs_tokens():
    run = run_account(FLAT, account=[])
    assert run.error is None
    provider = _one(run, OIDC_PROVIDER, "tf-mnist-github-actions")
    inputs = provider["inputs"]
    assert inputs["oidcProviderName"] == "tf-mnist-github-actions"
    assert inputs["issuerUrl"] == "https://token.actions.githubusercontent.com"
    assert inputs["clientIds"] == ["sts.aliyuncs.com"]
    assert inputs["fingerprints"] == [
        "6938fd4d98bab03faadb97b34396831e3780aea1",
        "1c58a3a8518e8759bf075b76b750d4f2df264fcd",
    ]
    assert inputs["issuanceLimitTime"] == 1  # hours a token may be old
    assert REPOSITORY in inputs["description"]
    # The account's, unlike ACK's roles: destroying the stack takes GitHub's access away.
    assert provider["retain_on_delete"] is False


def test_only_the_repositorys_pull_request_runs_may_assume_the_role():
    run = run_account(FLAT, account=[])
    trust = _trust(run)
    # The IdP's ARN from getAccount's ID, known in a preview.
    assert trust == expected_trust_policy(ACCOUNT_ID)
    role = _one(run, ROLE, "tf-mnist-github-preview")
    assert role["inputs"]["roleName"] == "tf-mnist-github-preview"
    assert role["inputs"]["maxSessionDuration"] == 3600
    assert role["retain_on_delete"] is False


def test_the_role_gets_read_only_policies_only():
    run = run_account(FLAT, account=[])
    attached = [r["inputs"] for r in run.registrations if r["type"] == ATTACHMENT]
    mine = [a for a in attached if a["roleName"] == "tf-mnist-github-preview"]
    assert sorted(a["policyName"] for a in mine) == READ_ONLY
    assert all(a["policyType"] == "System" and a["policyName"].endswith("ReadOnlyAccess") for a in mine)


def test_the_arns_are_the_stack_outputs_the_workflow_takes():
    run = run_account(FLAT, account=[])
    assert (
        run.outputs["githubOidcProviderArn"]
        == f"acs:ram::{ARN_ACCOUNT}:oidc-provider/tf-mnist-github-actions"
    )
    assert run.outputs["githubRoleArn"] == f"acs:ram::{ARN_ACCOUNT}:role/tf-mnist-github-preview"


def test_the_path_form_is_the_same_key():
    path = run_account({"tf-mnist-account:github": json.dumps({"repository": REPOSITORY})}, account=[])
    assert path.error is None
    assert _trust(path) == _trust(run_account(FLAT, account=[]))


def test_a_preview_plans_the_same_trust_policy():
    assert _trust(run_account(FLAT, account=[], preview=True)) == _trust(run_account(FLAT, account=[]))


def test_without_the_account_id_the_trust_names_the_providers_own_arn():
    run = run_account(FLAT, account=[], account_id=None, preview=True)
    assert run.error is None
    assert _trust(run)["Statement"][0]["Principal"] == {
        "Federated": [f"acs:ram::{ARN_ACCOUNT}:oidc-provider/tf-mnist-github-actions"]
    }
    assert any("could not get the account ID" in m and "alicloud:accountId" in m for m in run.warnings)


@pytest.mark.parametrize(
    "value",
    [
        "a/b",
        "Octo-Org/tf_mnist.v2",
        "o" * 39 + "/" + "n" * 100,
        "o-" * 19 + "o/tf-mnist",
        "octo-org/.github",
    ],
)
def test_repositories_github_allows_are_taken(value: str):
    run = run_account({"tf-mnist-account:github.repository": value}, account=[])
    assert run.error is None
    assert (
        _trust(run)["Statement"][0]["Condition"]["StringEquals"]["oidc:sub"] == f"repo:{value}:pull_request"
    )


@pytest.mark.parametrize(
    "value",
    [
        "octo-org",  # no name
        "https://github.com/octo-org/tf-mnist",  # a URL
        "octo-org/tf-mnist/",
        "octo-org/tf mnist",
        "-octo/tf-mnist",  # an owner starts with a letter or digit
        "octo-/tf-mnist",
        "octo--org/tf-mnist",  # single hyphens only
        "o" * 40 + "/tf-mnist",  # 39 characters at most
        "o-" * 20 + "o/tf-mnist",  # hyphens count
        "octo-org/" + "n" * 101,  # 100 at most
        "octo-org/..",
        "octo-org/*",  # a wildcard would widen the trust
        "",
    ],
)
def test_a_bad_repository_is_refused_with_the_key_the_value_and_the_rule(value: str):
    run = run_account({"tf-mnist-account:github.repository": value}, account=[])
    assert isinstance(run.error, program.AccountError)
    message = str(run.error)
    assert f"Configuration 'tf-mnist-account:github.repository' value '{value}' is invalid: " in message
    assert github_ci.RULE in message
    assert "fix: pulumi config set --path github.repository <owner>/<name>" in message
    assert run.registrations == [] and run.calls == []


def test_a_repository_set_two_ways_differently_is_refused():
    run = run_account(
        {**FLAT, "tf-mnist-account:github": json.dumps({"repository": "octo-org/other"})}, account=[]
    )
    message = str(run.error)
    assert "'tf-mnist-account:github.repository' is set twice: 'octo-org/tf-mnist' (flat)" in message
    assert "'octo-org/other' (--path)" in message
    assert run.registrations == []


def test_the_same_value_set_two_ways_is_taken():
    run = run_account({**FLAT, "tf-mnist-account:github": json.dumps({"repository": REPOSITORY})}, account=[])
    assert run.error is None and run.outputs["githubRoleArn"]


@pytest.mark.parametrize(
    "github, wanted",
    [
        ({"repo": REPOSITORY}, "unknown key repo: the only key under github is repository"),
        ('"octo-org/tf-mnist"', "'tf-mnist-account:github' value '\"octo-org/tf-mnist\"' is invalid"),
    ],
)
def test_anything_else_under_github_is_refused(github, wanted: str):
    raw = github if isinstance(github, str) else json.dumps(github)
    run = run_account({"tf-mnist-account:github": raw}, account=[])
    assert wanted in str(run.error)
    assert run.registrations == []


def test_a_bad_repository_is_reported_with_the_other_bad_values():
    run = run_account(
        {"tf-mnist-account:activateServices": "maybe", "tf-mnist-account:github.repository": "octo-org"}
    )
    message = str(run.error)
    assert message.startswith("2 invalid configuration values; nothing was changed:")
    assert "'tf-mnist-account:github.repository' value 'octo-org' is invalid" in message
