"""The configuration keys: name, default, rule, fix and description of each, in one table.

Defaults live only in ``KEYS`` (``Pulumi.yaml`` mirrors the scalar ones, written by
``python -m infra.schema``, and a test keeps the two equal). The table is written in parts, in
its order, one module each: keys_chart.py (the tasks, the recipe, TensorBoard, the data and the
volume), keys_deployment.py (names, images, the Jobs), keys_cloud.py (network, cluster, node
pools) and keys_storage.py (NAS, NFS, hostPath); ``Key`` is in key.py, the values the rows name
(images, choices, bounds) in key_values.py. This module joins the parts, and holds the groups
of keys that the rules between keys name.

A hyperparameter of the recipe is a row of trainer/contract/recipe.py's table, not an entry here
(``recipe_key`` makes its key). Any other new key is an entry in its part of ``KEYS`` and a field
of its section in model.py, ``name: type = from_key("the.key")``; then ``python -m infra.schema``
for Pulumi.yaml. A rule between keys goes in rules.py, a value worked out from several keys in
derive.py.
"""

from __future__ import annotations

from typing import Any

from infra.settings.key import Key
from infra.settings.keys_chart import CHART_KEYS
from infra.settings.keys_cloud import CLOUD_KEYS
from infra.settings.keys_deployment import DEPLOYMENT_KEYS
from infra.settings.keys_storage import STORAGE_KEYS

#: Keys that configure one volume type only, by type (refused with the others).
VOLUME_KEYS = {
    "nas": (
        "nas.storageType",
        "nas.zoneCheck",
        "nas.retainOnDestroy",
        "nas.path",
        "nas.mountTargetDomain",
        "nas.fileSystemId",
    ),
    "nfs": ("nfs.server", "nfs.path"),
    "hostPath": ("hostPath.path",),
}
#: Key prefixes of the cloud layer the stack creates without kubeconfig: with kubeconfig they
#: would shape nothing, so they are refused there (see cloud_rules.py). Not zone: the committed
#: Pulumi.dev.yaml sets it, and a kubeconfig stack is that file plus kubeconfig.
CLOUD_KEY_PREFIXES = ("vpc.", "vswitch.", "cluster.", "gpuPool.", "cpuPool.", "nodePools.")
#: Keys that shape the NAS file system the stack creates (refused when it creates none).
NAS_CREATE_KEYS = ("nas.storageType", "nas.zoneCheck", "nas.retainOnDestroy")
#: Roles whose pods take a node selector and tolerations from config (``<role>.nodeSelector``).
PLACEMENT_ROLES = ("chief", "worker", "ps", "tensorboard")
#: Keys whose value the program carries as a Pulumi secret when set with ``--secret``. Every
#: other value goes into object names, labels, pod specs or plain outputs, so a secret there
#: is refused rather than written out in plain text.
SECRET_CAPABLE_KEYS = (
    "kubeconfig",
    "nas.mountTargetDomain",
    "nfs.server",
    "nfs.path",
    "data.source",
    "registryCredentials.server",
    "registryCredentials.username",
    "registryCredentials.password",
)
#: SECRET_CAPABLE_KEYS as the refusal message lists them.
SECRET_CAPABLE_SHOWN = (
    "kubeconfig",
    "nas.mountTargetDomain",
    "nfs.*",
    "data.source",
    "registryCredentials.*",
)

KEYS: tuple[Key, ...] = (*CHART_KEYS, *DEPLOYMENT_KEYS, *CLOUD_KEYS, *STORAGE_KEYS)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


def project_config_schema() -> dict[str, dict[str, Any]]:
    """The ``config:`` section of Pulumi.yaml, derived from KEYS (tests keep the file equal).

    Only keys the schema can express (string, integer, boolean) are declared, each with its
    default: a declared key without one is *required* by the CLI.
    """
    return {
        k.name: {"type": k.schema_type, "description": k.description, "default": k.default}
        for k in KEYS
        if k.schema_type is not None
    }
