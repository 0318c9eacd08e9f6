"""Stack configuration: every key, its default and its rule, read and validated in one place.

``load_settings()`` reads each key of the ``tf-mnist`` namespace in both forms the Pulumi CLI
stores (see ``_RawConfig``), checks every value, and either returns a frozen ``Settings`` or
raises one ``ConfigError`` that lists every violation, before the program registers any
resource. Defaults live only in ``KEYS`` below (``Pulumi.yaml`` mirrors the scalar ones and a
test keeps the two equal).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, is_config_secret

from trainer.contract import cluster_spec as cs

PROJECT = "tf-mnist"

#: Default image registry (team contract); images are ``<registry>/<name>:<tag>``.
DEFAULT_REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
TRAINER_GPU_TAG = "trainer:2.21.0-gpu"
TRAINER_CPU_TAG = "trainer:2.21.0-cpu"
TENSORBOARD_TAG = "tensorboard:2.21.0"

#: GN5 takes only these system disk categories (no ESSD); see shared/notes/stack-facts.md.
GN5_SYSTEM_DISK_CATEGORIES = ("cloud_efficiency", "cloud_ssd")
#: Standard (general-purpose) NAS storage types.
NAS_STORAGE_TYPES = ("Performance", "Capacity", "Premium")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
ADDRESS_TYPES = ("internet", "intranet")
#: Where the PV lives (persistence.volume.type): NAS through Alibaba's CSI driver, a plain
#: NFS server (in-tree nfs volume), or a directory of the node (single-node clusters).
VOLUME_TYPES = ("nas", "nfs", "hostPath")
#: Keys that configure one volume type only, by type (refused with the others).
VOLUME_KEYS = {
    "nas": ("nas.storageType", "nas.retainOnDestroy", "nas.path", "nas.mountTargetDomain"),
    "nfs": ("nfs.server", "nfs.path"),
    "hostPath": ("hostPath.path",),
}
#: Namespaces every cluster has: the stack must never create (and on destroy delete) them.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Roles whose pods take a node selector and tolerations from config (``<role>.nodeSelector``).
PLACEMENT_ROLES = ("chief", "worker", "ps", "tensorboard")
#: Keys whose value the program carries as a Pulumi secret when set with ``--secret``. Every
#: other value goes into object names, labels, pod specs or plain outputs, so a secret there
#: is refused rather than written out in plain text.
SECRET_CAPABLE_KEYS = ("kubeconfig", "nas.mountTargetDomain", "nfs.server", "nfs.path",
                       "registryCredentials.server", "registryCredentials.username", "registryCredentials.password")
#: SECRET_CAPABLE_KEYS as the refusal message lists them.
SECRET_CAPABLE_SHOWN = ("kubeconfig", "nas.mountTargetDomain", "nfs.*", "registryCredentials.*")
SECRET_SHOWN_AS = "[secret]"


class ConfigError(pulumi.RunError):
    """Every invalid configuration value of a run, one violation per entry.

    A ``pulumi.RunError`` so the CLI prints the message without a traceback.

    Attributes:
        violations: the formatted lines, one per bad key, in key order.
    """

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        count = len(self.violations)
        header = (f"{count} invalid configuration value{'s' if count != 1 else ''}; "
                  "nothing was deployed:")
        super().__init__("\n".join([header, *self.violations]))


# --- parsers: raw config value -> typed value, or ValueError(rule) -------------------------
#
# Values arrive as strings (flat keys: `pulumi config set worker.number 4` stores "4") or as
# JSON-typed values (structured keys: `pulumi config set --path worker.number 4` stores 4).
# Each parser accepts both and raises ValueError carrying the rule text.

Parser = Callable[[Any], Any]

_INT = re.compile(r"^[+-]?[0-9]+$")


def integer(minimum: int, maximum: Optional[int] = None) -> Parser:
    """Parser of an integer in [minimum, maximum]: an int or a decimal string ("4", not "4.5")."""
    rule = (f"must be an integer >= {minimum}" if maximum is None
            else f"must be an integer between {minimum} and {maximum}")

    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError(rule)
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str) and _INT.match(raw.strip()):
            value = int(raw.strip())
        else:
            raise ValueError(rule)
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(rule)
        return value

    return parse


def positive_number(raw: Any) -> float:
    """A finite number > 0 (float or numeric string); the schema has no float type."""
    rule = "must be a number > 0"
    if isinstance(raw, bool):
        raise ValueError(rule)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(rule) from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(rule)
    return value


def boolean(raw: Any) -> bool:
    """true/false as a bool or the strings the CLI stores."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError("must be true or false")


def one_of(choices: Sequence[str]) -> Parser:
    """Parser accepting exactly one of ``choices`` (case-sensitive, as Kubernetes is)."""
    def parse(raw: Any) -> str:
        if not isinstance(raw, str) or raw not in choices:
            raise ValueError("must be one of " + ", ".join(choices))
        return raw

    return parse


def optional_string(raw: Any) -> Optional[str]:
    """A non-empty string, or None when unset or empty."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ValueError("must be a string")
    return raw


def data_source(raw: Any) -> Optional[str]:
    """Where the staging Job gets MNIST: None (the sample in the image), an http(s) URL, or an
    absolute path inside the trainer image (``python -m trainer.stage --source``)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not re.match(r"^(https?://[^\s/]+[^\s]*|/[^\s]*)$", raw):
        raise ValueError("must be an http(s) URL (of mnist.npz, or of a directory holding the four "
                         "MNIST IDX files) or an absolute path inside the trainer image")
    return raw


# Kubernetes resource.Quantity (k8s.io/apimachinery/pkg/api/resource), restricted to the
# plain forms people write: a non-negative decimal and an optional SI or binary suffix.
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def quantity(raw: Any) -> str:
    """A positive Kubernetes quantity string such as 5Gi."""
    rule = "must be a Kubernetes quantity such as 5Gi, 500Mi or 2 (no spaces)"
    if isinstance(raw, bool):
        raise ValueError(rule)
    text = str(raw) if isinstance(raw, (int, float)) else raw
    if not isinstance(text, str) or not _QUANTITY.match(text) or float(
            re.sub(r"[A-Za-z]+$", "", text)) <= 0:
        raise ValueError(rule)
    return text


# Image reference grammar of github.com/distribution/reference (reference.go):
# [domain[:port]/]path[:tag][@digest], path components lowercase.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# As in the reference implementation, a first segment is a registry host only when it has a
# dot or a port, or is localhost; otherwise it is a (lowercase) path component.
_DOMAIN = (rf"(?:localhost(?::[0-9]+)?|{_LABEL}(?:\.{_LABEL})+(?::[0-9]+)?|{_LABEL}:[0-9]+)")
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")


def image_reference(raw: Any) -> Optional[str]:
    """An OCI image reference, or None when unset (the stack then derives one)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 255 or not _IMAGE.match(raw):
        raise ValueError("must be an image reference such as registry.example.com/team/trainer:2.21.0-cpu")
    return raw


def registry(raw: Any) -> str:
    """A registry host (with a dot, a port, or localhost) and an optional lowercase path."""
    if not isinstance(raw, str) or not re.match(rf"^{_DOMAIN}(?:/{_COMPONENT})*$", raw):
        raise ValueError("must be a registry host with an optional path, such as registry.example.com/team")
    return raw


def dns_label(raw: Any) -> str:
    """A name prefix: DNS-1035 label of <= 40 characters, leaving room for "-worker-NNN"."""
    if not isinstance(raw, str) or not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", raw) or len(raw) > 40:
        raise ValueError("must be a DNS-1035 label of at most 40 characters (lowercase letters, "
                         "digits and '-', starting with a letter)")
    return raw


def namespace(raw: Any) -> str:
    """A Kubernetes namespace name (rule shared with trainer.cluster_spec)."""
    try:
        cs.validate_namespace(raw if isinstance(raw, str) else "")
    except cs.ClusterSpecError:
        raise ValueError("must be a DNS-1123 label (lowercase letters, digits and '-')") from None
    return raw


def absolute_path(raw: Any) -> str:
    """An absolute POSIX path other than "/", without "//", "..", or a trailing slash."""
    if not isinstance(raw, str) or not re.match(r"^/[A-Za-z0-9._/-]*$", raw) or raw == "/" or "//" in raw \
            or raw.endswith("/") or "/../" in raw + "/":
        raise ValueError("must be an absolute path other than '/', such as /data")
    return raw


def export_path(raw: Any) -> Optional[str]:
    """An NFS export path: absolute ("/" allowed: NFSv4 servers often export their root), or
    None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not re.match(r"^/[A-Za-z0-9._/-]*$", raw) or "//" in raw \
            or (raw != "/" and raw.endswith("/")) or "/../" in raw + "/":
        raise ValueError("must be an absolute path such as /exports/tf-mnist")
    return raw


_HOST_LABEL = r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"


def nfs_server(raw: Any) -> Optional[str]:
    """An NFS server: a host name or an IPv4 address, None when unset.

    No ':' and no path, as for NAS (the in-tree nfs volume takes the directory separately).
    """
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 253 or not re.match(rf"^{_HOST_LABEL}(\.{_HOST_LABEL})*$", raw):
        raise ValueError("must be a host name or IPv4 address of the NFS server, without ':' or a path "
                         "(the exported directory goes in nfs.path)")
    return raw


def registry_host(raw: Any) -> Optional[str]:
    """A registry host name with an optional port (no scheme, no path), None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not re.match(rf"^{_DOMAIN}$", raw):
        raise ValueError("must be a registry host such as registry.cn-hangzhou.aliyuncs.com (no scheme, "
                         "no path)")
    return raw


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def dns_subdomain(raw: Any) -> Optional[str]:
    """A Kubernetes object name (DNS-1123 subdomain: Secrets, PriorityClasses), None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 253 or not _DNS_SUBDOMAIN.match(raw):
        raise ValueError("must be a Kubernetes object name (lowercase letters, digits, '-' and '.', at "
                         "most 253 characters)")
    return raw


def cidr(raw: Any) -> str:
    """An IPv4 network in CIDR form with no host bits set."""
    try:
        return str(ipaddress.IPv4Network(raw, strict=True))
    except (TypeError, ValueError):
        raise ValueError("must be an IPv4 CIDR block such as 192.168.0.0/16") from None


def cidr_list(raw: Any) -> tuple[str, ...]:
    """A list of IPv4 CIDRs: a JSON list, a comma-separated string, or a --path list."""
    items = _list(raw)
    try:
        return tuple(str(ipaddress.IPv4Network(i, strict=False)) for i in items)
    except (TypeError, ValueError):
        raise ValueError('must be a list of IPv4 CIDR blocks such as ["203.0.113.0/24"]') from None


def string_list(raw: Any) -> tuple[str, ...]:
    """A non-empty list of non-empty strings (JSON, comma-separated, or a --path list)."""
    items = _list(raw)
    if not items or not all(isinstance(i, str) and i for i in items):
        raise ValueError('must be a non-empty list of strings such as ["ecs.gn5-c4g1.xlarge"]')
    return tuple(items)


def _list(raw: Any) -> list:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = [s.strip() for s in raw.split(",") if s.strip()]
    if not isinstance(raw, list):
        raise ValueError("must be a list")
    return raw


_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_map(raw: Any) -> dict[str, str]:
    """Kubernetes labels (apimachinery validation: qualified-name keys, <= 63-char values)."""
    rule = 'must be a non-empty map of Kubernetes labels such as {"train": "mnist"}'
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError(rule) from None
    if not isinstance(raw, dict) or not raw:
        raise ValueError(rule)
    labels: dict[str, str] = {}
    for key, value in raw.items():
        value = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        prefix, _, name = key.rpartition("/")
        if (not _LABEL_NAME.match(name) or len(name) > 63
                or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)))
                or not isinstance(value, str)
                or len(value) > 63 or (value and not _LABEL_NAME.match(value))):
            raise ValueError(rule)
        labels[key] = value
    return labels


def node_selector(raw: Any) -> dict[str, str]:
    """A pod nodeSelector: a map of Kubernetes labels, possibly empty (= no constraint)."""
    if isinstance(raw, str) and raw.strip() in ("", "{}"):  # '{}' is the fix's own value
        return {}
    if raw is None or raw == {}:
        return {}
    try:
        return label_map(raw)
    except ValueError:
        raise ValueError('must be a map of Kubernetes node labels such as {"tf-mnist/pool": "cpu"}') from None


#: Fields of a Kubernetes toleration (core/v1 Toleration) as the config spells them.
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerations(raw: Any) -> tuple[dict[str, Any], ...]:
    """Pod tolerations: a list of core/v1 Toleration objects (JSON, or a --path list).

    The rules are the API server's (ValidateTolerations in k8s.io/kubernetes
    pkg/apis/core/validation): key a label name, empty only with operator Exists;
    operator Equal (the default) or Exists, which takes no value; value a label value;
    effect NoSchedule, PreferNoSchedule, NoExecute or empty (all effects);
    tolerationSeconds an integer, only with NoExecute. Returns each toleration with
    exactly the fields given (operator filled in).
    """
    rule = ('must be a list of tolerations such as '
            '[{"key":"dedicated","operator":"Equal","value":"training","effect":"NoSchedule"}]')
    if raw in (None, "", []):
        return ()
    try:
        items = _list(raw)
    except ValueError:
        raise ValueError(rule) from None
    out = []
    for item in items:
        if not isinstance(item, dict) or not item or set(item) - set(_TOLERATION_FIELDS):
            raise ValueError(rule)
        key, value = item.get("key", ""), item.get("value", "")
        operator, effect = item.get("operator", "Equal"), item.get("effect", "")
        seconds = item.get("tolerationSeconds")
        if not all(isinstance(v, str) for v in (key, value, operator, effect)):
            raise ValueError(rule)
        prefix, _, name = key.rpartition("/")
        if key and (not _LABEL_NAME.match(name) or len(name) > 63
                    or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)))):
            raise ValueError(rule)
        if operator not in ("Equal", "Exists") or (operator == "Exists" and value) \
                or (not key and operator != "Exists"):
            raise ValueError(rule)
        if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
            raise ValueError(rule)
        if effect and effect not in TAINT_EFFECTS:
            raise ValueError(rule)
        if seconds is not None:
            try:
                seconds = integer(0)(seconds) if not isinstance(seconds, float) or not seconds.is_integer() \
                    else int(seconds)
            except ValueError:
                raise ValueError(rule) from None
            if effect != "NoExecute":
                raise ValueError(rule)
        toleration: dict[str, Any] = {"operator": operator}
        for name_, value_ in (("key", key), ("value", value), ("effect", effect)):
            if value_:
                toleration[name_] = value_
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        out.append(toleration)
    return tuple(out)


def optional_positive_int(raw: Any) -> Optional[int]:
    """An integer >= 1, or None when unset."""
    return None if raw in (None, "") else integer(1)(raw)


# --- the keys ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One configuration key.

    Attributes:
        name: key within the project namespace, dotted like the chart's values
            (``worker.number``); users set it flat or with ``--path``.
        default: used when the key is absent in both forms; a parsed value.
        parse: raw value -> typed value, raising ValueError(rule).
        fix: the value the fix command suggests.
        schema_type: the Pulumi.yaml ``config:`` type, or None where the schema cannot express
            the key (no float or object type there).
        description: one line for Pulumi.yaml.
        fix_key: for a list or a map, the ``--path`` arguments of the fix when the bad value
            was set with ``--path``; set flat, the fix is the key with a JSON value
            (see ``fix_args``).
    """

    name: str
    default: Any
    parse: Parser
    fix: str
    schema_type: Optional[str]
    description: str
    fix_key: Optional[str] = None


KEYS: tuple[Key, ...] = (
    # The chart's keys with the chart's (GPU example) values.
    Key("worker.number", 2, integer(1), "2", "integer", "Number of worker tasks."),
    Key("worker.gpuCount", 1, integer(0), "1", "integer",
        "GPUs per worker, and per chief with ps.number 0 (nvidia.com/gpu); 0 runs them on the CPU node pool."),
    Key("worker.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TRAINER_GPU_TAG}", None,
        "Worker image; default <imageRegistry>/trainer:2.21.0-gpu (or -cpu when gpuCount is 0)."),
    Key("worker.imagePullPolicy", "IfNotPresent", one_of(PULL_POLICIES), "IfNotPresent", "string",
        "Worker image pull policy."),
    Key("worker.port", 8000, integer(1, 65535), "8000", "integer", "gRPC port of worker and chief tasks."),
    Key("worker.cpu", "2", quantity, "2", "string", "CPU request of each worker."),
    Key("worker.memory", "8Gi", quantity, "8Gi", "string", "Memory request and limit of each worker."),
    Key("worker.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the workers must run on (pod nodeSelector; also the chief's when it trains on GPUs, "
        "ps.number 0 with worker.gpuCount > 0); empty = any node."),
    Key("worker.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the workers (and of a GPU chief); GPU pods tolerate the GPU pool's taint anyway."),
    Key("ps.number", 2, integer(0), "2", "integer",
        "Number of parameter servers; 0 trains the workers synchronously."),
    Key("ps.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TRAINER_CPU_TAG}", None,
        "CPU trainer image for ps, chief and data staging; default <imageRegistry>/trainer:2.21.0-cpu."),
    Key("ps.imagePullPolicy", "IfNotPresent", one_of(PULL_POLICIES), "IfNotPresent", "string",
        "ps and chief image pull policy."),
    Key("ps.port", 9000, integer(1, 65535), "9000", "integer", "gRPC port of ps tasks."),
    Key("ps.cpu", "1", quantity, "1", "string", "CPU request of each ps and the chief."),
    Key("ps.memory", "2Gi", quantity, "2Gi", "string", "Memory request and limit of each ps and the chief."),
    Key("ps.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the ps tasks must run on (pod nodeSelector); empty = any node."),
    Key("ps.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the ps tasks (pod tolerations), e.g. for a dedicated, tainted node pool."),
    Key("chief.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels the chief and the data-staging Job must run on (a GPU chief, ps.number 0 with "
        "worker.gpuCount > 0, takes worker.nodeSelector instead); empty = any node."),
    Key("chief.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of the chief and the data-staging Job (a GPU chief takes worker.tolerations)."),
    Key("hyperparams.epochs", 100, integer(1), "100", "integer", "Training epochs."),
    Key("hyperparams.batchsize", 20, integer(1), "20", "integer", "Batch size per worker step."),
    Key("hyperparams.learningrate", 0.001, positive_number, "0.001", None, "Learning rate (> 0)."),
    Key("tensorboard.image", None, image_reference, f"{DEFAULT_REGISTRY}/{TENSORBOARD_TAG}", None,
        "TensorBoard image; default <imageRegistry>/tensorboard:2.21.0."),
    Key("tensorboard.serviceType", "LoadBalancer", one_of(SERVICE_TYPES), "LoadBalancer", "string",
        "TensorBoard Service type."),
    Key("tensorboard.addressType", "internet", one_of(ADDRESS_TYPES), "intranet", "string",
        "ACK load balancer address type (internet or intranet)."),
    Key("tensorboard.allowedSourceRanges", (), cidr_list, "203.0.113.0/24", None,
        "Source CIDRs allowed to reach TensorBoard's load balancer (loadBalancerSourceRanges, and an ACK "
        "ACL when the stack creates the cluster); empty = everyone.",
        "--path 'tensorboard.allowedSourceRanges[0]'"),
    Key("tensorboard.nodeSelector", {}, node_selector, "'{}'", None,
        "Node labels TensorBoard must run on (pod nodeSelector); empty = any node."),
    Key("tensorboard.tolerations", (), tolerations, "'[]'", None,
        "Extra tolerations of TensorBoard (pod tolerations), e.g. for a dedicated, tainted node pool."),
    Key("mountPath", "/data", absolute_path, "/data", "string",
        "Where the shared volume is mounted in every pod."),
    Key("data.source", None, data_source, "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz",
        None, "Where the staging Job gets MNIST: URL of mnist.npz or of a directory of the four IDX "
              "files (checksums verified); default: the 10,000-digit sample in the trainer image."),
    Key("persistence.pvc.storage", "5Gi", quantity, "5Gi", "string", "PV capacity and PVC request."),
    Key("persistence.pvc.matchLabels", {"train": "mnist"}, label_map, "mnist", None,
        "Labels on the PV that the PVC selects.", "--path persistence.pvc.matchLabels.train"),
    Key("persistence.volume.type", "nas", one_of(VOLUME_TYPES), "nas", "string",
        "Where the PV lives: nas (Alibaba NAS through CSI), nfs (an NFS server: nfs.server, nfs.path) or "
        "hostPath (a directory on a single-node cluster: hostPath.path; with kubeconfig only)."),
    # Names and images.
    Key("namePrefix", "mnist", dns_label, "mnist", "string",
        "Prefix of every object name (two stacks can share a namespace)."),
    Key("namespace", "default", namespace, "default", "string", "Kubernetes namespace of the run."),
    Key("createNamespace", False, boolean, "true", "boolean",
        "Create the namespace (leave false when it exists or other stacks share it)."),
    Key("imageRegistry", DEFAULT_REGISTRY, registry, DEFAULT_REGISTRY, "string",
        "Registry holding the trainer and tensorboard images built from docker/."),
    Key("imagePullSecret", None, dns_subdomain, "acr-pull", None,
        "docker-registry Secret in the namespace that every pod pulls its image with; with "
        "registryCredentials.* the stack creates it (default name <namePrefix>-registry)."),
    Key("registryCredentials.server", None, registry_host, "registry.cn-hangzhou.aliyuncs.com", None,
        "Registry the created pull Secret logs in to; default the host of imageRegistry."),
    Key("registryCredentials.username", None, optional_string, "<username>", None,
        "Registry user name for the pull Secret the stack creates (with registryCredentials.password)."),
    Key("registryCredentials.password", None, optional_string, "<password>", None,
        "Registry password for the pull Secret the stack creates; set it with --secret."),
    Key("job.backoffLimit", 4, integer(0), "4", "integer", "Pod retries of each task's Job."),
    Key("job.waitForChief", False, boolean, "true", "boolean",
        "Make `pulumi up` wait until the chief's Job completes."),
    Key("job.waitTimeoutMinutes", 180, integer(1), "180", "integer",
        "How long `pulumi up` waits for the chief when job.waitForChief is true."),
    Key("job.activeDeadlineSeconds", None, optional_positive_int, "86400", None,
        "Seconds each training Job may run before Kubernetes fails it (activeDeadlineSeconds); unset = no limit."),
    # 60 s at least: the chief beats every 5 s, but NFS attribute caching (acregmax, 60 s by
    # default) can show a server a heartbeat that old, and a pod restart takes longer anyway.
    Key("job.peerTimeoutSeconds", 600, integer(60), "600", "integer",
        "Seconds a task waits for a lost peer or the chief before exiting non-zero (trainer --peer_timeout)."),
    Key("job.priorityClassName", None, dns_subdomain, "high-priority", None,
        "PriorityClass of the training and data-staging pods; unset = the cluster's default."),
    # Cloud layer.
    Key("zone", None, optional_string, "cn-hangzhou-i", None,
        "Zone of the vSwitch (required when the stack creates the vSwitch)."),
    Key("vpc.id", None, optional_string, "vpc-xxxxxxxx", None, "Existing VPC to create the vSwitch in."),
    Key("vpc.cidr", "192.168.0.0/16", cidr, "192.168.0.0/16", "string", "CIDR of a new VPC."),
    Key("vswitch.id", None, optional_string, "vsw-xxxxxxxx", None,
        "Existing vSwitch for nodes and the NAS mount target (set vswitch.cidr to its CIDR)."),
    Key("vswitch.cidr", "192.168.0.0/20", cidr, "192.168.0.0/20", "string",
        "CIDR of the node vSwitch; the NAS access rule authorises it."),
    Key("cluster.id", None, optional_string, "c0123456789abcdef", None, "Existing ACK cluster to use."),
    Key("cluster.version", None, optional_string, "1.33.3-aliyun.1", None,
        "Kubernetes version of a new cluster; default the newest."),
    Key("cluster.podCidr", "172.20.0.0/16", cidr, "172.20.0.0/16", "string", "Flannel pod CIDR."),
    Key("cluster.serviceCidr", "172.21.0.0/20", cidr, "172.21.0.0/20", "string", "Service CIDR."),
    Key("cluster.apiServerPublic", True, boolean, "true", "boolean",
        "Expose the API server on an internet load balancer (Pulumi must reach it)."),
    Key("kubeconfig", None, optional_string, "~/.kube/config", None,
        "Skip the cloud layer and deploy into the cluster of this kubeconfig (path or content)."),
    Key("clusterIdentifier", None, optional_string, "my-cluster", None,
        "Identity of the kubeconfig's cluster for the kubernetes provider (a change replaces every Kubernetes "
        "object); default the API server URL of the kubeconfig's current context."),
    Key("gpuPool.instanceTypes", ("ecs.gn5-c4g1.xlarge",), string_list, "ecs.gn5-c4g1.xlarge", None,
        "GPU instance types, tried in order.", "--path 'gpuPool.instanceTypes[0]'"),
    Key("gpuPool.gpusPerInstance", 1, integer(1), "1", "integer",
        "GPUs per GPU instance (1 for ecs.gn5-c4g1.xlarge)."),
    Key("gpuPool.size", None, optional_positive_int, "2", None,
        "GPU nodes; default ceil(GPU pods x worker.gpuCount / gpuPool.gpusPerInstance), GPU pods being the "
        "workers, plus the chief with ps.number 0."),
    Key("gpuPool.autoscaling", False, boolean, "true", "boolean",
        "Autoscale the GPU pool between 0 and gpuPool.size nodes."),
    Key("gpuPool.systemDiskCategory", "cloud_efficiency", one_of(GN5_SYSTEM_DISK_CATEGORIES),
        "cloud_efficiency", "string", "System disk category of GPU nodes (GN5: no ESSD)."),
    Key("gpuPool.systemDiskSize", 120, integer(40, 2048), "120", "integer", "System disk GiB of GPU nodes."),
    Key("cpuPool.instanceTypes", ("ecs.g6.xlarge",), string_list, "ecs.g6.xlarge", None,
        "CPU instance types for ps, chief, TensorBoard (and CPU workers).", "--path 'cpuPool.instanceTypes[0]'"),
    Key("cpuPool.size", 2, integer(1), "2", "integer", "CPU nodes."),
    Key("cpuPool.systemDiskCategory", "cloud_essd", one_of(("cloud_efficiency", "cloud_ssd", "cloud_essd")),
        "cloud_essd", "string", "System disk category of CPU nodes."),
    Key("nodePools.keyName", None, optional_string, "my-key-pair", None, "ECS key pair for node login."),
    Key("nas.storageType", "Performance", one_of(NAS_STORAGE_TYPES), "Performance", "string",
        "Standard NAS storage type."),
    Key("nas.retainOnDestroy", True, boolean, "false", "boolean",
        "Keep the NAS file system (and its data) when the stack is destroyed."),
    Key("nas.path", "/data", absolute_path, "/data", "string", "Directory on the NAS that the PV mounts."),
    Key("nas.mountTargetDomain", None, optional_string, "xxxx.cn-hangzhou.nas.aliyuncs.com", None,
        "Existing NAS mount target (with kubeconfig: the stack then creates no NAS)."),
    Key("nfs.server", None, nfs_server, "nfs.example.internal", None,
        "NFS server of persistence.volume.type nfs (host name or IP address)."),
    Key("nfs.path", None, export_path, "/exports/tf-mnist", None,
        "Exported directory that the PV mounts (persistence.volume.type nfs)."),
    Key("hostPath.path", "/var/lib/tf-mnist", absolute_path, "/var/lib/tf-mnist", "string",
        "Directory on the node that backs the PV (persistence.volume.type hostPath; created when missing)."),
)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


# --- typed settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSettings:
    """One task type's container settings (image already resolved)."""

    image: str
    image_pull_policy: str
    port: int
    cpu: str
    memory: str


@dataclass(frozen=True)
class Placement:
    """Where one role's pods may run: ``<role>.nodeSelector`` and ``<role>.tolerations``.

    Attributes:
        node_selector: node label -> value (pod spec nodeSelector); empty = any node.
        tolerations: core/v1 Toleration objects, camelCase fields as Kubernetes spells them.
            The GPU pool's taint toleration is not among them: the training component adds
            it to every pod that requests a GPU.
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RegistryCredentials:
    """Login for the pull Secret the stack creates (registryCredentials.*).

    Never printed: ``repr`` leaves the fields out, and the program passes them to Kubernetes
    only inside ``pulumi.Output.secret``.
    """

    server: str = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)


@dataclass(frozen=True)
class Settings:
    """The validated configuration of one stack.

    ``replicas`` always has one chief (the coordinator) beside ``ps.number`` ps and
    ``worker.number`` workers (team contract).
    """

    project: str
    stack: str
    name_prefix: str
    namespace: str
    create_namespace: bool
    replicas: cs.Replicas
    worker: TaskSettings
    gpu_count: int
    ps: TaskSettings
    chief: TaskSettings
    staging_image: str
    epochs: int
    batch_size: int
    learning_rate: float
    mount_path: str
    #: staging source (``trainer.stage --source``); None = the sample in the trainer image.
    data_source: Optional[str]
    storage: str
    match_labels: Mapping[str, str]
    tensorboard_image: str
    tensorboard_service_type: str
    tensorboard_address_type: str
    tensorboard_source_ranges: tuple[str, ...]
    backoff_limit: int
    wait_for_chief: bool
    wait_timeout_minutes: int
    #: job.activeDeadlineSeconds of every training Job; None = no deadline.
    active_deadline_seconds: Optional[int]
    #: trainer --peer_timeout of every task, seconds.
    peer_timeout_seconds: int
    #: PriorityClass of the training and staging pods; None = the cluster's default.
    priority_class_name: Optional[str]
    #: role (chief, worker, ps, tensorboard, stage-data) -> Placement, resolved: a GPU chief
    #: has the workers' placement, the staging Job the chief.* keys' (see KEYS).
    placement: Mapping[str, Placement]
    #: Whether the chief trains on GPUs like the workers (ps.number 0, worker.gpuCount > 0):
    #: MultiWorkerMirroredStrategy's collectives refuse a group mixing CPU and GPU devices.
    chief_uses_gpu: bool
    #: docker-registry Secret every pod pulls with; None = the nodes' own credentials.
    image_pull_secret: Optional[str]
    #: When set, the stack creates ``image_pull_secret`` from these.
    registry_credentials: Optional[RegistryCredentials]
    #: persistence.volume.type: nas, nfs or hostPath.
    volume_type: str
    nfs_server: Optional[str]
    nfs_path: Optional[str]
    host_path: str
    # cloud
    create_cloud: bool
    zone: Optional[str]
    vpc_id: Optional[str]
    vpc_cidr: str
    vswitch_id: Optional[str]
    vswitch_cidr: str
    cluster_id: Optional[str]
    cluster_version: Optional[str]
    pod_cidr: str
    service_cidr: str
    api_server_public: bool
    kubeconfig: Optional[str]
    #: The kubernetes provider's cluster_identifier in kubeconfig mode (clusterIdentifier,
    #: or the API server URL of the kubeconfig's current context); None in cloud mode.
    cluster_identifier: Optional[str]
    #: Whether cluster_identifier was read from the kubeconfig (not set as clusterIdentifier).
    cluster_identifier_from_kubeconfig: bool
    gpu_instance_types: tuple[str, ...]
    gpus_per_instance: int
    gpu_pool_size: int
    gpu_autoscaling: bool
    gpu_system_disk_category: str
    gpu_system_disk_size: int
    cpu_instance_types: tuple[str, ...]
    cpu_pool_size: int
    cpu_system_disk_category: str
    key_name: Optional[str]
    nas_storage_type: str
    nas_retain: bool
    nas_path: str
    nas_mount_target_domain: Optional[str]
    ports: Mapping[str, int] = field(default_factory=dict)
    #: Keys (of SECRET_CAPABLE_KEYS) set with ``--secret``: the program wraps them in
    #: ``pulumi.Output.secret``.
    secret_keys: frozenset[str] = frozenset()

    @property
    def data_dir(self) -> str:
        """Where staging puts MNIST and the trainer reads it (team contract)."""
        return f"{self.mount_path}/mnist"

    @property
    def log_dir(self) -> str:
        """Trainer --log_dir and TensorBoard --logdir (team contract)."""
        return f"{self.mount_path}/runs/{self.name_prefix}"

    def uses_gpu(self, task_type: str) -> bool:
        """Whether ``task_type``'s pods request GPUs: workers with worker.gpuCount > 0, and
        then the chief too when it trains with them (``chief_uses_gpu``)."""
        return self.gpu_count > 0 and (task_type == "worker" or (task_type == "chief" and self.chief_uses_gpu))

    @property
    def uses_gpu_pool(self) -> bool:
        return self.gpu_count > 0 and self.create_node_pools

    @property
    def create_node_pools(self) -> bool:
        return self.kubeconfig is None


class _RawConfig:
    """Reads a key in both forms the CLI stores.

    `pulumi config set worker.number 4` stores the flat key ``tf-mnist:worker.number`` = "4";
    `pulumi config set --path worker.number 4` stores ``tf-mnist:worker`` = {"number": 4}.
    The flat key is the one used when both exist: the CLI writes Pulumi.yaml's defaults through
    the structured form, so a structured value equal to the default beside a flat one may be
    that default. Any other pair of different values is a conflict that ``load_settings``
    reports (``conflicting``): silently dropping one would ignore a command the user ran.
    """

    def __init__(self, config: pulumi.Config) -> None:
        self._config = config

    def get(self, name: str) -> tuple[Any, Optional[str]]:
        """The value the program uses and the form it came from: FLAT, PATH, or None when unset."""
        flat, structured = self.forms(name)
        if flat is not None:
            return flat, FLAT
        if structured is not None:
            return structured, PATH
        return None, None

    @staticmethod
    def is_secret(name: str, form: Optional[str]) -> bool:
        """Whether the value of ``name`` in ``form`` was set with ``--secret``.

        The CLI names the flat key, or for a structured value the top-level key that holds it.
        """
        if form == FLAT:
            return is_config_secret(f"{PROJECT}:{name}")
        if form == PATH:
            return is_config_secret(f"{PROJECT}:{name.split('.')[0]}")
        return False

    def forms(self, name: str) -> tuple[Any, Any]:
        """``(flat value, structured value)`` of a key, None where that form is not set."""
        flat = self._config.get(name)
        head, *path = name.split(".")
        if not path:
            return flat, None
        raw = self._config.get(head)
        if raw is None:
            return flat, None
        try:
            node: Any = json.loads(raw)
        except ValueError:
            return flat, None
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return flat, None
            node = node[part]
        return flat, node


#: The two forms a value can be set in (see _RawConfig).
FLAT = "flat"
PATH = "path"


def fix_args(key: Key, form: Optional[str]) -> tuple[str, str]:
    """``(key arguments, value)`` of the fix command, in the form the bad value was set.

    The program reads a flat key before the structured one, so a structured fix cannot
    replace a flat value: a flat list or map gets a flat JSON value (which ``cidr_list``,
    ``string_list`` and ``label_map`` accept), a structured value gets ``--path``.
    """
    if form == PATH and "." in key.name:
        return (key.fix_key, key.fix) if key.fix_key else (f"--path {key.name}", key.fix)
    if key.fix_key:  # a list or a map, set flat
        if isinstance(key.default, Mapping):
            example: Any = dict(key.default)
        else:
            example = list(key.default) or [key.fix]
        return key.name, shlex.quote(json.dumps(example, separators=(",", ":")))
    return key.name, key.fix


def _show(raw: Any, secret: bool = False) -> str:
    if secret:
        return SECRET_SHOWN_AS
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (dict, list)):
        return json.dumps(raw, separators=(",", ":"))
    return str(raw)


def conflicting(key: Key, flat: Any, structured: Any) -> bool:
    """True when a key set both flat and with --path holds two different values.

    A valid structured value equal to the key's default is not a conflict: the CLI writes
    Pulumi.yaml's default there by itself (and the flat value is then the user's).
    """
    def parsed(raw: Any) -> tuple[bool, Any]:
        try:
            return True, key.parse(raw)
        except ValueError:
            return False, None

    structured_ok, structured_value = parsed(structured)
    if structured_ok and structured_value == key.default:
        return False
    flat_ok, flat_value = parsed(flat)
    return not (structured_ok and flat_ok and flat_value == structured_value)


def conflict(key: str, flat: Any, structured: Any, flat_secret: bool = False,
             structured_secret: bool = False) -> str:
    """The violation of a key set both ways to different values, with both ways out."""
    flat_shown, structured_shown = _show(flat, flat_secret), _show(structured, structured_secret)
    return (f"Configuration '{PROJECT}:{key}' is set twice, to '{flat_shown}' (flat) and to "
            f"'{structured_shown}' (--path): a key must be set one way only.\n"
            f"    fix: pulumi config rm {key} (keeps '{structured_shown}'), "
            f"or pulumi config rm --path {key} (keeps '{flat_shown}')")


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """Violations for project keys the program does not read (typos such as worker.numbr).

    Args:
        config: every ``tf-mnist:`` key the engine passed, without the prefix, as the CLI
            hands them over (a structured value as its JSON text).

    A flat key must be a name in KEYS; a structured value (under the first segment of a dotted
    name) may hold only paths that lead to one. Values of keys that are maps (matchLabels) are
    not looked into.
    """
    names = set(KEYS_BY_NAME)
    heads = {name.split(".")[0] for name in names if "." in name}
    found: list[tuple[str, Any, bool, bool]] = []  # path, value, structured, secret

    def leads_to_a_key(path: str) -> bool:
        return any(name.startswith(path + ".") for name in names)

    def walk(path: str, node: Any, secret: bool) -> None:
        if path in names:
            return
        if isinstance(node, dict) and leads_to_a_key(path):
            for part, child in node.items():
                walk(f"{path}.{part}", child, secret)
            return
        found.append((path, node, True, secret))

    for name, raw in config.items():
        secret = is_config_secret(f"{PROJECT}:{name}")
        if name in names:
            continue
        if name in heads:
            try:
                node = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                node = raw
            if isinstance(node, dict):
                for part, child in node.items():
                    walk(f"{name}.{part}", child, secret)
                continue
        found.append((name, raw, False, secret))

    out = []
    for path, raw, structured, secret in sorted(found, key=lambda f: f[0]):
        close = difflib.get_close_matches(path, sorted(names | heads), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(f"Configuration '{PROJECT}:{path}' value '{_show(raw, secret)}' is not a setting of this "
                   f"stack{hint}: the program would ignore it.\n"
                   f"    fix: pulumi config rm {'--path ' if structured else ''}{path}")
    return out


def _project_config() -> dict[str, Any]:
    """Every ``tf-mnist:`` key of this run (the engine's config), without the prefix."""
    merged = {**get_config_env(), **CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {key[len(prefix):]: value for key, value in merged.items() if key.startswith(prefix)}


def violation(key: str, raw: Any, rule: str, fix_key: str, fix_value: str, secret: bool = False) -> str:
    """One violation in Pulumi's own wording: key, value, rule, then the fix command.

    A value set with ``--secret`` is shown as ``[secret]``, never as its plaintext.
    """
    return (f"Configuration '{PROJECT}:{key}' value '{_show(raw, secret)}' is invalid: {rule}.\n"
            f"    fix: pulumi config set {fix_key} {fix_value}")


def secret_refused(name: str, structured: bool) -> str:
    """The violation of a secret the stack would write out in plain text (value not shown)."""
    capable = ", ".join(SECRET_CAPABLE_SHOWN[:-1]) + " and " + SECRET_CAPABLE_SHOWN[-1]
    if structured:
        return (f"Configuration '{PROJECT}:{name}' holds a secret: the stack writes {name}.* values into "
                "Kubernetes objects and stack outputs in plain text, so they cannot stay secret "
                f"(only {capable} can).\n"
                f"    fix: pulumi config set --path {name}.<key> <value> (again, without --secret)")
    return (f"Configuration '{PROJECT}:{name}' is a secret: the stack writes this value into Kubernetes "
            "objects and stack outputs in plain text, so it cannot stay secret "
            f"(only {capable} can).\n"
            f"    fix: pulumi config set {name} <value> (again, without --secret)")


def not_applicable(key: str, raw: Any, rule: str, form: Optional[str], secret: bool = False) -> str:
    """The violation of a key that the rest of the configuration makes meaningless: its fix
    removes it, in the form it was set."""
    return (f"Configuration '{PROJECT}:{key}' value '{_show(raw, secret)}' is invalid: {rule}.\n"
            f"    fix: pulumi config rm {'--path ' if form == PATH else ''}{key}")


def missing(key: str, rule: str, fix: Optional[str] = None, secret: bool = False) -> str:
    """The violation of a required key that is not set."""
    return (f"Configuration '{PROJECT}:{key}' is missing: {rule}.\n"
            f"    fix: pulumi config set {'--secret ' if secret else ''}{key} {fix or KEYS_BY_NAME[key].fix}")


def is_kubeconfig_path(value: str) -> bool:
    """Whether the ``kubeconfig`` setting is a file path rather than kubeconfig content.

    Content is YAML over several lines or JSON (``{...}``); the kubernetes provider takes either
    and expands a leading ``~`` of a path itself.
    """
    return "\n" not in value and not value.lstrip().startswith("{")


def kubeconfig_server(kubeconfig: str) -> str:
    """The API server URL of the kubeconfig's current context: the cluster the provider uses.

    Args:
        kubeconfig: the ``kubeconfig`` setting, a path (``~`` expanded) or the content.

    Returns:
        ``clusters[<current context's cluster>].cluster.server``; a kubeconfig without a
        current context but with exactly one cluster gives that cluster's (as kubectl would
        need a context anyway, this only spares hand-written files).

    Raises:
        ValueError: the rule, when the file cannot be read or names no server.
    """
    import yaml  # a dependency of the pulumi SDK itself

    text = kubeconfig
    if is_kubeconfig_path(kubeconfig):
        try:
            text = Path(kubeconfig).expanduser().read_text()
        except OSError as error:
            raise ValueError(f"cannot be read ({error.strerror or error}), so the stack cannot tell which "
                             "cluster it names (set it to an existing kubeconfig file, or set "
                             "clusterIdentifier)") from None
    rule = ("names no API server in its current context, so the stack cannot tell which cluster it is "
            "(fix the kubeconfig, or set clusterIdentifier)")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError(rule) from None
    if not isinstance(document, dict):
        raise ValueError(rule)

    def named(section: str, name: Any) -> Optional[dict]:
        for entry in document.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry.get(section[:-1]) if isinstance(entry.get(section[:-1]), dict) else None
        return None

    clusters = [c for c in document.get("clusters") or [] if isinstance(c, dict)]
    context = named("contexts", document.get("current-context"))
    if context is not None:
        cluster = named("clusters", context.get("cluster"))
    elif not document.get("current-context") and len(clusters) == 1:
        cluster = clusters[0].get("cluster") if isinstance(clusters[0].get("cluster"), dict) else None
    else:
        cluster = None
    server = cluster.get("server") if cluster else None
    if not isinstance(server, str) or not server.strip():
        raise ValueError(rule)
    return server.strip()


def image_host(image: str) -> str:
    """The registry host of an image reference (distribution/reference's rule: a first
    segment with a dot or a port, or localhost, is a host; otherwise Docker Hub)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def load_settings(config: Optional[pulumi.Config] = None, stack: Optional[str] = None) -> Settings:
    """Read and validate the whole stack configuration.

    Args:
        config: the ``tf-mnist`` config bag (default ``pulumi.Config("tf-mnist")``).
        stack: the stack name (default ``pulumi.get_stack()``), used in cloud resource names.

    Returns:
        The frozen Settings.

    Raises:
        ConfigError: listing every invalid key at once, each with key, value, rule and fix.
    """
    raw_config = _RawConfig(config or pulumi.Config(PROJECT))
    problems: list[str] = []
    values: dict[str, Any] = {}
    raws: dict[str, Any] = {}
    forms: dict[str, Optional[str]] = {}
    secrets: set[str] = set()
    refused_heads: set[str] = set()
    #: key -> index in problems of its own value's violation (replaced where a later check
    #: finds the key does not apply at all: removing it is the one fix then).
    own_problem: dict[str, int] = {}
    capable_heads = {k.split(".")[0] for k in SECRET_CAPABLE_KEYS if "." in k} - {
        k.name.split(".")[0] for k in KEYS if k.name not in SECRET_CAPABLE_KEYS}
    for key in KEYS:
        raw, form = raw_config.get(key.name)
        raws[key.name] = raw
        forms[key.name] = form
        flat, structured = raw_config.forms(key.name)
        flat_secret = flat is not None and raw_config.is_secret(key.name, FLAT)
        structured_secret = structured is not None and raw_config.is_secret(key.name, PATH)
        head = key.name.split(".")[0]
        # `config set --secret --path a.b` makes all of `a` secret: fine where every key under
        # `a` can stay secret (registryCredentials.*), refused elsewhere.
        if structured_secret and head not in refused_heads and head not in capable_heads:
            refused_heads.add(head)
            problems.append(secret_refused(head, structured=True))
        if flat_secret and key.name not in SECRET_CAPABLE_KEYS:
            problems.append(secret_refused(key.name, structured=False))
        if flat_secret if form == FLAT else structured_secret:
            secrets.add(key.name)
        if flat is not None and structured is not None and conflicting(key, flat, structured):
            own_problem[key.name] = len(problems)
            problems.append(conflict(key.name, flat, structured, flat_secret, structured_secret))
            values[key.name] = key.default
            continue
        if raw is None:
            values[key.name] = key.default
            continue
        try:
            values[key.name] = key.parse(raw)
        except ValueError as error:
            own_problem[key.name] = len(problems)
            problems.append(violation(key.name, raw, str(error), *fix_args(key, form),
                                      secret=key.name in secrets))
            values[key.name] = key.default

    problems += unknown_keys(_project_config())

    def bad(name: str, rule: str, fix_key: Optional[str] = None, fix_value: Optional[str] = None,
            shown: Optional[str] = None) -> None:
        fix_name = fix_key or name
        args, value = fix_args(KEYS_BY_NAME[fix_name], forms[fix_name])
        problems.append(violation(name, shown or (raws[name] if raws[name] is not None else values[name]), rule,
                                  args, fix_value or value, secret=name in secrets))

    def is_set(name: str) -> bool:
        """Set by the user: flat at all, or with --path to other than the default (which the
        CLI writes there by itself for keys Pulumi.yaml declares)."""
        flat, structured = raw_config.forms(name)
        if flat is not None:
            return True
        if structured is None:
            return False
        try:
            return KEYS_BY_NAME[name].parse(structured) != KEYS_BY_NAME[name].default
        except ValueError:
            return True

    def refuse(name: str, rule: str) -> None:
        """``name`` does not apply: replace its own violation, if any, by this one."""
        message = not_applicable(name, raws[name], rule, forms[name], secret=name in secrets)
        if name in own_problem:
            problems[own_problem[name]] = message
        else:
            problems.append(message)

    v = values
    if v["ps.port"] == v["worker.port"]:
        bad("ps.port", f"must differ from worker.port ({v['worker.port']})", "ps.port",
            str(v["worker.port"] + 1000 if v["worker.port"] <= 64535 else v["worker.port"] - 1000))
    kubeconfig = v["kubeconfig"]
    if kubeconfig is None and v["worker.gpuCount"] > v["gpuPool.gpusPerInstance"]:
        # A pod's GPUs come from one node: a bigger request stays Pending on every GPU node.
        bad("worker.gpuCount", f"must be at most gpuPool.gpusPerInstance ({v['gpuPool.gpusPerInstance']}), "
            "the GPUs of one node (or choose larger gpuPool.instanceTypes and set gpuPool.gpusPerInstance)",
            "worker.gpuCount", str(v["gpuPool.gpusPerInstance"]))
    create_network = kubeconfig is None and v["vswitch.id"] is None
    if create_network and v["cluster.id"] is not None:
        bad("cluster.id", "needs vswitch.id (and vswitch.cidr) of the cluster's node vSwitch",
            "vswitch.id", KEYS_BY_NAME["vswitch.id"].fix)
    if create_network and not v["zone"]:
        problems.append(
            f"Configuration '{PROJECT}:zone' is missing: required when the stack creates the vSwitch.\n"
            f"    fix: pulumi config set zone {KEYS_BY_NAME['zone'].fix}")
    volume_type = v["persistence.volume.type"]
    if kubeconfig is None and volume_type != "nas":
        # The cluster the stack creates has several nodes (a CPU pool, a GPU pool), which share
        # no host directory, and a VPC of its own, where no NFS server runs: NAS (created
        # with it) is what its pods can all mount.
        reason = ("a directory of one node is not shared by the several nodes of the cluster the stack "
                  "creates" if volume_type == "hostPath" else
                  "the stack creates the cluster in a VPC of its own, where it creates NAS and no NFS "
                  "server runs")
        bad("persistence.volume.type", f"must be nas without kubeconfig ({reason}); {volume_type} needs an "
            "existing cluster (kubeconfig)", "persistence.volume.type", "nas")
    for type_, names in VOLUME_KEYS.items():
        if type_ != volume_type:
            for name in names:
                if is_set(name):
                    refuse(name, f"applies only with persistence.volume.type {type_} "
                                 f"(this stack's is {volume_type})")
    if kubeconfig is not None and volume_type == "nas" and v["nas.mountTargetDomain"] is None:
        problems.append(missing("nas.mountTargetDomain", "required with kubeconfig (the stack then creates "
                                                         "no NAS)"))
    if volume_type == "nfs":
        for name in ("nfs.server", "nfs.path"):
            if v[name] is None and name not in own_problem:
                problems.append(missing(name, "required with persistence.volume.type nfs"))
    if v["createNamespace"] and v["namespace"] in SYSTEM_NAMESPACES:
        bad("createNamespace", f"must be false with namespace {v['namespace']}, which every cluster has: the "
            "stack would try to create it and, on destroy, delete it", "createNamespace", "false")
    if create_network and v["vpc.id"] is None:
        vpc = ipaddress.IPv4Network(v["vpc.cidr"])
        if not ipaddress.IPv4Network(v["vswitch.cidr"]).subnet_of(vpc):
            bad("vswitch.cidr", f"must lie inside vpc.cidr ({v['vpc.cidr']})")
    if kubeconfig is None and v["cluster.id"] is None:
        node_cidrs = {"vpc.cidr": v["vpc.cidr"]} if v["vpc.id"] is None and create_network else {}
        node_cidrs["vswitch.cidr"] = v["vswitch.cidr"]
        for name in ("cluster.podCidr", "cluster.serviceCidr"):
            for other, other_cidr in [*node_cidrs.items(),
                                      *([("cluster.podCidr", v["cluster.podCidr"])]
                                        if name == "cluster.serviceCidr" else [])]:
                if ipaddress.IPv4Network(v[name]).overlaps(ipaddress.IPv4Network(other_cidr)):
                    bad(name, f"must not overlap {other} ({other_cidr})")
                    break

    registry_ = v["imageRegistry"]
    cpu_image = v["ps.image"] or f"{registry_}/{TRAINER_CPU_TAG}"
    worker_image = v["worker.image"] or (f"{registry_}/{TRAINER_GPU_TAG}" if v["worker.gpuCount"] > 0
                                         else cpu_image)
    tensorboard_image = v["tensorboard.image"] or f"{registry_}/{TENSORBOARD_TAG}"

    username, password = v["registryCredentials.username"], v["registryCredentials.password"]
    credentials: Optional[RegistryCredentials] = None
    if password is not None and "registryCredentials.password" not in secrets:
        path = "--path " if forms["registryCredentials.password"] == PATH else ""
        problems.append(
            f"Configuration '{PROJECT}:registryCredentials.password' is not a secret: the stack file would "
            "hold the registry password in plain text.\n"
            f"    fix: pulumi config set --secret {path}registryCredentials.password <password>")
    if username is not None and password is None:
        problems.append(missing("registryCredentials.password", "required with registryCredentials.username "
                                "(the stack creates the pull Secret from both)", "<password>", secret=True))
    if password is not None and username is None:
        problems.append(missing("registryCredentials.username", "required with registryCredentials.password "
                                "(the stack creates the pull Secret from both)"))
    if username is None and password is None:
        if is_set("registryCredentials.server"):
            refuse("registryCredentials.server", "applies only with registryCredentials.username and "
                                                 "registryCredentials.password")
    else:
        server = v["registryCredentials.server"] or image_host(registry_)
        hosts = {image_host(i) for i in (worker_image, cpu_image, tensorboard_image)}
        if server not in hosts:
            # Kubelet offers a Secret's login only to the registry it names.
            shown = ", ".join(sorted(hosts))
            if v["registryCredentials.server"] is None:
                problems.append(missing("registryCredentials.server", f"required when no image comes from the "
                                        f"host of imageRegistry ({server}): the images come from {shown}",
                                        sorted(hosts)[0]))
            else:
                bad("registryCredentials.server", f"names registry {server}, which no image of the stack comes "
                    f"from ({shown}), so the pull Secret would never be used", "registryCredentials.server",
                    sorted(hosts)[0])
        elif username is not None and password is not None:
            credentials = RegistryCredentials(server, username, password)
    pull_secret = v["imagePullSecret"] or (f"{v['namePrefix']}-registry" if username or password else None)

    cluster_identifier: Optional[str] = None
    if kubeconfig is None:
        if is_set("clusterIdentifier"):
            refuse("clusterIdentifier", "applies only with kubeconfig (without it the ACK cluster id "
                                        "identifies the cluster)")
    elif v["clusterIdentifier"] is not None:
        cluster_identifier = v["clusterIdentifier"]
    else:
        try:
            cluster_identifier = kubeconfig_server(kubeconfig)
        except ValueError as error:
            # Content is shown by its size only: even unset as a secret it holds credentials.
            bad("kubeconfig", str(error), shown=None if is_kubeconfig_path(kubeconfig) else
                f"<kubeconfig content, {len(kubeconfig.splitlines())} lines>")
    ports = {"chief": v["worker.port"], "worker": v["worker.port"], "ps": v["ps.port"]}
    replicas = cs.Replicas(chief=1, worker=v["worker.number"], ps=v["ps.number"])
    # The longest object name must still be a DNS label: checked through the shared module.
    try:
        cs.kubernetes_cluster_spec(v["namePrefix"], v["namespace"], replicas, ports)
    except cs.ClusterSpecError as error:
        bad("namePrefix", f"gives invalid task names ({error})", "namePrefix", "mnist")

    if problems:
        raise ConfigError(problems)

    # With ps.number 0 the chief is one of the synchronous replicas (MultiWorkerMirroredStrategy),
    # whose collectives refuse a group mixing CPU and GPU devices: it then runs like a worker.
    chief_uses_gpu = v["ps.number"] == 0 and v["worker.gpuCount"] > 0
    gpu_pods = v["worker.number"] + (1 if chief_uses_gpu else 0)
    gpu_size = v["gpuPool.size"]
    if gpu_size is None:
        gpu_size = max(1, math.ceil(gpu_pods * v["worker.gpuCount"] / v["gpuPool.gpusPerInstance"]))
    ps_task = TaskSettings(cpu_image, v["ps.imagePullPolicy"], v["ps.port"], v["ps.cpu"], v["ps.memory"])
    worker_task = TaskSettings(worker_image, v["worker.imagePullPolicy"], v["worker.port"], v["worker.cpu"],
                               v["worker.memory"])
    placement = {role: Placement(dict(v[f"{role}.nodeSelector"]), tuple(v[f"{role}.tolerations"]))
                 for role in PLACEMENT_ROLES}
    placement["stage-data"] = placement["chief"]
    if chief_uses_gpu:
        placement["chief"] = placement["worker"]
    return Settings(
        project=PROJECT,
        stack=stack or pulumi.get_stack(),
        name_prefix=v["namePrefix"],
        namespace=v["namespace"],
        create_namespace=v["createNamespace"],
        replicas=replicas,
        worker=worker_task,
        gpu_count=v["worker.gpuCount"],
        ps=ps_task,
        chief=worker_task if chief_uses_gpu else TaskSettings(
            cpu_image, v["ps.imagePullPolicy"], v["worker.port"], v["ps.cpu"], v["ps.memory"]),
        staging_image=cpu_image,
        epochs=v["hyperparams.epochs"],
        batch_size=v["hyperparams.batchsize"],
        learning_rate=v["hyperparams.learningrate"],
        mount_path=v["mountPath"],
        data_source=v["data.source"],
        storage=v["persistence.pvc.storage"],
        match_labels=dict(v["persistence.pvc.matchLabels"]),
        tensorboard_image=tensorboard_image,
        tensorboard_service_type=v["tensorboard.serviceType"],
        tensorboard_address_type=v["tensorboard.addressType"],
        tensorboard_source_ranges=tuple(v["tensorboard.allowedSourceRanges"]),
        backoff_limit=v["job.backoffLimit"],
        wait_for_chief=v["job.waitForChief"],
        wait_timeout_minutes=v["job.waitTimeoutMinutes"],
        active_deadline_seconds=v["job.activeDeadlineSeconds"],
        peer_timeout_seconds=v["job.peerTimeoutSeconds"],
        priority_class_name=v["job.priorityClassName"],
        placement=placement,
        chief_uses_gpu=chief_uses_gpu,
        image_pull_secret=pull_secret,
        registry_credentials=credentials,
        volume_type=volume_type,
        nfs_server=v["nfs.server"],
        nfs_path=v["nfs.path"],
        host_path=v["hostPath.path"],
        create_cloud=kubeconfig is None,
        zone=v["zone"],
        vpc_id=v["vpc.id"],
        vpc_cidr=v["vpc.cidr"],
        vswitch_id=v["vswitch.id"],
        vswitch_cidr=v["vswitch.cidr"],
        cluster_id=v["cluster.id"],
        cluster_version=v["cluster.version"],
        pod_cidr=v["cluster.podCidr"],
        service_cidr=v["cluster.serviceCidr"],
        api_server_public=v["cluster.apiServerPublic"],
        kubeconfig=kubeconfig,
        cluster_identifier=cluster_identifier,
        cluster_identifier_from_kubeconfig=kubeconfig is not None and v["clusterIdentifier"] is None,
        gpu_instance_types=tuple(v["gpuPool.instanceTypes"]),
        gpus_per_instance=v["gpuPool.gpusPerInstance"],
        gpu_pool_size=gpu_size,
        gpu_autoscaling=v["gpuPool.autoscaling"],
        gpu_system_disk_category=v["gpuPool.systemDiskCategory"],
        gpu_system_disk_size=v["gpuPool.systemDiskSize"],
        cpu_instance_types=tuple(v["cpuPool.instanceTypes"]),
        cpu_pool_size=v["cpuPool.size"],
        cpu_system_disk_category=v["cpuPool.systemDiskCategory"],
        key_name=v["nodePools.keyName"],
        nas_storage_type=v["nas.storageType"],
        nas_retain=v["nas.retainOnDestroy"],
        nas_path=v["nas.path"],
        nas_mount_target_domain=v["nas.mountTargetDomain"],
        ports=ports,
        secret_keys=frozenset(secrets & set(SECRET_CAPABLE_KEYS)),
    )


def project_config_schema() -> dict[str, dict[str, Any]]:
    """The ``config:`` section of Pulumi.yaml, derived from KEYS (tests keep the file equal).

    Only keys the schema can express (string, integer, boolean) are declared, each with its
    default: a declared key without one is *required* by the CLI.
    """
    return {k.name: {"type": k.schema_type, "description": k.description, "default": k.default}
            for k in KEYS if k.schema_type is not None}
