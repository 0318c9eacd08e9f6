"""The account preparation (account/, project tf-mnist-account) through the real CLI and
pulumi-resource-alicloud, offline: what ``pulumi preview`` shows a fresh account would get.

With fake keys and no network the provider still checks every role and attachment (their
inputs against its schema), and the program makes no call that needs the cloud in a preview:
opening ACK and NAS waits for ``pulumi up``, and ``existingRoles`` stands in for the account's
role list (RAM's ListRoles). With ``github.repository`` it also plans GitHub Actions' OIDC
provider and role, whose trust policy is whole in a preview (the account ID comes from the
provider's ``accountId`` setting). tests/account/ covers the rest of the program's logic under
the mock engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from account.roles import MANAGED_NAMES, ROLES
from tests.account.github_trust import REPOSITORY, expected_trust_policy

from .conftest import REPO, require_binary
from .engine import PulumiProject, Toolchain, alicloud_offline_config

pytestmark = pytest.mark.engine

ROLE = "alicloud:ram/role:Role"
ATTACHMENT = "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment"
LINKED = "alicloud:resourcemanager/serviceLinkedRole:ServiceLinkedRole"
OIDC_PROVIDER = "alicloud:ims/oidcProvider:OidcProvider"
QUICK = sorted(role.name for role in ROLES if role.quick)


@pytest.fixture
def account_project(toolchain: Toolchain, pulumi_home: Path, tmp_path: Path) -> Iterator[PulumiProject]:
    """A copy of account/ with a stack ``acct`` and the offline alicloud provider settings."""
    require_binary(toolchain, "pulumi-resource-alicloud")
    project = PulumiProject(
        REPO, tmp_path, toolchain, include=("account", "infra"), pulumi_home=pulumi_home, venv=REPO / ".venv"
    )
    # The project is account/ in the copy; its Pulumi.yaml finds the venv at ../.venv, where
    # PulumiProject linked it, and its __main__ finds the account package (and infra, whose
    # stack_state.py it uses) one level up.
    project.dir = project.dir / "account"
    project.init_stack("acct")
    for key, value in alicloud_offline_config().items():
        project.set_config(key, value, secret=key.endswith("Key"))
    yield project


def test_a_fresh_account_previews_every_role_and_attachment(account_project: PulumiProject) -> None:
    account_project.set_config("existingRoles", "[]")
    preview = account_project.preview()
    assert preview.returncode == 0, preview.messages()
    roles = {r["inputs"]["roleName"]: r for r in preview.resources(ROLE)}
    assert sorted(roles) == sorted(role.name for role in ROLES)
    attachments = {r["inputs"]["roleName"]: r["inputs"] for r in preview.resources(ATTACHMENT)}
    for role in ROLES:
        trust = json.loads(roles[role.name]["inputs"]["assumeRolePolicyDocument"])
        assert trust["Statement"][0]["Principal"]["Service"] == [role.service]
        assert roles[role.name].get("retainOnDelete") is True
        assert {k: attachments[role.name][k] for k in ("policyName", "policyType")} == {
            "policyName": f"{role.name}Policy",
            "policyType": "System",
        }
    assert {s["op"] for s in preview.steps} == {"create"}
    # Auto Scaling (ESS), which the GPU pool's autoscaling needs: its service-linked role.
    (linked,) = preview.resources(LINKED)
    assert linked["inputs"]["serviceName"] == "ess.aliyuncs.com" and linked.get("retainOnDelete") is True
    # Opening the services is an invoke that needs the cloud: the preview only announces it.
    assert "`pulumi up` opens ACK Pro (OpenAckService, type propayasgo) and NAS" in preview.messages()


def test_after_quick_authorization_the_preview_adds_the_autoscaler_roles(
    account_project: PulumiProject,
) -> None:
    account_project.set_config("existingRoles", json.dumps(QUICK))
    account_project.set_config("activateServices", "false")
    preview = account_project.preview()
    assert preview.returncode == 0, preview.messages()
    assert sorted(r["inputs"]["roleName"] for r in preview.resources(ROLE)) == [
        "AliyunCSManagedAutoScalerRole",
        "AliyunOOSLifecycleHook4CSRole",
    ]
    assert len(preview.resources(ATTACHMENT)) == 2
    assert "opens ACK Pro" not in preview.messages()
    assert preview.resources(LINKED) == []  # activateServices false: Auto Scaling too


def test_a_misspelt_role_is_refused_before_anything_is_planned(account_project: PulumiProject) -> None:
    account_project.set_config("existingRoles", '["AliyunCSDefaultRol"]')
    output = account_project.preview().refused_output()
    assert "AliyunCSDefaultRol is not a role this program manages" in output


def test_a_repository_previews_githubs_oidc_provider_and_a_role_for_its_pull_requests(
    account_project: PulumiProject,
) -> None:
    account_project.set_config("existingRoles", json.dumps(list(MANAGED_NAMES)))
    account_project.set_config("activateServices", "false")
    account_project.set_config("github.repository", REPOSITORY, path=True)
    preview = account_project.preview()
    assert preview.returncode == 0, preview.messages()
    (provider,) = preview.resources(OIDC_PROVIDER)
    assert {
        k: provider["inputs"].get(k) for k in ("oidcProviderName", "issuerUrl", "clientIds", "fingerprints")
    } == {
        "oidcProviderName": "tf-mnist-github-actions",
        "issuerUrl": "https://token.actions.githubusercontent.com",
        "clientIds": ["sts.aliyuncs.com"],
        "fingerprints": [
            "6938fd4d98bab03faadb97b34396831e3780aea1",
            "1c58a3a8518e8759bf075b76b750d4f2df264fcd",
        ],
    }
    (role,) = preview.resources(ROLE)  # every ACK role exists: only GitHub's is planned
    assert role["inputs"]["roleName"] == "tf-mnist-github-preview"
    account_id = alicloud_offline_config()["alicloud:accountId"]
    assert json.loads(role["inputs"]["assumeRolePolicyDocument"]) == expected_trust_policy(account_id)
    attached = {(a["inputs"]["roleName"], a["inputs"]["policyName"]) for a in preview.resources(ATTACHMENT)}
    assert attached == {
        ("tf-mnist-github-preview", f"Aliyun{service}ReadOnlyAccess")
        for service in ("CS", "VPC", "ECS", "NAS", "SLB")
    }
    assert {s["op"] for s in preview.steps} == {"create"}


def test_a_bad_repository_is_refused_before_anything_is_planned(account_project: PulumiProject) -> None:
    account_project.set_config("existingRoles", "[]")
    account_project.set_config("github.repository", "octo-org", path=True)
    output = account_project.preview().refused_output()
    assert "'tf-mnist-account:github.repository' value 'octo-org' is invalid" in output
