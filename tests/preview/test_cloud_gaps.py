"""The cloud layer's gaps through the real CLI: an existing NAS in cloud mode, and keys that
mean nothing in the chosen mode refused before anything is planned."""

from __future__ import annotations

import pytest

from .engine import PulumiProject, Toolchain
from .test_preview import PV, configure

pytestmark = pytest.mark.engine

DOMAIN = "0f1e2d3c4b-xyz89.cn-hangzhou.nas.aliyuncs.com"


def test_an_existing_mount_target_in_cloud_mode_creates_no_nas(dev_project: PulumiProject,
                                                                toolchain: Toolchain) -> None:
    """nas.mountTargetDomain with vpc.id: a vSwitch in that VPC, no NAS resource, the PV on that domain."""
    configure(dev_project, toolchain, "cloud")
    dev_project.set_config("nas.mountTargetDomain", DOMAIN)
    dev_project.set_config("vpc.id", "vpc-0123456789abcdef")
    preview = dev_project.preview()
    assert preview.returncode == 0, preview.messages()
    assert [r["type"] for r in preview.resources("alicloud:nas/")] == []
    assert [r["type"] for r in preview.resources("alicloud:vpc/network:")] == []
    (vswitch,) = preview.resources("alicloud:vpc/switch:Switch")
    assert vswitch["inputs"]["vpcId"] == "vpc-0123456789abcdef"
    (pv,) = [r for r in preview.resources(PV) if r["type"] == PV]
    assert pv["inputs"]["spec"]["csi"]["volumeAttributes"]["server"] == DOMAIN


@pytest.mark.parametrize("mode,settings,message", [
    ("cluster", {"gpuPool.size": "3"},
     "Configuration 'tf-mnist:gpuPool.size' value '3' is invalid: applies only without kubeconfig"),
    ("cloud", {"nas.mountTargetDomain": DOMAIN},
     f"Configuration 'tf-mnist:nas.mountTargetDomain' value '{DOMAIN}' is invalid: needs vpc.id or vswitch.id"),
], ids=["gpuPool-with-kubeconfig", "domain-without-vpc"])
def test_keys_that_mean_nothing_here_fail_with_the_programs_message(
        dev_project: PulumiProject, toolchain: Toolchain, mode: str, settings: dict, message: str) -> None:
    configure(dev_project, toolchain, mode)
    for key, value in settings.items():
        dev_project.set_config(key, value)
    preview = dev_project.preview()
    output = preview.refused_output()
    assert message in output, output
