"""The NAS storage type's preflight: a new file system only of a type its zone offers.

NAS does not offer every storage type in every zone: DescribeZones (``FileSystemType=standard``)
lists, per zone of the region, the storage types and protocols a new general-purpose file system
can have there (Alibaba Cloud's API reference, File Storage NAS DescribeZones). The provider
passes the call on as ``pulumi_alicloud.nas.get_zones`` (terraform-provider-alicloud
data_source_alicloud_nas_zones.go: ``zones[].zone_id`` and ``zones[].instance_types[]`` of
``storage_type`` and ``protocol_type``). CreateFileSystem refuses a type the zone lacks only when
`pulumi up` creates the file system, by which time the network and the ACK cluster exist.

So before the program registers any resource, ``check`` asks NAS for the zones of the region and
refuses a file system the stack would create of a storage type its zone (the ``zone`` key; with
none, any zone of the region, since NAS then picks one) does not list for NFS, naming the zone,
the type, the types the zone has and the fix. It asks only when the stack creates the file system
(no kubeconfig, nas.mountTargetDomain or nas.fileSystemId) and its state holds none yet: the type
of one that exists is fixed, and the zone's offer no longer matters to it.

When (nas.zoneCheck): ``up`` asks at `pulumi up` only. A preview does not ask: the question
needs the cloud, and an offline preview (tests/preview, with fake keys) has no endpoint, for
which the provider retries its endpoint lookup for minutes. ``always`` asks at preview too;
``off`` never asks. A question that fails (no permission for nas:DescribeZones, no network) only
warns: the answer would have refused nothing for certain, and creating the file system still
fails as before where the zone lacks the type. `pulumi destroy --run-program` runs the program
outside a preview too: on a stack whose state holds no file system (an up this check refused
created nothing) it asks again, and a refusal stops that destroy; a plain `pulumi destroy`, or
nas.zoneCheck off, deletes what there is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_alicloud as alicloud

from infra.deployed import NAS_STORAGE_TYPES, read_deployed
from infra.settings import ConfigError, Settings
from infra.settings.constants import PROJECT
from infra.stack_state import StateUnreadable
from trainer.contract.printable import printable

#: The protocol of the stack's file system (infra/components/nas.py): DescribeZones writes it
#: ``nfs`` or ``NFS`` (its examples show both), so protocols and types compare without case.
PROTOCOL = "nfs"


def offers(zones: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Zone id -> the storage types it offers over NFS, in the order NAS lists them.

    Args:
        zones: ``get_zones(...).zones`` (objects with ``zone_id`` and ``instance_types`` of
            ``storage_type`` and ``protocol_type``), or the same as the engine's dicts
            (``zoneId``, ``instanceTypes``, ``storageType``, ``protocolType``).
    """

    def field(obj: Any, name: str, camel: str) -> Any:
        return obj.get(camel, obj.get(name)) if isinstance(obj, Mapping) else getattr(obj, name, None)

    found: dict[str, tuple[str, ...]] = {}
    for zone in zones:
        types: list[str] = []
        for kind in field(zone, "instance_types", "instanceTypes") or []:
            storage = str(field(kind, "storage_type", "storageType") or "")
            protocol = str(field(kind, "protocol_type", "protocolType") or "")
            if storage and protocol.lower() == PROTOCOL and storage not in types:
                types.append(storage)
        found[str(field(zone, "zone_id", "zoneId"))] = tuple(types)
    return found


def _has(types: Sequence[str], storage_type: str) -> bool:
    return storage_type.lower() in (t.lower() for t in types)


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def refusal(offered: Mapping[str, Sequence[str]], zone: str | None, storage_type: str) -> str | None:
    """The violation (in messages.violation's wording) of a new ``storage_type`` file system in
    ``zone`` (None: NAS picks a zone of the region), given what each zone ``offered``; None when
    that zone (without one: any zone) offers the type.

    The fix keeps the zone where it can: a storage type the zone offers (one nas.storageType
    takes), else a zone that offers the type, else nas.zoneCheck off; the rule names the others.
    """
    where = [z for z, types in offered.items() if _has(types, storage_type)]
    if (zone is None and where) or zone in where:
        return None
    here = offered.get(zone, ()) if zone is not None else sorted({t for ts in offered.values() for t in ts})
    takes = [t for t in NAS_STORAGE_TYPES if _has(here, t)]
    if zone is None:
        rule = (
            f"NAS offers no {storage_type} file system in any zone of the region "
            f"(DescribeZones lists {_listed(here)} for NFS)"
        )
    elif zone not in offered:
        rule = f"NAS does not list zone {zone}, where the stack creates its file system (DescribeZones)"
    else:
        rule = (
            f"NAS offers {_listed(here)} in zone {zone}, where the stack creates its file system, "
            f"not {storage_type} (DescribeZones, NFS)"
        )
    if zone is not None:
        rule += f"; zones that offer {storage_type}: {_listed(where)}"
    if takes:
        key, value, fix = "nas.storageType", storage_type, takes[0]
    elif zone is not None and where:
        key, value, fix = "zone", zone, where[0]
    else:
        key, value, fix = "nas.storageType", storage_type, None
    fix_line = f"pulumi config set {key} {fix}, or " if fix else ""
    return (
        f"Configuration '{PROJECT}:{key}' value '{value}' is invalid: {rule}.\n"
        f"    fix: {fix_line}pulumi config set nas.zoneCheck off (to create it anyway)"
    )


def asks(settings: Settings, dry_run: bool) -> bool:
    """Whether this run asks NAS: the stack creates a file system (nas_storage_type set),
    nas.zoneCheck is ``always``, or ``up`` outside a preview."""
    if settings.target.nas_storage_type is None or settings.nas.zone_check == "off":
        return False
    return settings.nas.zone_check == "always" or not dry_run


def _ask() -> Sequence[Any]:
    """The general-purpose zones of the provider's region, through the provider."""
    return alicloud.nas.get_zones(file_system_type="standard").zones


def check(
    settings: Settings,
    *,
    dry_run: bool,
    ask: Callable[[], Sequence[Any]] = _ask,
    deployed: Callable[[], bool] = lambda: read_deployed().nas_storage_type is not None,
) -> None:
    """Refuse a new NAS file system of a storage type its zone does not offer (module docstring).

    Args:
        dry_run: whether this run is a preview.
        ask: the zones of the region, as ``offers`` takes them (default: the provider's lookup).
        deployed: whether this stack's state holds its file system; called when the settings
            did not read the state (an unreadable state counts as none: the question is asked).

    Raises:
        ConfigError: the zone does not offer the type, with the zone's types and the fix, before
            any resource is registered.
    """
    if not asks(settings, dry_run):
        return
    target, zone = settings.target, settings.zone
    exists = target.nas_deployed
    if exists is None:
        try:
            exists = deployed()
        except StateUnreadable:
            exists = False
    if exists:
        return
    storage_type = target.nas_storage_type
    assert storage_type is not None  # asks() returned True
    try:
        offered = offers(ask())
    except Exception as error:  # the SDK raises a plain Exception holding the provider's reason
        pulumi.log.warn(
            # The provider's reason carries its terminal colours: written as escapes.
            f"nas.zoneCheck: could not ask NAS which storage types zone {zone or '(any)'} offers "
            f"({printable(str(error))}); "
            f"the stack goes on, and creating the file system fails if the zone lacks {storage_type}. "
            "Not to ask: pulumi config set nas.zoneCheck off"
        )
        return
    problem = refusal(offered, zone, storage_type)
    if problem is not None:
        raise ConfigError([problem])
