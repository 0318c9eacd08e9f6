"""The RAM roles ACK assumes in an account, and the system policy each one carries.

ACK acts in the account through service roles that the account owner authorises once (the
console's "Quick Authorization", or this program). A role ACK needs and does not find fails
the cluster's creation: ``EntityNotExist.Role`` for AliyunCSDefaultRole and
AliyunCSManagedKubernetesRole, ``ErrManagedAddonRoleNotAttach``,
``ErrKubernetesAuditRoleNotAttach`` and ``ErrAutoScalerRoleNotAttach`` for the add-ons' roles
(ACK's FAQ on authorization errors; terraform-provider-alicloud issues #149, #1034 and #3886).

The table is ACK's own (the "ACK roles" page of ACK's documentation, and the Terraform code
ACK publishes there for authorising them): every role of its Quick Authorization, which grants
them all at once and is what a cluster's creation checks for, plus the two of its optional
roles this project's GPU pool uses when it scales (``gpuPool.autoscaling``). Each role trusts one Alibaba Cloud service
(``cs.aliyuncs.com``, OOS's role ``oos.aliyuncs.com``) and carries the system policy named
``<role>Policy``, which Alibaba Cloud maintains. None of them costs anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: The services the roles trust.
ACK_SERVICE = "cs.aliyuncs.com"
OOS_SERVICE = "oos.aliyuncs.com"


@dataclass(frozen=True)
class ServiceRole:
    """One role ACK assumes.

    Attributes:
        name: the role's name, fixed by ACK (it looks the role up by this name).
        service: the service allowed to assume it (the trust policy's principal).
        purpose: what assumes it, from ACK's documentation (the role's description).
        quick: part of ACK's Quick Authorization (else one of its optional roles).
    """

    name: str
    service: str
    purpose: str
    quick: bool = True

    @property
    def policy(self) -> str:
        """The system policy ACK expects on the role: ``<name>Policy``."""
        return f"{self.name}Policy"

    def trust_policy(self) -> str:
        """The role's trust policy (RAM policy language, version 1), as compact JSON."""
        return json.dumps(
            {
                "Statement": [
                    {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": [self.service]}}
                ],
                "Version": "1",
            },
            separators=(",", ":"),
        )


ROLES: tuple[ServiceRole, ...] = (
    ServiceRole(
        "AliyunCSDefaultRole",
        ACK_SERVICE,
        "ACK manages clusters with it: ECS, VPC, SLB, ROS and Auto Scaling.",
    ),
    ServiceRole(
        "AliyunCSManagedKubernetesRole",
        ACK_SERVICE,
        "A managed cluster's control plane: ECS, VPC, SLB and Container Registry.",
    ),
    ServiceRole(
        "AliyunCSServerlessKubernetesRole",
        ACK_SERVICE,
        "Serverless and Edge clusters; part of ACK's Quick Authorization.",
    ),
    ServiceRole(
        "AliyunCSKubernetesAuditRole", ACK_SERVICE, "The API server's audit log in Simple Log Service."
    ),
    ServiceRole(
        "AliyunCSManagedNetworkRole", ACK_SERVICE, "The network add-on (Flannel or Terway): ECS and VPC."
    ),
    ServiceRole("AliyunCSManagedCsiRole", ACK_SERVICE, "The storage add-on: disks, NAS and OSS."),
    ServiceRole(
        "AliyunCSManagedCsiPluginRole",
        ACK_SERVICE,
        "The CSI plugin (csi-plugin add-on) that mounts the NAS volume.",
    ),
    ServiceRole(
        "AliyunCSManagedCsiProvisionerRole", ACK_SERVICE, "The CSI provisioner (csi-provisioner add-on)."
    ),
    ServiceRole(
        "AliyunCSManagedCmsRole", ACK_SERVICE, "The monitoring add-on: CloudMonitor and Simple Log Service."
    ),
    ServiceRole("AliyunCSManagedLogRole", ACK_SERVICE, "The logging add-on: Simple Log Service."),
    ServiceRole("AliyunCSManagedArmsRole", ACK_SERVICE, "The ARMS (Prometheus) add-on."),
    ServiceRole("AliyunCSManagedVKRole", ACK_SERVICE, "The virtual-node add-on (ECI)."),
    ServiceRole("AliyunCISDefaultRole", ACK_SERVICE, "ACK's cluster inspection and diagnostics."),
    ServiceRole(
        "AliyunCSManagedAutoScalerRole",
        ACK_SERVICE,
        "The cluster autoscaler that scales the GPU pool (gpuPool.autoscaling).",
        quick=False,
    ),
    ServiceRole(
        "AliyunOOSLifecycleHook4CSRole",
        OOS_SERVICE,
        "OOS runs the scaling node pools' lifecycle hooks with it.",
        quick=False,
    ),
)

#: Role name -> role.
BY_NAME: dict[str, ServiceRole] = {role.name: role for role in ROLES}

#: Auto Scaling (ESS), which scales the node pools (gpuPool.autoscaling), is activated by its
#: service-linked role: ACK's "Use Terraform to create a node pool that has auto scaling
#: enabled" asks for Auto Scaling activated with its default role first, and Auto Scaling's
#: "Service-linked role" page names it and its service. RAM creates such a role with its own
#: trust and policy (CreateServiceLinkedRole), not as the roles above.
AUTO_SCALING_ROLE = "AliyunServiceRoleForAutoScaling"
AUTO_SCALING_SERVICE = "ess.aliyuncs.com"
#: Every role name the account stack manages: ROLES and Auto Scaling's.
MANAGED_NAMES: tuple[str, ...] = (*BY_NAME, AUTO_SCALING_ROLE)
