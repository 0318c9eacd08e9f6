"""What the cloud layer bills: a Capacity NAS in the nodes' zone (a deployed one keeps its type
and zone)."""

from __future__ import annotations

import mock_engine as me

FS = "alicloud:nas/fileSystem:FileSystem"


def test_the_nas_is_a_capacity_file_system_in_the_nodes_zone(dev_config):
    """A new stack's file system: Capacity (billed by the GiB used, the lowest price per GiB) in
    the zone of the node vSwitch, whose zone is ignored once the file system exists."""
    run = me.run_program(dev_config)
    fs = run.one(FS, "tf-mnist-dev-fs")
    assert (fs.inputs["storageType"], fs.inputs["zoneId"]) == ("Capacity", "cn-hangzhou-i")
    assert fs.ignore_changes == ["zoneId"]
    assert run.one("alicloud:vpc/switch:Switch", "tf-mnist-dev-vswitch").inputs["zoneId"] == "cn-hangzhou-i"


def test_a_deployed_file_system_keeps_its_storage_type(dev_config):
    """storage_type is ForceNew: a stack deployed when Performance was the default keeps a
    Performance file system, and the PV that names it, while nas.storageType is unset."""
    fresh = me.run_program(dev_config)
    deployed = me.run_program(dev_config, state=me.deployed_cloud("flannel", storage_type="Performance"))
    assert deployed.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Performance"
    set_so = me.run_program({**dev_config, "tf-mnist:nas.storageType": "Performance"})
    assert deployed.outputs["pvName"] == set_so.outputs["pvName"] != fresh.outputs["pvName"]


def test_a_storage_type_set_wins_over_the_state(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:nas.storageType": "Premium"},
                         state=me.deployed_cloud("terway", storage_type="Performance"))
    assert run.one(FS, "tf-mnist-dev-fs").inputs["storageType"] == "Premium"
