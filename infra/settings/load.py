"""``load_settings()``: the whole configuration read, checked and turned into Settings."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import pulumi

from infra.deployed import Deployed, read_deployed
from infra.settings.cloud_rules import stack_name, zone_in_region
from infra.settings.config import SECRET_CAPABLE_KEYS, Config
from infra.settings.constants import PROJECT
from infra.settings.derive import derive
from infra.settings.keys import build
from infra.settings.model import Settings
from infra.settings.problems import ConfigError
from infra.settings.read import RawConfig, read
from infra.settings.rules import cross_check


def load_settings(
    config: pulumi.Config | None = None,
    stack: str | None = None,
    deployed: Callable[[], Deployed] = read_deployed,
) -> Settings:
    """Read and validate the whole stack configuration.

    In phases: ``read`` parses every key on its own (and finds keys that are none of the
    stack's), and the values become the typed ``Config``; ``derive`` works out what several
    keys give together (images, the base image and package index by region, the cluster's
    identity, and from the stack's state the network plugin and NAS storage type of what it
    already created, where their keys are unset); ``cross_check`` applies the rules between
    keys; the Settings are both, once no phase found a violation.

    Args:
        config: the ``tf-mnist`` config bag (default ``pulumi.Config("tf-mnist")``).
        stack: the stack name (default ``pulumi.get_stack()``), used in cloud resource names.
        deployed: what the stack's state holds (default: read through the engine), called only
            when an unset key needs it.

    Returns:
        The frozen Settings.

    Raises:
        ConfigError: listing every invalid key at once, each with key, value, rule and fix.
    """
    reading = read(RawConfig(config or pulumi.Config(PROJECT)))
    c: Config = build(Config, reading.values)
    # The provider's region: its config, else the environment variable it also reads.
    region = pulumi.Config("alicloud").get("region") or os.environ.get("ALICLOUD_REGION")
    derived = derive(c, deployed, region)
    cross_check(c, derived, reading)
    stack = stack or pulumi.get_stack()
    reading.add(stack_name(c, stack))
    reading.add(zone_in_region(c, region))
    if reading.problems:
        raise ConfigError(reading.problems)
    return Settings(
        **{f.name: getattr(c, f.name) for f in dataclasses.fields(c)},
        **{f.name: getattr(derived, f.name) for f in dataclasses.fields(derived)},
        project=PROJECT,
        stack=stack,
        secret_keys=frozenset(reading.secrets & set(SECRET_CAPABLE_KEYS)),
    )
