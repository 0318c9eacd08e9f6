"""The tf-mnist platform policy pack: every rule of policy/rules.py as a mandatory policy.

Run it with a preview (docs/policy.md): ``pulumi preview --policy-pack policy``. The CLI starts
this file in the pack's directory with the virtualenv PulumiPolicy.yaml names; the repository
root goes on sys.path so that the rules read the stack's own constants (infra/settings,
infra/components/tags.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import (  # noqa: E402 (after the sys.path entry the rules need)
    EnforcementLevel,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from policy.checks import POLICIES  # noqa: E402

PolicyPack(
    name="tf-mnist-platform",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        (StackValidationPolicy if stack else ResourceValidationPolicy)(
            name=name, description=description, validate=validate
        )
        for name, description, stack, validate in POLICIES
    ],
)
