"""Parsers of the cloud layer's values that ACK would otherwise refuse only at `pulumi up`.

The alicloud provider checks none of these at preview (terraform-provider-alicloud v1.271.0
declares no validation for cs_managed_kubernetes ``version`` or cs_kubernetes_node_pool
``instance_types``); ACK refuses a bad one when the cluster or pool is created, after the
network and NAS already exist. The rules here are the forms ACK's own values take.
"""

from __future__ import annotations

import re
from typing import Any

from infra.values.parsers import Parser, string_list

#: ACK Kubernetes versions: ``<major>.<minor>.<patch>-aliyun.<n>`` (DescribeKubernetesVersionMetadata,
#: e.g. 1.33.3-aliyun.1); a bare upstream version ("1.33") or a "v" prefix is refused by ACK.
ACK_VERSION = re.compile(r"^1\.[0-9]{2}\.[0-9]+-aliyun\.[0-9]+$")
#: ECS instance types: ``ecs.<family>.<size>`` (DescribeInstanceTypes), e.g. ecs.gn5-c4g1.xlarge.
INSTANCE_TYPE = re.compile(r"^ecs\.[a-z0-9]+(-[a-z0-9]+)*\.[a-z0-9]+$")
#: vSwitch ids: terraform-provider-alicloud checks cs_managed_kubernetes ``pod_vswitch_ids``
#: against ``^vsw-[a-z0-9]*$`` (at preview, in its own words, without the config key); here
#: with at least one character after the prefix.
VSWITCH_ID = re.compile(r"^vsw-[a-z0-9]+$")
#: NVIDIA Linux driver versions as ACK lists them for its node label
#: ``ack.aliyun.com/nvidia-driver-version``: ``<branch>.<minor>[.<patch>]`` (550.144.03, 570.169).
NVIDIA_DRIVER_VERSION = re.compile(r"^([0-9]{3})\.[0-9]{1,3}(\.[0-9]{1,3})?$")

#: The range of an ACK temporary credential's lifetime, minutes (cs DescribeClusterUserKubeconfig
#: TemporaryDurationMinutes: 15 to 4320).
CREDENTIAL_MINUTES = (15, 4320)


def ack_version(raw: Any) -> str | None:
    """An ACK Kubernetes version such as ``1.33.3-aliyun.1``, or None (unset: the newest)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not ACK_VERSION.match(raw):
        raise ValueError(
            "must be an ACK version <major>.<minor>.<patch>-aliyun.<n> such as 1.33.3-aliyun.1 "
            "(`aliyun cs GET /api/v1/metadata/versions` lists them)"
        )
    return raw


def instance_types(raw: Any) -> tuple[str, ...]:
    """A non-empty list of ECS instance types, each ``ecs.<family>.<size>``."""
    items = string_list(raw)
    bad = [i for i in items if not INSTANCE_TYPE.match(i)]
    if bad:
        raise ValueError(
            f"must be ECS instance types ecs.<family>.<size> such as ecs.gn5-c4g1.xlarge "
            f"(not {', '.join(bad)})"
        )
    return items


def vswitch_id(raw: Any) -> str | None:
    """A vSwitch id such as ``vsw-bp1a2b3c4d5e6f7g8h9i0``, or None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not VSWITCH_ID.match(raw):
        raise ValueError(
            "must be a vSwitch id vsw-<lowercase letters and digits> such as vsw-bp1a2b3c4d5e6f7g8h9i0 "
            "(`aliyun vpc DescribeVSwitches` lists them)"
        )
    return raw


def optional_choice(choices: tuple[str, ...]) -> Parser:
    """Parser of one of ``choices``, or None when unset or empty (the program then works the
    value out itself; see the key's description)."""

    def parse(raw: Any) -> str | None:
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str) or raw not in choices:
            raise ValueError("must be one of " + ", ".join(choices) + " (or unset)")
        return raw

    return parse


def nvidia_driver_version(raw: Any) -> str | None:
    """An NVIDIA driver version such as ``550.144.03``, or None when empty (then no driver label:
    ACK installs its current default, which changes over time)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not NVIDIA_DRIVER_VERSION.match(raw):
        raise ValueError(
            "must be an NVIDIA driver version <branch>.<minor>[.<patch>] such as 550.144.03, one of "
            "ACK's supported versions (ACK installs its default driver for any other), or empty for "
            "ACK's default"
        )
    return raw


def driver_branch(version: str) -> int:
    """The branch of an NVIDIA driver version: 550 for 550.144.03."""
    return int(version.split(".", 1)[0])
