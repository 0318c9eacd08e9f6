"""NasStorage: a standard NFS NAS file system (created, or an existing one), its access group
and rule, and a mount target."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from infra.components.tags import cloud_tags
from infra.settings.cloud import Nas


@dataclass
class NasStorageArgs:
    """The NAS file system the stack creates (nas.storageType, nas.retainOnDestroy).

    Attributes:
        vswitch_id: the node vSwitch, where the mount target goes.
        vswitch_cidr: its CIDR, which the access rule authorises.
        storage_type: the standard NAS storage type (Performance, Capacity, Premium).
        nas: the nas.* keys: ``retain_on_destroy`` keeps the file system and its data on
            `pulumi destroy`; ``file_system_id``, an existing standard NAS file system, makes
            the stack create only the access group, rule and mount target for it.
        zone: the zone of a new file system: the nodes' (zone); None lets NAS pick one.
    """

    vswitch_id: pulumi.Input[str]
    vswitch_cidr: pulumi.Input[str]
    storage_type: str
    nas: Nas
    zone: str | None = None


class NasStorage(pulumi.ComponentResource):
    """Shared storage for data, checkpoints and TensorBoard logs.

    Children: ``file_system`` (standard NFS, in ``args.zone``, tagged with the stack; with
    ``args.nas.retain_on_destroy`` a `pulumi destroy` leaves it and its data in place; none with
    ``args.nas.file_system_id``), ``access_group`` (VPC), ``access_rule`` (the node vSwitch CIDR,
    RDWR, no_squash: CSI mounts come from node IPs and chown needs no_squash) and
    ``mount_target`` in the node vSwitch.

    Outputs:
        file_system_id: the NAS file system id.
        mount_target_domain: NFS server name for the PV.
    """

    file_system_id: pulumi.Output[str]
    mount_target_domain: pulumi.Output[str]
    mount_target: alicloud.nas.MountTarget

    def __init__(self, name: str, args: NasStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:NasStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        file_system_id: pulumi.Input[str]
        if args.nas.file_system_id is not None:
            file_system_id = args.nas.file_system_id
        else:
            # No vpc_id/vswitch_id on a standard NAS: those belong to CPFS and force replacement.
            file_system_id = alicloud.nas.FileSystem(
                f"{name}-fs",
                protocol_type="NFS",
                storage_type=args.storage_type,
                file_system_type="standard",
                description=f"{name} training data",
                # Without a zone NAS picks one at random, often not the nodes', whose mounts then
                # cross zones. zone_id is ForceNew and was computed for a file system made before
                # the stack set it: ignored after creation, so that no file system is replaced
                # (and emptied) for its zone.
                zone_id=args.zone,
                tags=cloud_tags(),
                opts=pulumi.ResourceOptions(
                    parent=self, retain_on_delete=args.nas.retain_on_destroy, ignore_changes=["zoneId"]
                ),
            ).id
        access_group = alicloud.nas.AccessGroup(
            f"{name}-access",
            access_group_name=name,
            access_group_type="Vpc",
            file_system_type="standard",
            opts=child,
        )
        access_rule = alicloud.nas.AccessRule(
            f"{name}-rule",
            access_group_name=access_group.access_group_name,
            file_system_type="standard",
            source_cidr_ip=args.vswitch_cidr,
            rw_access_type="RDWR",
            user_access_type="no_squash",
            priority=1,
            opts=child,
        )
        self.mount_target = alicloud.nas.MountTarget(
            f"{name}-mount",
            file_system_id=file_system_id,
            access_group_name=access_group.access_group_name,
            vswitch_id=args.vswitch_id,
            network_type="Vpc",
            # Mounts are refused until the rule exists.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[access_rule]),
        )
        self.file_system_id = pulumi.Output.from_input(file_system_id)
        self.mount_target_domain = self.mount_target.mount_target_domain
        self.register_outputs(
            {"file_system_id": self.file_system_id, "mount_target_domain": self.mount_target_domain}
        )
