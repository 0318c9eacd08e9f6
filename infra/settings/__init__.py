"""Stack configuration: every key, its default and its rule, declared once, read and validated
in one place.

``load_settings()`` reads each key of the ``tf-mnist`` namespace in both forms the Pulumi CLI
stores, checks every value, and either returns a frozen ``Settings`` or raises one
``ConfigError`` that lists every violation, before the program registers any resource. The
modules:

    config.py      the schema: ``Config``, its top-level keys and sections, in table order
      run.py, cloud.py  the sections (worker, ps, ..., gpuPool, nas, ...): a field per key
      keys.py        how a key is declared (``key``), the table it gives (``Key``, ``keys_of``)
      constants.py   the values the keys name: images, choices, bounds
    load.py        load_settings(), in phases:
      read.py        every key parsed on its own (parsers: infra/values/)
      derive.py      what several keys give together (model.Derived), before the rules
      rules.py, cloud_rules.py  the rules between keys, which yield problems
      problems.py    a problem worded as Pulumi words it (key, value, rule, fix), ConfigError
    model.py       Settings: the configuration and what comes of it

The program, its components and tools import the names below from ``infra.settings``.
"""

from infra.settings.config import KEYS, KEYS_BY_NAME, SECRET_CAPABLE_KEYS, Config
from infra.settings.constants import DEFAULT_REGISTRY, PROJECT, TRAINER_CPU_TAG
from infra.settings.load import load_settings
from infra.settings.model import (
    ImageSettings,
    RuntimeSettings,
    Settings,
    TargetSettings,
    TaskSettings,
    TrainingSettings,
)
from infra.settings.problems import ConfigError
from infra.settings.run import PodIdentity

__all__ = [
    "DEFAULT_REGISTRY",
    "KEYS",
    "KEYS_BY_NAME",
    "PROJECT",
    "SECRET_CAPABLE_KEYS",
    "TRAINER_CPU_TAG",
    "Config",
    "ConfigError",
    "ImageSettings",
    "PodIdentity",
    "RuntimeSettings",
    "Settings",
    "TargetSettings",
    "TaskSettings",
    "TrainingSettings",
    "load_settings",
]
