"""The README's deployment starts from an empty account: the preparation comes first, runs the
account/ project, and names the roles the program really manages (account/roles.py)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from account.roles import ROLES
from tests import readme_blocks as rb

REPO = Path(__file__).resolve().parents[2]
ROLE_NAME = re.compile(r"\bAliyun(?:CS|CIS|OOS)[A-Za-z0-9]*Role\b")


def _deploy_section() -> str:
    text = rb.README.read_text()
    start = text.index("## Deploying to Alibaba Cloud")
    return text[start : text.index("\n## ", start + 1)]


def test_the_preparation_runs_the_account_project_before_the_stacks_first_up():
    commands = [c.split("#")[0].strip() for c in rb.commands("account-prepare")]
    assert commands[0].startswith("bash scripts/bootstrap.sh")
    assert commands.index("cd account") < commands.index("pulumi up") < commands.index("cd ..")
    project = yaml.safe_load((REPO / "account" / "Pulumi.yaml").read_text())
    assert project["name"] == "tf-mnist-account" and project["runtime"]["options"]["virtualenv"] == "../.venv"
    deploy = _deploy_section()
    prepare = deploy.index("<!-- walkthrough: account-prepare -->")
    stack_up = deploy.index("pulumi stack select dev --create")
    assert prepare < stack_up


def test_the_deploy_section_names_every_step_of_an_empty_account_with_its_cost():
    deploy = _deploy_section()
    for step in ("activate ACK Pro and NAS", "authorise ACK's service roles", "GPU quota"):
        row = next(line for line in deploy.splitlines() if line.startswith(f"| {step}"))
        assert "free" in row, row
    assert "EntityNotExist.Role" in deploy and "ErrManagedAddonRoleNotAttach" in deploy


def test_the_role_names_in_the_docs_are_the_programs():
    names = {role.name for role in ROLES}
    account_doc = (REPO / "docs" / "account.md").read_text()
    for where, text in (("README.md", _deploy_section()), ("docs/account.md", account_doc)):
        mentioned = set(ROLE_NAME.findall(text))
        assert mentioned <= names, (where, sorted(mentioned - names))
    assert names <= set(ROLE_NAME.findall(account_doc)), "docs/account.md must list every role"
    assert f"each of ACK's {len(ROLES)} that is missing" in " ".join(_deploy_section().split())
