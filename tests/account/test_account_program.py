"""The account preparation (account/program.py) under Pulumi's mock engine: which roles it
creates in which account, what it asks the cloud, and when.

A fresh Alibaba Cloud account has none of ACK's service roles and neither ACK nor NAS opened;
the main stack's cluster then fails to create (EntityNotExist.Role,
ErrManagedAddonRoleNotAttach). These tests pin the program that prepares it: every role ACK
needs that the account lacks, with its trust policy and system policy, kept on destroy; the
roles that exist left alone; the services opened by ``up`` only.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from account import program
from account.roles import ROLES

ROLE = "alicloud:ram/role:Role"
ATTACHMENT = "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment"
LINKED = "alicloud:resourcemanager/serviceLinkedRole:ServiceLinkedRole"
GET_ROLES = "alicloud:ram/getRoles:getRoles"
ACK_SERVICE = "alicloud:cs/getAckService:getAckService"
NAS_SERVICE = "alicloud:nas/getService:getService"
READ_STATE = "pulumi:pulumi:readStackResourceOutputs"
GET_ACCOUNT = "alicloud:index/getAccount:getAccount"
OIDC_PROVIDER = "alicloud:ims/oidcProvider:OidcProvider"
#: The account ID the provider's getAccount answers (its accountId setting, or STS).
ACCOUNT_ID = "1234567890123456"
#: The account in the ARNs the mock cloud gives created resources: another than ACCOUNT_ID, so a
#: test sees which of the two a policy was built from.
ARN_ACCOUNT = "5555555555555555"
ALL = sorted(role.name for role in ROLES)
#: ACK's Quick Authorization: the roles a console user has after one click.
QUICK = sorted(role.name for role in ROLES if role.quick)


@dataclass
class Run:
    """What one run of the account program registered, invoked, logged and exported."""

    registrations: list[dict] = field(default_factory=list)
    calls: list[pulumi_mocks.MockCallArgs] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def names(self, type_: str) -> list[str]:
        """The names registered with ``type_``, sorted (registration order is not the program's)."""
        return sorted(r["name"] for r in self.registrations if r["type"] == type_)

    def tokens(self) -> list[str]:
        return [c.token for c in self.calls]


class _Mocks(pulumi.runtime.Mocks):
    def __init__(
        self,
        run: Run,
        account: list[str] | None,
        state: list[str],
        refuse_services: bool,
        account_id: str | None,
    ) -> None:
        self.run, self.account, self.state, self.refuse_services = run, account, state, refuse_services
        self.account_id = account_id

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        outputs = dict(args.inputs)
        if args.typ == OIDC_PROVIDER:
            outputs["arn"] = f"acs:ram::{ARN_ACCOUNT}:oidc-provider/{args.inputs['oidcProviderName']}"
        elif args.typ == ROLE:
            outputs["arn"] = f"acs:ram::{ARN_ACCOUNT}:role/{args.inputs['roleName']}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi_mocks.MockCallArgs):
        self.run.calls.append(args)
        if args.token == GET_ROLES:
            if self.account is None:
                return {}, [("", "Post https://ram.aliyuncs.com/: dial tcp: no such host")]
            return {"names": list(self.account), "ids": list(self.account), "roles": []}
        if args.token == READ_STATE:
            outputs = {
                f"urn:pulumi:acct::tf-mnist-account::{ROLE}::{name}": {
                    "type": ROLE,
                    "outputs": {"roleName": name},
                }
                for name in self.state
            }
            return {"name": args.args.get("stackName"), "outputs": outputs}
        if args.token == GET_ACCOUNT:
            if self.account_id is None:
                return {}, [("", "Post https://sts.aliyuncs.com/: dial tcp: no such host")]
            return {"id": self.account_id}
        if args.token in (ACK_SERVICE, NAS_SERVICE):
            if self.refuse_services:
                return {}, [("", "Forbidden.RAM: User not authorized to operate on the specified resource")]
            return {**args.args, "id": "ServiceHasBeenOpened", "status": "Opened"}
        raise AssertionError(f"unexpected invoke {args.token}")


class _Monitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.run = mocks.run

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.run.registrations.append(
                {
                    "type": request.type,
                    "name": request.name,
                    "inputs": rpc.deserialize_properties(request.object),
                    "retain_on_delete": request.retainOnDelete,
                }
            )
        return response


class _Log(logging.Handler):
    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        (self.run.warnings if record.levelno >= logging.WARNING else self.run.infos).append(
            record.getMessage()
        )


def run_account(
    config: dict[str, str] | None = None,
    *,
    account: list[str] | None = (),
    state: tuple[str, ...] = (),
    preview: bool = False,
    refuse_services: bool = False,
    account_id: str | None = ACCOUNT_ID,
) -> Run:
    """Run account.program.run() once under fresh mocks.

    Args:
        config: ``tf-mnist-account:*`` keys -> values as the CLI hands them.
        account: the role names RAM lists; None = the listing fails (no network, no permission).
        state: the role names this stack's state holds.
        preview: run as a preview.
        refuse_services: the keys may not open ACK or NAS (OpenAckService answers Forbidden).
        account_id: the account ID getAccount answers; None = the lookup fails.
    """
    run = Run()
    mocks = _Mocks(run, None if account is None else list(account), list(state), refuse_services, account_id)
    logger = logging.getLogger(f"account-test-{id(run)}")
    logger.setLevel(logging.INFO)
    logger.addHandler(_Log(run))
    pulumi.runtime.set_mocks(
        mocks, project=program.PROJECT, stack="acct", preview=preview, monitor=_Monitor(mocks), logger=logger
    )
    pulumi.runtime.set_all_config(dict(config or {}), [])

    def body():
        try:
            outputs = program.run()
        except program.AccountError as error:
            run.error = error
            return None
        return pulumi.Output.all(**{k: pulumi.Output.from_input(v) for k, v in outputs.items()}).apply(
            run.outputs.update
        )

    pulumi.runtime.test(body)()
    return run


def test_a_fresh_account_gets_every_role_with_its_trust_and_system_policy():
    run = run_account(account=[])
    assert run.error is None
    assert run.names(ROLE) == ALL and len(ALL) == 15
    assert run.names(ATTACHMENT) == [f"{name}-policy" for name in ALL]
    roles = {r["name"]: r for r in run.registrations if r["type"] == ROLE}
    attachments = {r["name"]: r for r in run.registrations if r["type"] == ATTACHMENT}
    for role in ROLES:
        inputs = roles[role.name]["inputs"]
        assert inputs["roleName"] == role.name
        trust = json.loads(inputs["assumeRolePolicyDocument"])
        assert trust["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": [role.service]}}
        ]
        attached = attachments[f"{role.name}-policy"]["inputs"]
        assert attached == {"roleName": role.name, "policyName": f"{role.name}Policy", "policyType": "System"}
    services = {
        json.loads(r["inputs"]["assumeRolePolicyDocument"])["Statement"][0]["Principal"]["Service"][0]
        for r in roles.values()
    }
    assert services == {"cs.aliyuncs.com", "oos.aliyuncs.com"}
    assert roles["AliyunOOSLifecycleHook4CSRole"]["inputs"]["assumeRolePolicyDocument"].count(
        "oos.aliyuncs.com"
    )
    assert {
        "AliyunCSDefaultRole",
        "AliyunCSManagedKubernetesRole",
        "AliyunCSManagedCsiPluginRole",
        "AliyunCSManagedCsiProvisionerRole",
        "AliyunCSManagedAutoScalerRole",
    } <= set(roles)
    assert run.outputs["roles"] == {name: "created by this stack" for name in ALL}


def test_the_roles_outlive_the_stack():
    """Destroying the account stack must not take ACK's roles from the account's clusters."""
    run = run_account(account=[])
    assert len(run.registrations) == 31  # 15 roles, their 15 policies, Auto Scaling's linked role
    assert all(r["retain_on_delete"] for r in run.registrations)


def test_after_quick_authorization_only_the_autoscaler_roles_are_created():
    run = run_account(account=QUICK)
    assert run.names(ROLE) == ["AliyunCSManagedAutoScalerRole", "AliyunOOSLifecycleHook4CSRole"]
    assert run.outputs["roles"]["AliyunCSDefaultRole"] == "existed"
    assert run.outputs["roles"]["AliyunCSManagedAutoScalerRole"] == "created by this stack"
    lookup = next(c for c in run.calls if c.token == GET_ROLES)
    assert lookup.args["nameRegex"] == program.ROLE_NAME_REGEX


def test_a_second_up_keeps_the_roles_this_stack_created():
    """The account lists the roles the first up made: the stack still holds them, so the second
    up registers them again instead of planning to drop them."""
    run = run_account(account=ALL, state=("AliyunCSDefaultRole", "AliyunCSManagedAutoScalerRole"))
    assert run.names(ROLE) == ["AliyunCSDefaultRole", "AliyunCSManagedAutoScalerRole"]


def test_the_lookup_matches_every_role_and_ignores_other_roles():
    import re

    assert all(re.search(program.ROLE_NAME_REGEX, name) for name in ALL)
    run = run_account(account=["AliyunCSDefaultRole", "AliyunServiceRoleForNatgw", "MyRole"])
    assert "AliyunCSDefaultRole" not in run.names(ROLE)
    assert len(run.names(ROLE)) == 14


def test_up_opens_ack_pro_and_nas():
    run = run_account(account=[])
    ack = next(c for c in run.calls if c.token == ACK_SERVICE)
    nas = next(c for c in run.calls if c.token == NAS_SERVICE)
    assert ack.args == {"enable": "On", "type": "propayasgo"}
    assert nas.args == {"enable": "On"}
    assert run.outputs["services"] == {
        "ack": "Opened",
        "nas": "Opened",
        "ess": "activated by this stack (its service-linked role)",
    }


def test_a_fresh_account_activates_auto_scaling_by_its_service_linked_role():
    """The GPU pool's autoscaling needs Auto Scaling (ESS) activated: its service-linked role."""
    run = run_account(account=[])
    (linked,) = [r for r in run.registrations if r["type"] == LINKED]
    assert linked["name"] == "AliyunServiceRoleForAutoScaling"
    assert linked["inputs"] == {"serviceName": "ess.aliyuncs.com"}
    assert linked["retain_on_delete"]


def test_auto_scaling_already_activated_is_left_alone():
    run = run_account(account=[*ALL, "AliyunServiceRoleForAutoScaling"])
    assert [r for r in run.registrations if r["type"] == LINKED] == []
    assert run.outputs["services"]["ess"] == "activated (its service-linked role existed)"
    assert re.search(program.ROLE_NAME_REGEX, "AliyunServiceRoleForAutoScaling")
    assert not re.search(program.ROLE_NAME_REGEX, "AliyunServiceRoleForAutoScalingX")


def test_keys_that_may_not_open_the_services_stop_the_up_before_any_role():
    run = run_account(account=[], refuse_services=True)
    message = str(run.error)
    assert isinstance(run.error, program.AccountError) and "Forbidden.RAM" in message
    assert "AdministratorAccess" in message and "activateServices false" in message
    assert run.registrations == []


def test_a_preview_opens_nothing_and_says_what_up_will_open():
    run = run_account(account=[], preview=True)
    assert ACK_SERVICE not in run.tokens() and NAS_SERVICE not in run.tokens()
    assert run.names(ROLE) == ALL
    assert any("opens ACK Pro (OpenAckService, type propayasgo) and NAS" in m for m in run.infos), run.infos
    assert run.outputs["services"] == {
        "ack": "opened by pulumi up",
        "nas": "opened by pulumi up",
        "ess": "activated by this stack (its service-linked role)",
    }
    assert [r["name"] for r in run.registrations if r["type"] == LINKED] == [
        "AliyunServiceRoleForAutoScaling"
    ]


def test_activate_services_false_touches_no_service():
    run = run_account({"tf-mnist-account:activateServices": "false"}, account=[])
    assert ACK_SERVICE not in run.tokens() and NAS_SERVICE not in run.tokens()
    assert run.outputs["services"]["ack"] == "not touched (activateServices false)"


def test_a_preview_that_cannot_list_the_roles_plans_them_all_with_a_warning():
    """Offline (fake keys, no network) the preview still shows every role it could create."""
    run = run_account(account=None, preview=True)
    assert run.error is None
    assert run.names(ROLE) == ALL
    assert any("could not list the account's RAM roles" in m and "no such host" in m for m in run.warnings)


def test_an_up_that_cannot_list_the_roles_stops_before_creating_any():
    run = run_account(account=None)
    assert isinstance(run.error, program.AccountError)
    assert "ram:ListRoles" in str(run.error) and "existingRoles" in str(run.error)
    assert run.registrations == []


def test_existing_roles_from_the_config_replace_the_lookup():
    run = run_account({"tf-mnist-account:existingRoles": json.dumps(QUICK[:3])}, account=None)
    assert GET_ROLES not in run.tokens()
    assert run.names(ROLE) == sorted(set(ALL) - set(QUICK[:3]))


def test_bad_values_are_reported_together():
    run = run_account(
        {
            "tf-mnist-account:activateServices": "maybe",
            "tf-mnist-account:existingRoles": '["AliyunCSDefaultRole", "AliyunCSRoleTypo"]',
        }
    )
    message = str(run.error)
    assert message.startswith("2 invalid configuration values; nothing was changed:")
    assert "'tf-mnist-account:activateServices' value 'maybe' is invalid: must be true or false" in message
    assert "AliyunCSRoleTypo is not a role this program manages" in message
    assert run.registrations == [] and run.calls == []


@pytest.mark.parametrize("value", ["AliyunCSDefaultRole", '{"a": 1}', "[1, 2]"])
def test_existing_roles_must_be_a_json_list_of_names(value):
    run = run_account({"tf-mnist-account:existingRoles": value})
    assert "must be a JSON list of role names" in str(run.error)
