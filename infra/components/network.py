"""Network: the VPC and node vSwitch of the stack, created or reused by id."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud


class Network(pulumi.ComponentResource):
    """VPC + vSwitch for the cluster nodes and the NAS mount target.

    Children: ``vpc`` (alicloud.vpc.Network, unless ``vpc_id`` is given) and ``vswitch``
    (alicloud.vpc.Switch, unless ``vswitch_id`` is given; then nothing is created).

    Outputs:
        vswitch_id: the node vSwitch.
        vswitch_cidr: its CIDR (the NAS access rule authorises it: CSI mounts come from node IPs).
    """

    vswitch_id: pulumi.Output[str]
    vswitch_cidr: pulumi.Output[str]

    def __init__(self, name: str, *, zone: Optional[str], vpc_id: Optional[str], vpc_cidr: str,
                 vswitch_id: Optional[str], vswitch_cidr: str,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("tf-mnist:index:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if vswitch_id is not None:
            self.vswitch_id = pulumi.Output.from_input(vswitch_id)
        else:
            if vpc_id is None:
                vpc = alicloud.vpc.Network(f"{name}-vpc", vpc_name=name, cidr_block=vpc_cidr, opts=child)
                vpc_id_out: pulumi.Input[str] = vpc.id
            else:
                vpc_id_out = vpc_id
            vswitch = alicloud.vpc.Switch(f"{name}-vswitch", vswitch_name=name, vpc_id=vpc_id_out,
                                          cidr_block=vswitch_cidr, zone_id=zone, opts=child)
            self.vswitch_id = vswitch.id
        self.vswitch_cidr = pulumi.Output.from_input(vswitch_cidr)
        self.register_outputs({"vswitch_id": self.vswitch_id, "vswitch_cidr": self.vswitch_cidr})
