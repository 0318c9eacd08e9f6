"""The stack's configuration, as one schema: ``Config``, its top-level keys and its sections
(infra/settings/run.py, infra/settings/cloud.py), in the order Pulumi.yaml and
docs/configuration.md list the keys (infra/settings/keys.py ``keys_of``).

A new key is a field of its section, ``name: type = key(default, parser, "description")``, and
the code that reads it; then ``python -m infra.schema`` for Pulumi.yaml and
``python scripts/config_table.py --write`` for docs/configuration.md. A hyperparameter of the
recipe is a row of trainer/contract/recipe.py's table instead (``hyperparams``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.settings.cloud import (
    Cluster,
    CpuPool,
    GpuPool,
    HostPath,
    Nas,
    Nfs,
    NodePools,
    Observability,
    Vpc,
    Vswitch,
)
from infra.settings.constants import DEFAULT_NAMESPACE, DEFAULT_REGISTRY
from infra.settings.keys import Key, key, keys_of, part, recipe_part
from infra.settings.run import (
    Chief,
    Data,
    Job,
    Monitor,
    NetworkPolicy,
    PodIdentity,
    Ps,
    Pvc,
    RegistryLogin,
    Scheduling,
    TensorBoard,
    Volume,
    Worker,
)
from infra.values import parsers
from infra.values.parsers import (
    absolute_path,
    boolean,
    dns_label,
    dns_subdomain,
    image_reference,
    optional,
    optional_string,
)


@dataclass(frozen=True, kw_only=True)
class Config:
    """Every key's parsed value (its default while unset), by section."""

    worker: Worker = part("worker")
    ps: Ps = part("ps")
    chief: Chief = part("chief")
    hyperparams: Mapping[str, Any] = recipe_part()
    tensorboard: TensorBoard = part("tensorboard")
    network_policy: NetworkPolicy = part("networkPolicy")
    mount_path: str = key("/data", absolute_path, "Where the shared volume is mounted in every pod.")
    pods: PodIdentity = part("pods")
    data: Data = part("data")
    pvc: Pvc = part("persistence.pvc")
    volume: Volume = part("persistence.volume")
    name_prefix: str = key(
        "mnist", dns_label, "Prefix of every object name (two stacks can share a namespace)."
    )
    namespace: str = key(DEFAULT_NAMESPACE, parsers.namespace, "Kubernetes namespace of the run.")
    create_namespace: bool | None = key(
        None,
        optional(boolean),
        f'Create the namespace (Pod Security "restricted"; deleted on destroy); unset = true for {DEFAULT_NAMESPACE}, '
        "false for any other (leave false when it exists or other stacks share it).",
        fix="false",
    )
    image_registry: str | None = key(
        None,
        parsers.optional_registry,
        "Registry holding your own trainer and tensorboard images built from docker/; unset = no images of "
        "your own: the pods run baseImage.",
        fix=DEFAULT_REGISTRY,
    )
    base_image: str | None = key(
        None,
        image_reference,
        "Public Python 3.11 image the pods run without images of their own (code from ConfigMaps, packages "
        "installed on the volume); unset = by alicloud:region: Alibaba Cloud Linux 3's Python in cn-*, else "
        "python:3.11-slim.",
        fix="python:3.11-slim@sha256:<digest>",
    )
    package_index: str | None = key(
        None,
        parsers.package_index,
        "Package index the setup Job installs the hash-pinned packages from; unset = mirrors.aliyun.com's "
        "PyPI mirror in cn-* regions, else PyPI.",
        fix="https://pypi.org/simple/",
    )
    image_pull_secret: str | None = key(
        None,
        dns_subdomain,
        "docker-registry Secret in the namespace that every pod pulls its image with; with "
        "registryCredentials.* the stack creates it (default name <namePrefix>-registry).",
        fix="acr-pull",
    )
    registry_credentials: RegistryLogin = part("registryCredentials")
    job: Job = part("job")
    scheduling: Scheduling = part("scheduling")
    monitor: Monitor = part("monitor")
    zone: str | None = key(
        None,
        optional_string,
        "Zone of the vSwitch (required when the stack creates the vSwitch) and of a NAS file system the stack "
        "creates.",
        fix="cn-hangzhou-i",
    )
    vpc: Vpc = part("vpc")
    vswitch: Vswitch = part("vswitch")
    cluster: Cluster = part("cluster")
    kubeconfig: str | None = key(
        None,
        optional_string,
        "Skip the cloud layer and deploy into the cluster of this kubeconfig: the file's path, or its content "
        "set with --secret (it holds the cluster's credentials).",
        fix="~/.kube/config",
        secret=True,
    )
    cluster_identifier: str | None = key(
        None,
        optional_string,
        "Identity of the kubeconfig's cluster for the kubernetes provider (a change replaces every Kubernetes "
        "object); default the API server URL of the kubeconfig's current context.",
        fix="my-cluster",
    )
    gpu_pool: GpuPool = part("gpuPool")
    cpu_pool: CpuPool = part("cpuPool")
    node_pools: NodePools = part("nodePools")
    observability: Observability = part("observability")
    nas: Nas = part("nas")
    nfs: Nfs = part("nfs")
    host_path: HostPath = part("hostPath")

    @property
    def creates_cloud(self) -> bool:
        """Whether the stack creates the cloud layer (network, ACK cluster, node pools, NAS): no
        kubeconfig names a cluster to deploy into."""
        return self.kubeconfig is None

    @property
    def creates_network(self) -> bool:
        """Whether the stack creates the vSwitch (and, without vpc.id, the VPC)."""
        return self.creates_cloud and self.vswitch.id is None

    @property
    def creates_cluster(self) -> bool:
        """Whether the stack creates the ACK cluster: no kubeconfig and no cluster.id."""
        return self.creates_cloud and self.cluster.id is None

    @property
    def creates_file_system(self) -> bool:
        """Whether the stack creates a NAS file system: cloud mode on NAS, neither
        nas.mountTargetDomain nor nas.fileSystemId naming an existing one."""
        nas = self.nas
        existing = nas.mount_target_domain is not None or nas.file_system_id is not None
        return self.creates_cloud and self.volume.type == "nas" and not existing

    @property
    def creates_namespace(self) -> bool:
        """Whether the stack creates its namespace: createNamespace, or, unset, whether namespace
        is the stack's own default (constants.DEFAULT_NAMESPACE), which no other stack shares
        unless told to: infra/ownership.py refuses a namespace another stack created."""
        return self.namespace == DEFAULT_NAMESPACE if self.create_namespace is None else self.create_namespace


#: Every key, in the schema's order.
KEYS: tuple[Key, ...] = tuple(keys_of(Config))
KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
#: Keys whose value the program carries as a Pulumi secret when set with ``--secret``
#: (``key(..., secret=True)``). Every other value goes into object names, labels, pod specs or
#: plain outputs, so a secret there is refused rather than written out in plain text.
SECRET_CAPABLE_KEYS: tuple[str, ...] = tuple(k.name for k in KEYS if k.secret)


def section_keys(*sections: str) -> tuple[str, ...]:
    """The names of the keys of the ``Config`` fields ``sections`` (``"gpu_pool"``), in table order.

    Raises:
        ValueError: a name that is no field of ``Config``, which would otherwise give no keys.
    """
    unknown = set(sections) - {f.name for f in dataclasses.fields(Config)}
    if unknown:
        raise ValueError(f"no section of Config: {', '.join(sorted(unknown))}")
    return tuple(k.name for k in KEYS if k.path[0] in sections)
