"""Network: the VPC and node vSwitch of the stack, created or reused by id, and the pod vSwitch
of a Terway cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from infra.components.tags import cloud_tags
from infra.settings.cloud import Vpc, Vswitch


@dataclass
class NetworkArgs:
    """The network to create or reuse (vpc.*, vswitch.*, zone).

    Attributes:
        zone: the zone of a new vSwitch (the rules require it when one is created).
        vpc: ``vpc.id``, an existing VPC to create the vSwitch in; None creates a VPC of
            ``vpc.cidr``.
        vswitch: ``vswitch.id``, an existing node vSwitch (then nothing is created), and
            ``vswitch.cidr``, the node vSwitch's CIDR, new or existing.
        pod_vswitch_cidr: the CIDR of a pod vSwitch to create beside the node vSwitch (a
            Terway cluster's pods get addresses from it); None creates none.
    """

    zone: str | None
    vpc: Vpc
    vswitch: Vswitch
    pod_vswitch_cidr: str | None = None


class Network(pulumi.ComponentResource):
    """VPC + vSwitch for the cluster nodes and the NAS mount target.

    Children: ``vpc`` (alicloud.vpc.Network, unless ``args.vpc.id`` is given), ``vswitch``
    (alicloud.vpc.Switch, unless ``args.vswitch.id`` is given; then nothing is created) and,
    with ``args.pod_vswitch_cidr``, ``vswitch-pods`` (alicloud.vpc.Switch named
    ``<name>-pods``, in the node vSwitch's VPC and zone: Terway takes a node's pod addresses
    from a pod vSwitch of the node's zone).

    Outputs:
        vswitch_id: the node vSwitch.
        vswitch_cidr: its CIDR (the NAS access rule authorises it: CSI mounts come from node IPs).
        pod_vswitch_id: the pod vSwitch created; None without ``args.pod_vswitch_cidr``.

    Raises:
        ValueError: ``args.pod_vswitch_cidr`` with ``args.vswitch.id`` (the VPC is not known
            then; the configuration rules refuse that as cluster.podVswitchCidr).
    """

    vswitch_id: pulumi.Output[str]
    vswitch_cidr: pulumi.Output[str]
    pod_vswitch_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.pod_vswitch_id = None
        if args.vswitch.id is not None:
            if args.pod_vswitch_cidr is not None:
                raise ValueError(
                    f"cluster.podVswitchCidr {args.pod_vswitch_cidr}: no pod vSwitch can be created "
                    f"beside vswitch.id {args.vswitch.id}, whose VPC is not known; set "
                    "cluster.podVswitchId"
                )
            self.vswitch_id = pulumi.Output.from_input(args.vswitch.id)
        else:
            vpc_id: pulumi.Input[str]
            if args.vpc.id is None:
                vpc_id = alicloud.vpc.Network(
                    f"{name}-vpc", vpc_name=name, cidr_block=args.vpc.cidr, tags=cloud_tags(), opts=child
                ).id
            else:
                vpc_id = args.vpc.id
            vswitch = alicloud.vpc.Switch(
                f"{name}-vswitch",
                vswitch_name=name,
                vpc_id=vpc_id,
                cidr_block=args.vswitch.cidr,
                zone_id=args.zone,
                tags=cloud_tags(),
                opts=child,
            )
            self.vswitch_id = vswitch.id
            if args.pod_vswitch_cidr is not None:
                self.pod_vswitch_id = alicloud.vpc.Switch(
                    f"{name}-vswitch-pods",
                    vswitch_name=f"{name}-pods",
                    vpc_id=vpc_id,
                    cidr_block=args.pod_vswitch_cidr,
                    zone_id=args.zone,
                    tags=cloud_tags(),
                    opts=child,
                ).id
        self.vswitch_cidr = pulumi.Output.from_input(args.vswitch.cidr)
        outputs = {"vswitch_id": self.vswitch_id, "vswitch_cidr": self.vswitch_cidr}
        if self.pod_vswitch_id is not None:
            outputs["pod_vswitch_id"] = self.pod_vswitch_id
        self.register_outputs(outputs)
