"""Stack configuration: every key, its default and its rule, read and validated in one place.

``load_settings()`` reads each key of the ``tf-mnist`` namespace in both forms the Pulumi CLI
stores (``raw.RawConfig``), checks every value, and either returns a frozen ``Settings`` or
raises one ``ConfigError`` that lists every violation, before the program registers any
resource. The modules:

    keys.py        the key table (KEYS): name, default, rule, fix, description; its Markdown
      key.py         one key (Key), and the recipe's keys (recipe_key)
      key_values.py  the values the rows name: images, choices, bounds
      keys_chart.py, keys_deployment.py, keys_cloud.py, keys_storage.py
                     the table's parts, in its order
    parsers.py     one raw value -> a typed value, or the rule it breaks
      label_parsers.py  labels, node selectors, tolerations
      cloud_parsers.py  ACK's versions, instance types, vSwitch ids, NVIDIA drivers
    raw.py         a key in its two CLI forms (flat, --path)
    messages.py    the violations in Pulumi's wording, and ConfigError
    kubeconfig.py  the kubeconfig setting and the API server it names
    load.py        load_settings(), in phases:
      read.py        every key parsed on its own
      derive.py      what several keys give together (resolve), the Settings (assemble)
      rules.py       the rules between keys
    model.py       Settings and its sections (a field per key: from_key)

The program, its components and tools import the names below from ``infra.settings``; the
modules of this package import each name from the module that defines it.
"""

from infra.settings.key_values import DEFAULT_REGISTRY, PROJECT, TRAINER_CPU_TAG
from infra.settings.keys import KEYS, KEYS_BY_NAME, SECRET_CAPABLE_KEYS, project_config_schema
from infra.settings.kubeconfig import is_kubeconfig_path
from infra.settings.load import load_settings
from infra.settings.messages import ConfigError
from infra.settings.model import (
    ClusterSettings,
    Placement,
    PodIdentity,
    RegistryCredentials,
    RuntimeSettings,
    Settings,
    TaskSettings,
    TensorBoardSettings,
    TrainingSettings,
)

__all__ = [
    "DEFAULT_REGISTRY",
    "KEYS",
    "KEYS_BY_NAME",
    "PROJECT",
    "SECRET_CAPABLE_KEYS",
    "TRAINER_CPU_TAG",
    "ClusterSettings",
    "ConfigError",
    "Placement",
    "PodIdentity",
    "RegistryCredentials",
    "RuntimeSettings",
    "Settings",
    "TaskSettings",
    "TensorBoardSettings",
    "TrainingSettings",
    "is_kubeconfig_path",
    "load_settings",
    "project_config_schema",
]
