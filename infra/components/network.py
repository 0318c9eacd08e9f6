"""Network: the VPC and node vSwitch of the stack, created or reused by id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud


@dataclass
class NetworkArgs:
    """The network to create or reuse (vpc.*, vswitch.*, zone).

    Attributes:
        zone: the zone of a new vSwitch (the rules require it when one is created).
        vpc_id: an existing VPC to create the vSwitch in; None creates a VPC of ``vpc_cidr``.
        vpc_cidr: the CIDR of a new VPC.
        vswitch_id: an existing node vSwitch; then nothing is created.
        vswitch_cidr: the node vSwitch's CIDR, new or existing.
    """

    zone: Optional[str]
    vpc_id: Optional[str]
    vpc_cidr: str
    vswitch_id: Optional[str]
    vswitch_cidr: str


class Network(pulumi.ComponentResource):
    """VPC + vSwitch for the cluster nodes and the NAS mount target.

    Children: ``vpc`` (alicloud.vpc.Network, unless ``args.vpc_id`` is given) and ``vswitch``
    (alicloud.vpc.Switch, unless ``args.vswitch_id`` is given; then nothing is created).

    Outputs:
        vswitch_id: the node vSwitch.
        vswitch_cidr: its CIDR (the NAS access rule authorises it: CSI mounts come from node IPs).
    """

    vswitch_id: pulumi.Output[str]
    vswitch_cidr: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("tf-mnist:index:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.vswitch_id is not None:
            self.vswitch_id = pulumi.Output.from_input(args.vswitch_id)
        else:
            vpc_id: pulumi.Input[str]
            if args.vpc_id is None:
                vpc_id = alicloud.vpc.Network(f"{name}-vpc", vpc_name=name, cidr_block=args.vpc_cidr, opts=child).id
            else:
                vpc_id = args.vpc_id
            vswitch = alicloud.vpc.Switch(f"{name}-vswitch", vswitch_name=name, vpc_id=vpc_id,
                                          cidr_block=args.vswitch_cidr, zone_id=args.zone, opts=child)
            self.vswitch_id = vswitch.id
        self.vswitch_cidr = pulumi.Output.from_input(args.vswitch_cidr)
        self.register_outputs({"vswitch_id": self.vswitch_id, "vswitch_cidr": self.vswitch_cidr})
