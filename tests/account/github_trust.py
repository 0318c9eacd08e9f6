"""The trust policy the GitHub role must carry, spelt out literally (not built by
account/github_ci.py, which it checks): shared by the mock-engine test and the real preview."""

from __future__ import annotations

#: The repository whose pull-request runs the tests' role trusts.
REPOSITORY = "octo-org/tf-mnist"


def expected_trust_policy(account_id: str) -> dict:
    """The role's trust policy in account ``account_id``, as parsed JSON: only tokens of the
    account's GitHub IdP, issued by GitHub for the STS audience to a pull_request run of
    REPOSITORY, may assume it."""
    return {
        "Statement": [
            {
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {
                        "oidc:aud": "sts.aliyuncs.com",
                        "oidc:iss": "https://token.actions.githubusercontent.com",
                        "oidc:sub": f"repo:{REPOSITORY}:pull_request",
                    }
                },
                "Effect": "Allow",
                "Principal": {"Federated": [f"acs:ram::{account_id}:oidc-provider/tf-mnist-github-actions"]},
            }
        ],
        "Version": "1",
    }
