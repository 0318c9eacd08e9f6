"""GitHub Actions' way into the account without stored keys: an OIDC identity provider (IdP) for
GitHub's token issuer, and a RAM role that only one repository's pull-request runs may assume,
with the read-only policies a ``pulumi preview`` of the main stack needs
(.github/workflows/preview.yml exchanges the run's token for the role's STS credentials).

Created only when ``github.repository`` is set (``load_repository``). The values, and where
each comes from:

* Issuer ``https://token.actions.githubusercontent.com``: the ``iss`` of every GitHub Actions
  token (GitHub's "OpenID Connect reference").
* Client ID ``sts.aliyuncs.com``: the audience the workflow asks GitHub for (the ``audience``
  default of aliyun/configure-aliyun-credentials-action v1.0.7, action.yml). RAM accepts a
  token whose ``aud`` is one of the IdP's client IDs (IMS CreateOIDCProvider, "ClientIds"), and
  the role's ``oidc:aud`` condition names it again.
* Fingerprints: RAM wants the SHA-1 fingerprints of the issuer's HTTPS CA certificates (IMS
  CreateOIDCProvider, at most five; Alibaba Cloud's "Obtain the fingerprint of an OIDC IdP by
  using OpenSSL", https://help.aliyun.com/zh/ram/obtain-oidc-idp-fingerprints-through-openssl:
  the last certificate of the chain that the ``jwks_uri`` host serves). These are the two
  GitHub published for token.actions.githubusercontent.com (GitHub changelog 2023-06-27,
  "GitHub Actions - Update on OIDC integration with AWS"); a new chain on GitHub's side needs
  them updated here.
* Trust policy: Alibaba Cloud's "Create a RAM role for a trusted IdP"
  (https://www.alibabacloud.com/help/en/ram/user-guide/create-a-ram-role-for-a-trusted-idp):
  principal ``Federated`` = the IdP's ARN, action ``sts:AssumeRole``, conditions on
  ``oidc:iss`` (required, StringEquals, the IdP's issuer URL), ``oidc:aud`` and ``oidc:sub``.
  GitHub's ``sub`` of a run for a pull_request event is ``repo:<owner>/<name>:pull_request``,
  so no other repository, event or fork may assume the role.
* The IdP's ARN, ``acs:ram::<account ID>:oidc-provider/<name>`` (STS AssumeRoleWithOIDC's
  ``OIDCProviderArn``), is built from the account ID so that a preview shows the trust policy
  whole (the IdP's own ``arn`` output is known only once it exists).
* Policies: Alibaba Cloud's read-only system policies of the services the main stack's cloud
  layer uses (infra/cloud: ACK, VPC, ECS, NAS, SLB), the rights "read-only policies suffice for
  preview" that the workflow asks of a RAM user's keys.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

#: The issuer of GitHub Actions' OIDC tokens.
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
#: The token audience the workflow requests, the IdP's one client ID.
AUDIENCE = "sts.aliyuncs.com"
#: SHA-1 fingerprints (hex) of the issuer's CA certificates (module docstring).
FINGERPRINTS = ("6938fd4d98bab03faadb97b34396831e3780aea1", "1c58a3a8518e8759bf075b76b750d4f2df264fcd")
#: The IdP's and the role's names, fixed: one account stack per account.
OIDC_PROVIDER_NAME = "tf-mnist-github-actions"
ROLE_NAME = "tf-mnist-github-preview"
#: Hours a token may be old when it is presented (IMS IssuanceLimitTime, 1 to 168): the workflow
#: exchanges its token as soon as GitHub issues it.
ISSUANCE_LIMIT_HOURS = 1
#: Seconds the role's STS credentials last at most (RAM MaxSessionDuration, 3600 to 43200).
MAX_SESSION_SECONDS = 3600
#: Read-only system policies for a preview of the main stack.
PREVIEW_POLICIES = (
    "AliyunCSReadOnlyAccess",
    "AliyunVPCReadOnlyAccess",
    "AliyunECSReadOnlyAccess",
    "AliyunNASReadOnlyAccess",
    "AliyunSLBReadOnlyAccess",
)
#: The key, as ``pulumi config set --path`` names it.
KEY = "github.repository"
#: GitHub's rules for ``<owner>/<name>``: an owner (user or organisation login) is 1 to 39
#: letters, digits and single hyphens, not starting or ending with one; a repository name is 1
#: to 100 letters, digits, '.', '-' and '_', other than '.' and '..'.
REPOSITORY = re.compile(
    r"(?P<owner>(?=[A-Za-z0-9-]{1,39}/)[A-Za-z0-9](?:-?[A-Za-z0-9])*)/(?P<name>[A-Za-z0-9._-]{1,100})"
)
RULE = (
    "must be a GitHub repository as <owner>/<name>: the owner 1 to 39 letters, digits and single "
    "hyphens inside, the name 1 to 100 letters, digits, '.', '-' and '_' (not '.' or '..'), "
    "spelt as GitHub spells it (the role trusts the tokens whose sub is repo:<owner>/<name>:pull_request)"
)
FIX = "pulumi config set --path github.repository <owner>/<name>"


def load_repository(config: pulumi.Config, project: str) -> tuple[str | None, list[str]]:
    """``github.repository`` from the account stack's configuration, set flat
    (``pulumi config set github.repository o/n``) or with ``--path`` (``github: {repository: o/n}``).

    Returns:
        The repository (None when unset) and the violations found, each a message naming the
        key, the value and the rule (``RULE``): a value that is not ``<owner>/<name>``, two forms
        set to different values, or another key under ``github``.
    """
    name = f"'{project}:{KEY}'"
    errors: list[str] = []
    flat = config.get(KEY)
    structured: Any = None
    raw = config.get("github")
    if raw is not None:
        try:
            node = json.loads(raw)
        except ValueError:
            node = raw
        if not isinstance(node, dict):
            errors.append(
                f"Configuration '{project}:github' value '{raw}' is invalid: must hold the key "
                f"repository only.\n    fix: pulumi config rm github && {FIX}"
            )
        else:
            unknown = sorted(set(node) - {"repository"})
            if unknown:
                errors.append(
                    f"Configuration '{project}:github' has the unknown key{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(unknown)}: the only key under github is repository.\n"
                    f"    fix: pulumi config rm --path github.{unknown[0]}"
                )
            structured = node.get("repository")
    if flat is not None and structured is not None and flat != structured:
        errors.append(
            f"Configuration {name} is set twice: '{flat}' (flat) and '{structured}' (--path); "
            f"a key must be set one way only.\n    fix: pulumi config rm --path {KEY} (keeps '{flat}')"
        )
        return None, errors
    value = flat if flat is not None else structured
    if value is None:
        return None, errors
    match = REPOSITORY.fullmatch(value) if isinstance(value, str) else None
    if match is None or match.group("name") in (".", ".."):
        errors.append(f"Configuration {name} value '{value}' is invalid: {RULE}.\n    fix: {FIX}")
        return None, errors
    return value, errors


def provider_arn(account_id: str) -> str:
    """The IdP's ARN in account ``account_id`` (STS AssumeRoleWithOIDC, ``OIDCProviderArn``)."""
    return f"acs:ram::{account_id}:oidc-provider/{OIDC_PROVIDER_NAME}"


def subject(repository: str) -> str:
    """GitHub's ``sub`` claim of a pull_request run of ``repository`` (GitHub's "OpenID Connect
    reference": ``repo:<owner>/<name>:pull_request``)."""
    return f"repo:{repository}:pull_request"


def trust_policy(provider: str, repository: str) -> str:
    """The role's trust policy (RAM policy language, version 1), as compact JSON: tokens of the
    IdP ``provider`` (an ARN) issued by GitHub for this audience and a pull_request run of
    ``repository``, and no other."""
    return json.dumps(
        {
            "Statement": [
                {
                    "Action": "sts:AssumeRole",
                    "Condition": {
                        "StringEquals": {
                            "oidc:aud": AUDIENCE,
                            "oidc:iss": GITHUB_ISSUER,
                            "oidc:sub": subject(repository),
                        }
                    },
                    "Effect": "Allow",
                    "Principal": {"Federated": [provider]},
                }
            ],
            "Version": "1",
        },
        separators=(",", ":"),
    )


def account_id() -> str | None:
    """The account's ID (the provider's ``accountId`` setting, else STS GetCallerIdentity);
    None with a warning when it cannot be had (then the trust policy waits for the IdP's ARN)."""
    try:
        return str(alicloud.get_account().id)
    except Exception as error:  # no network, an API refusal
        pulumi.log.warn(
            f"could not get the account ID ({type(error).__name__}: {str(error)[:300]}); the GitHub "
            "role's trust policy names the OIDC provider by its ARN once the provider exists "
            "(`pulumi config set alicloud:accountId <ID>` shows it in a preview)"
        )
        return None


def create_github_access(repository: str) -> dict[str, pulumi.Output[Any]]:
    """The IdP, the role and its policy attachments for ``repository`` (``<owner>/<name>``).

    Returns:
        ``githubOidcProviderArn`` and ``githubRoleArn``: the workflow's repository variables
        ALICLOUD_OIDC_PROVIDER_ARN and ALICLOUD_ROLE_ARN.
    """
    provider = alicloud.ims.OidcProvider(
        OIDC_PROVIDER_NAME,
        oidc_provider_name=OIDC_PROVIDER_NAME,
        issuer_url=GITHUB_ISSUER,
        client_ids=[AUDIENCE],
        fingerprints=list(FINGERPRINTS),
        issuance_limit_time=ISSUANCE_LIMIT_HOURS,
        description=f"GitHub Actions of {repository}: pull-request previews (tf-mnist account stack)",
    )
    account = account_id()
    arn: pulumi.Input[str] = provider_arn(account) if account else provider.arn
    role = alicloud.ram.Role(
        ROLE_NAME,
        role_name=ROLE_NAME,
        assume_role_policy_document=pulumi.Output.from_input(arn).apply(
            lambda principal: trust_policy(principal, repository)
        ),
        description=f"Pull-request previews of {repository} on GitHub Actions (read-only)",
        max_session_duration=MAX_SESSION_SECONDS,
        # Its trust policy names the IdP: created after it.
        opts=pulumi.ResourceOptions(depends_on=[provider]),
    )
    for policy in PREVIEW_POLICIES:
        alicloud.ram.RolePolicyAttachment(
            f"{ROLE_NAME}-{policy}",
            role_name=role.role_name,
            policy_name=policy,
            policy_type="System",
        )
    return {"githubOidcProviderArn": provider.arn, "githubRoleArn": role.arn}
