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

Every public name is importable from ``infra.settings`` itself.
"""

from infra.settings.keys import (
    ADDRESS_TYPES,
    DEFAULT_REGISTRY,
    GN5_SYSTEM_DISK_CATEGORIES,
    KEYS,
    KEYS_BY_NAME,
    NAS_STORAGE_TYPES,
    PLACEMENT_ROLES,
    PROJECT,
    PULL_POLICIES,
    SECRET_CAPABLE_KEYS,
    SECRET_CAPABLE_SHOWN,
    SERVICE_TYPES,
    TENSORBOARD_TAG,
    TRAINER_CPU_TAG,
    TRAINER_GPU_TAG,
    VOLUME_KEYS,
    VOLUME_TYPES,
    Key,
    config_table_markdown,
    project_config_schema,
)
from infra.settings.kubeconfig import is_kubeconfig_path, kubeconfig_server
from infra.settings.label_parsers import TAINT_EFFECTS, label_map, node_selector, tolerations
from infra.settings.load import load_settings
from infra.settings.messages import (
    SECRET_SHOWN_AS,
    ConfigError,
    conflict,
    fix_args,
    missing,
    not_applicable,
    secret_refused,
    violation,
)
from infra.settings.model import (
    ClusterSettings,
    Placement,
    PodIdentity,
    RegistryCredentials,
    RegistrySettings,
    Settings,
    StorageSettings,
    TaskSettings,
    TensorBoardSettings,
    TrainingSettings,
    from_key,
    section,
)
from infra.settings.parsers import (
    Parser,
    absolute_path,
    boolean,
    cidr,
    cidr_list,
    data_source,
    dns_label,
    dns_subdomain,
    export_path,
    fraction,
    https_url,
    image_host,
    image_reference,
    integer,
    namespace,
    nfs_server,
    one_of,
    optional_positive_int,
    optional_string,
    pod_gid,
    pod_uid,
    positive_number,
    quantity,
    registry,
    registry_host,
    string_list,
)
from infra.settings.raw import FLAT, PATH, conflicting
from infra.settings.read import unknown_keys
from infra.settings.rules import SYSTEM_NAMESPACES

__all__ = [
    "ADDRESS_TYPES",
    "DEFAULT_REGISTRY",
    "FLAT",
    "GN5_SYSTEM_DISK_CATEGORIES",
    "KEYS",
    "KEYS_BY_NAME",
    "NAS_STORAGE_TYPES",
    "PATH",
    "PLACEMENT_ROLES",
    "PROJECT",
    "PULL_POLICIES",
    "SECRET_CAPABLE_KEYS",
    "SECRET_CAPABLE_SHOWN",
    "SECRET_SHOWN_AS",
    "SERVICE_TYPES",
    "SYSTEM_NAMESPACES",
    "TAINT_EFFECTS",
    "TENSORBOARD_TAG",
    "TRAINER_CPU_TAG",
    "TRAINER_GPU_TAG",
    "VOLUME_KEYS",
    "VOLUME_TYPES",
    "absolute_path",
    "boolean",
    "cidr",
    "cidr_list",
    "ClusterSettings",
    "config_table_markdown",
    "ConfigError",
    "conflict",
    "conflicting",
    "data_source",
    "dns_label",
    "dns_subdomain",
    "export_path",
    "fix_args",
    "fraction",
    "from_key",
    "https_url",
    "image_host",
    "image_reference",
    "integer",
    "is_kubeconfig_path",
    "Key",
    "kubeconfig_server",
    "label_map",
    "load_settings",
    "missing",
    "namespace",
    "nfs_server",
    "node_selector",
    "not_applicable",
    "one_of",
    "optional_positive_int",
    "optional_string",
    "Parser",
    "Placement",
    "pod_gid",
    "pod_uid",
    "PodIdentity",
    "positive_number",
    "project_config_schema",
    "quantity",
    "registry",
    "registry_host",
    "RegistryCredentials",
    "RegistrySettings",
    "secret_refused",
    "section",
    "Settings",
    "StorageSettings",
    "string_list",
    "TaskSettings",
    "TensorBoardSettings",
    "tolerations",
    "TrainingSettings",
    "unknown_keys",
    "violation",
]
