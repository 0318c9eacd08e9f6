"""The account preparation: what an Alibaba Cloud account needs once before the main stack
(infra/) can create an ACK cluster with NAS in it.

A project of its own (account/Pulumi.yaml, ``tf-mnist-account``), not a part of the main
stack, because what it makes belongs to the account, not to one deployment:

* RAM roles are account-wide and fixed by name (ACK looks them up as AliyunCSDefaultRole, ...).
  Created by every main stack, the second stack's create would fail on roles that exist, and
  destroying any stack would take them from every other cluster of the account.
* Opening ACK and NAS is once per account and cannot be undone; RAM users need
  AdministratorAccess to do it (ACK's OpenAckService documentation). Running it apart lets an
  administrator prepare the account once while the main stacks deploy with narrower keys.
* It outlives the deployments: the roles are kept when this stack is destroyed
  (``retain_on_delete``), since clusters of the account, this project's or not, go on using them.

What it does:

* Roles: every role of ``account.roles.ROLES`` that the account lacks becomes an
  ``alicloud.ram.Role`` (trusting its service) with an ``alicloud.ram.RolePolicyAttachment`` of
  its system policy. A role that exists and that this stack did not create is left alone. Which
  roles exist comes from ``existingRoles`` when set, else from the account (``ram.get_roles``,
  RAM's ListRoles) on every run; a lookup that fails stops ``up`` and, in a preview, plans every
  role with a warning. With no network at all the provider retries the lookup for minutes (an
  offline preview with fake keys did not end), so offline previews set ``existingRoles``.
* Services: ``pulumi up`` opens ACK Pro (OpenAckService, type ``propayasgo``: the stack's
  cluster is ``ack.pro.small``) and NAS (OpenNASService) through the provider's data sources,
  which are invokes, not resources: they call the cloud when they run. So a preview only says it
  will (a preview changes nothing, and opening a service is not undone); ``up`` calls them each
  time (a service already open answers "Opened"). Auto Scaling (ESS), which the GPU pool's
  autoscaling needs, is activated by creating its service-linked role
  (``alicloud.resourcemanager.ServiceLinkedRole``, ``ess.aliyuncs.com``) where the account lacks
  it; a preview plans it like the roles. ``activateServices false`` skips all three.
* GitHub Actions, when ``github.repository`` is set (``account.github_ci``): an OIDC identity
  provider for GitHub's tokens and a read-only RAM role that only that repository's pull-request
  runs may assume, so that .github/workflows/preview.yml previews without stored keys. Destroying
  the stack deletes them (nothing else uses them).

What it cannot do: GPU instance quota is granted per region, zone and instance type by a quota
application that Alibaba Cloud reviews (docs/account.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from account.github_ci import create_github_access, load_repository
from account.roles import AUTO_SCALING_ROLE, AUTO_SCALING_SERVICE, MANAGED_NAMES, ROLES, ServiceRole
from infra.stack_state import StateUnreadable, read_stack_resources

PROJECT = "tf-mnist-account"
#: The roles the account lookup asks RAM for (every name in ROLES matches it).
ROLE_NAME_REGEX = "^(AliyunCS|AliyunCIS|AliyunOOSLifecycleHook4CS|AliyunServiceRoleForAutoScaling$)"
ROLE_TYPE = "alicloud:ram/role:Role"
LINKED_ROLE_TYPE = "alicloud:resourcemanager/serviceLinkedRole:ServiceLinkedRole"
#: OpenAckService's type for ACK Pro, pay-as-you-go (the main stack's cluster_spec ack.pro.small).
ACK_PRO = "propayasgo"


class AccountError(pulumi.RunError):
    """A configuration value or an account lookup the program cannot go on with; the CLI prints
    the message without a traceback."""


@dataclass(frozen=True)
class AccountSettings:
    """The account stack's configuration (``tf-mnist-account:*``).

    Attributes:
        activate_services: open ACK Pro and NAS on ``up`` (``activateServices``, default true).
        existing_roles: the roles of ROLES the account has (``existingRoles``, a JSON list of
            names); None = ask the account.
        github_repository: the GitHub repository (``<owner>/<name>``) whose pull-request runs
            get the OIDC role (``github.repository``); None = no GitHub access.
    """

    activate_services: bool
    existing_roles: frozenset[str] | None
    github_repository: str | None = None


def load_settings(config: pulumi.Config | None = None) -> AccountSettings:
    """Read and check the configuration; every bad value is reported at once.

    Raises:
        AccountError: ``activateServices`` not a boolean, ``existingRoles`` not a JSON list of
            role names of ROLES (the message lists the valid names), ``github.repository`` not
            ``<owner>/<name>`` (``account.github_ci.RULE``) or set twice.
    """
    config = config or pulumi.Config(PROJECT)
    errors = []
    activate_text = (config.get("activateServices") or "true").strip().lower()
    if activate_text not in ("true", "false"):
        errors.append(
            f"Configuration '{PROJECT}:activateServices' value '{activate_text}' is invalid: must be "
            "true or false.\n    fix: pulumi config set activateServices false"
        )
    existing: frozenset[str] | None = None
    existing_text = config.get("existingRoles")
    if existing_text is not None:
        try:
            names = json.loads(existing_text)
        except json.JSONDecodeError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            errors.append(
                f"Configuration '{PROJECT}:existingRoles' value '{existing_text}' is invalid: must be a "
                "JSON list of role names.\n    fix: pulumi config set existingRoles "
                "'[\"AliyunCSDefaultRole\"]' (or pulumi config rm existingRoles to ask the account)"
            )
        else:
            unknown = sorted(set(names) - set(MANAGED_NAMES))
            if unknown:
                errors.append(
                    f"Configuration '{PROJECT}:existingRoles' value '{existing_text}' is invalid: "
                    f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a role this "
                    f"program manages; the roles are: {', '.join(MANAGED_NAMES)}"
                )
            existing = frozenset(names)
    repository, repository_errors = load_repository(config, PROJECT)
    errors += repository_errors
    if errors:
        count = len(errors)
        raise AccountError(
            f"{count} invalid configuration value{'s' if count > 1 else ''}; nothing was "
            "changed:\n" + "\n".join(errors)
        )
    return AccountSettings(
        activate_services=activate_text == "true", existing_roles=existing, github_repository=repository
    )


def held_roles() -> frozenset[str] | None:
    """The roles this stack's state holds (it created them), from the engine
    (infra/stack_state.py, as the main project reads its state); None with a warning when the
    engine cannot give the state."""
    try:
        resources = read_stack_resources()
    except StateUnreadable as error:
        pulumi.log.warn(
            f"could not read this stack's state ({error}): roles found in the account "
            "count as created elsewhere, and this stack stops managing them (they stay)"
        )
        return None
    return frozenset(
        str((entry.get("outputs") or {}).get("roleName"))
        for entry in resources.values()
        if isinstance(entry, dict) and entry.get("type") in (ROLE_TYPE, LINKED_ROLE_TYPE)
    )


def account_roles(dry_run: bool) -> frozenset[str] | None:
    """The roles of ROLES the account has, from RAM (ListRoles); None when a preview could not
    ask (then every role is planned, with a warning).

    Raises:
        AccountError: on ``up``, when RAM could not be asked.
    """
    try:
        found = alicloud.ram.get_roles(name_regex=ROLE_NAME_REGEX)
    except Exception as error:  # keys without ram:ListRoles, an API refusal
        message = f"could not list the account's RAM roles ({type(error).__name__}: {str(error)[:300]})"
        if dry_run:
            pulumi.log.warn(
                message + "; planning every role the stack does not hold. `pulumi up` needs the "
                "list (or `pulumi config set existingRoles '[...]'` naming the roles that exist)"
            )
            return None
        raise AccountError(
            message + "; give the keys ram:ListRoles, or name the roles that exist: "
            "pulumi config set existingRoles '[\"AliyunCSDefaultRole\", ...]'"
        ) from None
    return frozenset(name for name in (found.names or []) if name in MANAGED_NAMES)


def roles_to_create(existing: frozenset[str] | None, held: frozenset[str] | None) -> list[ServiceRole]:
    """The roles this stack creates (or keeps, having created them): those the account lacks
    and those the stack holds, in ROLES order.

    Args:
        existing: the roles the account has (``account_roles`` or existingRoles); None = unknown.
        held: the roles this stack's state holds; None = unknown (then none).
    """
    existing = existing or frozenset()
    held = held or frozenset()
    return [role for role in ROLES if role.name in held or role.name not in existing]


def create_roles(roles: Sequence[ServiceRole]) -> dict[str, alicloud.ram.Role]:
    """An ``alicloud.ram.Role`` and its system policy's attachment per role, both kept in the
    account when the stack is destroyed (ACK and every cluster in the account use them)."""
    kept = pulumi.ResourceOptions(retain_on_delete=True)
    made = {}
    for role in roles:
        ram_role = alicloud.ram.Role(
            role.name,
            role_name=role.name,
            assume_role_policy_document=role.trust_policy(),
            description=role.purpose,
            opts=kept,
        )
        alicloud.ram.RolePolicyAttachment(
            f"{role.name}-policy",
            role_name=ram_role.role_name,
            policy_name=role.policy,
            policy_type="System",
            opts=kept,
        )
        made[role.name] = ram_role
    return made


def activate_services(settings: AccountSettings, dry_run: bool) -> dict[str, str]:
    """Open ACK Pro and NAS on ``up`` (the provider's data sources: OpenAckService,
    OpenNASService); in a preview, say that ``up`` will. Returns each service's status
    (``Opened`` after ``up``).

    Raises:
        AccountError: on ``up``, when either could not be opened (the keys' rights, mostly).
    """
    if not settings.activate_services:
        return {"ack": "not touched (activateServices false)", "nas": "not touched (activateServices false)"}
    if dry_run:
        pulumi.log.info(
            "`pulumi up` opens ACK Pro (OpenAckService, type propayasgo) and NAS (OpenNASService): "
            "free, account-wide, and not undone by a destroy; `pulumi config set activateServices "
            "false` skips them"
        )
        return {"ack": "opened by pulumi up", "nas": "opened by pulumi up"}
    try:
        ack = alicloud.cs.get_ack_service(enable="On", type=ACK_PRO)
        nas = alicloud.nas.get_service(enable="On")
    except Exception as error:  # an API refusal: the keys may not open services
        raise AccountError(
            f"could not open ACK Pro or NAS ({type(error).__name__}: {str(error)[:300]}); nothing "
            "was created. Opening a service needs the account owner's keys or a RAM user with "
            "AdministratorAccess; where both are open already, `pulumi config set activateServices "
            "false`"
        ) from None
    return {"ack": str(ack.status), "nas": str(nas.status)}


def activate_auto_scaling(
    settings: AccountSettings, existing: frozenset[str] | None, held: frozenset[str] | None
) -> str:
    """Auto Scaling's service-linked role (AUTO_SCALING_ROLE), created where the account lacks
    it or this stack holds it (kept when the stack is destroyed, like the roles). Returns its
    status for the ``services`` output."""
    if not settings.activate_services:
        return "not touched (activateServices false)"
    if AUTO_SCALING_ROLE in (existing or frozenset()) and AUTO_SCALING_ROLE not in (held or frozenset()):
        return "activated (its service-linked role existed)"
    alicloud.resourcemanager.ServiceLinkedRole(
        AUTO_SCALING_ROLE,
        service_name=AUTO_SCALING_SERVICE,
        opts=pulumi.ResourceOptions(retain_on_delete=True),
    )
    return "activated by this stack (its service-linked role)"


def run() -> dict[str, Any]:
    """Read the configuration, create the missing roles, open the services, export the outputs.

    Returns:
        The stack outputs by name (also exported): ``roles`` (each role of ROLES: ``created
        by this stack`` or ``existed``), ``services`` (ACK's, NAS's and Auto Scaling's status)
        and, with ``github.repository``, ``githubOidcProviderArn`` and ``githubRoleArn`` (the
        workflow's variables ALICLOUD_OIDC_PROVIDER_ARN and ALICLOUD_ROLE_ARN).

    Raises:
        AccountError: a bad configuration value; on ``up``, a service that could not be opened,
            or an account whose roles could not be listed (without existingRoles).
    """
    settings = load_settings()
    dry_run = pulumi.runtime.is_dry_run()
    # The services first: when they cannot be opened, no role is created either.
    services = activate_services(settings, dry_run)
    existing = settings.existing_roles
    if existing is None:
        existing = account_roles(dry_run)
    held = held_roles()
    created = create_roles(roles_to_create(existing, held))
    services["ess"] = activate_auto_scaling(settings, existing, held)
    outputs: dict[str, Any] = {
        "roles": {
            role.name: "created by this stack" if role.name in created else "existed" for role in ROLES
        },
        "services": services,
    }
    if settings.github_repository is not None:
        outputs.update(create_github_access(settings.github_repository))
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs
