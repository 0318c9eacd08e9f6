"""The NAS storage type's preflight (infra/nas_zones.py): a file system the stack creates must be
of a type NAS DescribeZones lists for its zone; asked at `pulumi up`, before anything is
registered, and never by a plain preview."""

from __future__ import annotations

import mock_engine as me
import pulumi_alicloud as alicloud
import pytest

from infra import nas_zones
from infra.settings import ConfigError

HEADER_1 = "1 invalid configuration value; nothing was deployed:"
FS = "alicloud:nas/fileSystem:FileSystem"
#: The dev stack's zone (Pulumi.dev.yaml).
ZONE = "cn-hangzhou-i"


def zone(zone_id: str, *types: tuple[str, str]) -> dict:
    """One zone of DescribeZones as the engine hands it over: (storage type, protocol) pairs."""
    return {"zoneId": zone_id, "instanceTypes": [{"storageType": s, "protocolType": p} for s, p in types]}


#: A region whose zone i offers Performance only; zones g and h offer both types.
NO_CAPACITY_IN_I = [
    zone("cn-hangzhou-g", ("Performance", "nfs"), ("Capacity", "nfs"), ("Capacity", "smb")),
    zone("cn-hangzhou-h", ("Capacity", "NFS"), ("Performance", "NFS")),
    zone(ZONE, ("Performance", "nfs"), ("Capacity", "smb")),
]


def _nas_calls(run: me.Run) -> list:
    return [c for c in run.calls if c.token == me.NAS_ZONES_TOKEN]


def test_offers_reads_the_sdk_objects_and_the_engine_form_alike():
    sdk = [
        alicloud.nas.outputs.GetZonesZoneResult(
            zone_id="cn-hangzhou-b",
            instance_types=[
                alicloud.nas.outputs.GetZonesZoneInstanceTypeResult(
                    protocol_type="nfs", storage_type="Capacity"
                ),
                alicloud.nas.outputs.GetZonesZoneInstanceTypeResult(
                    protocol_type="smb", storage_type="Premium"
                ),
                alicloud.nas.outputs.GetZonesZoneInstanceTypeResult(
                    protocol_type="NFS", storage_type="Performance"
                ),
            ],
        )
    ]
    # SMB only does not count: the stack's file system is NFS.
    assert nas_zones.offers(sdk) == {"cn-hangzhou-b": ("Capacity", "Performance")}
    assert nas_zones.offers(NO_CAPACITY_IN_I) == {
        "cn-hangzhou-g": ("Performance", "Capacity"),
        "cn-hangzhou-h": ("Capacity", "Performance"),
        ZONE: ("Performance",),
    }


def test_a_type_the_zone_lacks_is_refused_with_the_types_it_has_and_the_zones_that_have_it():
    offered = nas_zones.offers(NO_CAPACITY_IN_I)
    assert nas_zones.refusal(offered, "cn-hangzhou-g", "Capacity") is None
    assert nas_zones.refusal(offered, ZONE, "performance") is None  # NAS's case is not the rule
    assert nas_zones.refusal(offered, ZONE, "Capacity") == (
        f"Configuration 'tf-mnist:nas.storageType' value 'Capacity' is invalid: NAS offers Performance in "
        f"zone {ZONE}, where the stack creates its file system, not Capacity (DescribeZones, NFS); zones that "
        "offer Capacity: cn-hangzhou-g, cn-hangzhou-h.\n"
        "    fix: pulumi config set nas.storageType Performance, or pulumi config set nas.zoneCheck off "
        "(to create it anyway)"
    )


def test_a_zone_nas_does_not_list_is_refused_with_a_zone_that_offers_the_type():
    offered = nas_zones.offers(NO_CAPACITY_IN_I)
    assert nas_zones.refusal(offered, "cn-hangzhou-z", "Capacity") == (
        "Configuration 'tf-mnist:zone' value 'cn-hangzhou-z' is invalid: NAS does not list zone cn-hangzhou-z, "
        "where the stack creates its file system (DescribeZones); zones that offer Capacity: cn-hangzhou-g, "
        "cn-hangzhou-h.\n"
        "    fix: pulumi config set zone cn-hangzhou-g, or pulumi config set nas.zoneCheck off (to create it anyway)"
    )


def test_without_a_zone_any_zone_of_the_region_will_do():
    offered = nas_zones.offers(NO_CAPACITY_IN_I)
    assert nas_zones.refusal(offered, None, "Capacity") is None
    refused = nas_zones.refusal(offered, None, "Premium")
    assert refused is not None and refused.startswith(
        "Configuration 'tf-mnist:nas.storageType' value 'Premium' is invalid: NAS offers no Premium file "
        "system in any zone of the region (DescribeZones lists Capacity, Performance for NFS).\n"
    )


def test_up_refuses_a_type_the_zone_lacks_before_anything_is_registered(dev_config):
    run = me.run_program(dev_config, nas_zones=NO_CAPACITY_IN_I)
    assert isinstance(run.error, ConfigError)
    assert str(run.error) == "\n".join(
        [HEADER_1, nas_zones.refusal(nas_zones.offers(NO_CAPACITY_IN_I), ZONE, "Capacity")]
    )
    assert run.registrations == []
    (call,) = _nas_calls(run)
    assert call.args["fileSystemType"] == "standard"


def test_up_creates_the_file_system_in_a_zone_that_offers_its_type(dev_config):
    run = me.run_program(
        me.set_flat(dev_config, "nas.storageType", "Performance"), nas_zones=NO_CAPACITY_IN_I
    )
    assert run.error is None, run.error
    assert len(_nas_calls(run)) == 1
    fs = run.one(FS, "tf-mnist-dev-fs").inputs
    assert (fs["storageType"], fs["zoneId"]) == ("Performance", ZONE)


def test_a_preview_asks_only_with_always_and_off_never_asks(dev_config):
    plain = me.run_program(dev_config, preview=True, nas_zones=NO_CAPACITY_IN_I)
    assert plain.error is None and _nas_calls(plain) == []
    always = me.run_program(
        me.set_flat(dev_config, "nas.zoneCheck", "always"), preview=True, nas_zones=NO_CAPACITY_IN_I
    )
    assert isinstance(always.error, ConfigError) and "not Capacity" in str(always.error)
    assert always.registrations == []
    off = me.run_program(me.set_flat(dev_config, "nas.zoneCheck", "off"), nas_zones=NO_CAPACITY_IN_I)
    assert off.error is None and _nas_calls(off) == []
    assert off.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Capacity"


def _set(config: dict, **keys: str) -> dict:
    for key, value in keys.items():
        config = me.set_flat(config, key.replace("__", "."), value)
    return config


#: Both keys the settings read the state for, set: the state is read by the check, if at all.
BOTH_SET = {"nas__storageType": "Capacity", "cluster__networkPlugin": "terway"}


@pytest.mark.parametrize("keys", [{}, BOTH_SET], ids=["unset", "set"])
def test_a_file_system_the_state_holds_is_not_asked_about(dev_config, keys):
    """Its type is fixed; whether the zone still offers it to new file systems does not matter.
    The state is read once: by the settings for an unset key, else by the check."""
    state = me.deployed_cloud(plugin="terway", storage_type="Capacity")
    run = me.run_program(_set(dev_config, **keys), state=state, nas_zones=NO_CAPACITY_IN_I)
    assert run.error is None, run.error
    assert _nas_calls(run) == []
    assert len([c for c in run.calls if c.token == me.STATE_TOKEN]) == 1


def test_an_unreadable_state_with_the_keys_set_is_asked_about(dev_config):
    run = me.run_program(
        _set(dev_config, **BOTH_SET),
        unreadable_state="failed to read the backend",
        nas_zones=NO_CAPACITY_IN_I,
    )
    assert isinstance(run.error, ConfigError) and "not Capacity" in str(run.error), run.error
    assert len(_nas_calls(run)) == 1


def test_a_failed_question_warns_and_deploys(dev_config, caplog):
    run = me.run_program(
        dev_config, nas_zones=RuntimeError("Forbidden.RAM: nas:DescribeZones is not allowed")
    )
    assert run.error is None, run.error
    assert run.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Capacity"
    assert (
        f"nas.zoneCheck: could not ask NAS which storage types zone {ZONE} offers (" in caplog.text
        and "Forbidden.RAM" in caplog.text
        and "creating the file system fails if the zone lacks Capacity. Not to ask: pulumi config set "
        "nas.zoneCheck off"
        in caplog.text
    ), caplog.text


def test_no_question_without_a_file_system_to_create(dev_config):
    existing = me.run_program({**dev_config, "tf-mnist:nas.fileSystemId": "0a1b2c3d4e"}, nas_zones=[])
    assert existing.error is None and _nas_calls(existing) == []
    refused = me.run_program(
        {**dev_config, "tf-mnist:nas.fileSystemId": "0a1b2c3d4e", "tf-mnist:nas.zoneCheck": "off"}
    )
    assert (
        "Configuration 'tf-mnist:nas.zoneCheck' value 'off' is invalid: applies only when the stack creates the "
        "NAS file system (nas.fileSystemId names an existing one)"
    ) in str(refused.error)
