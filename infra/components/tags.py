"""The tags of every cloud resource the stack creates that takes tags: which Pulumi project and
stack made it, so that a bill, or the console, can be filtered by stack."""

from __future__ import annotations

import pulumi

#: Tag keys; Alibaba Cloud refuses keys starting with ``aliyun`` or ``acs:`` only.
PROJECT_TAG = "pulumi:project"
STACK_TAG = "pulumi:stack"


def cloud_tags() -> dict[str, str]:
    """``{"pulumi:project": <project>, "pulumi:stack": <stack>}`` of the stack being deployed.

    On the VPC, its vSwitches, the ACK cluster (ACK also puts the cluster's tags on its nodes),
    both node pools (their ECS instances), the NAS file system and TensorBoard's SLB ACL.
    """
    return {PROJECT_TAG: pulumi.get_project(), STACK_TAG: pulumi.get_stack()}
