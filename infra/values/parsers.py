"""Value parsers: one raw configuration value to a typed value, or ValueError carrying the rule.

Values arrive as strings (flat keys: `pulumi config set worker.number 4` stores "4") or as
JSON-typed values (structured keys: `pulumi config set --path worker.number 4` stores 4).
Each parser accepts both and raises ValueError whose text is the rule, which the violation
quotes (``must be an integer >= 1``).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from trainer.contract import cluster_spec as cs
from trainer.contract import recipe

Parser = Callable[[Any], Any]

_INT = re.compile(r"^[+-]?[0-9]+$")


def integer(minimum: int, maximum: int | None = None) -> Parser:
    """Parser of an integer in [minimum, maximum]: an int or a decimal string ("4", not "4.5")."""
    rule = (
        f"must be an integer >= {minimum}"
        if maximum is None
        else f"must be an integer between {minimum} and {maximum}"
    )

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


def _number(raw: Any, rule: str, accept: Callable[[float], bool]) -> float:
    """``raw`` (a float or numeric string, never a bool) as a float that ``accept`` takes.

    Raises:
        ValueError: with ``rule`` as the message, for anything else.
    """
    if isinstance(raw, bool):
        raise ValueError(rule)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(rule) from None
    if not accept(value):
        raise ValueError(rule)
    return value


def positive_number(raw: Any) -> float:
    """A finite number > 0 (float or numeric string); the schema has no float type."""
    return _number(raw, "must be a number > 0", lambda value: math.isfinite(value) and value > 0)


def number(
    minimum: float | None = None, maximum: float | None = None, *, above: bool = False, below: bool = False
) -> Parser:
    """A parser of finite numbers (floats or numeric strings) within the limits: ``minimum``
    (``above``: excluded), ``maximum`` (``below``: excluded); None is no limit. The rule reads
    ``must be a number >= 0 and < 1`` (the recipe's numbers, trainer/contract/recipe.py)."""
    bounds = ([f"{'>' if above else '>='} {minimum:g}"] if minimum is not None else []) + (
        [f"{'<' if below else '<='} {maximum:g}"] if maximum is not None else []
    )
    rule = " and ".join(["must be a number", *bounds]).replace("number and", "number", 1)

    def accept(value: float) -> bool:
        low = minimum is None or (value > minimum if above else value >= minimum)
        high = maximum is None or (value < maximum if below else value <= maximum)
        return math.isfinite(value) and low and high

    return lambda raw: _number(raw, rule, accept)


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


def optional_string(raw: Any) -> str | None:
    """A non-empty string, or None when unset or empty."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ValueError("must be a string")
    return raw


def fraction(raw: Any) -> float:
    """A number >= 0 and < 1 (a float or numeric string): a dropout rate, as the trainer's
    --dropout takes it."""
    # nan fails both comparisons
    return _number(raw, "must be a number >= 0 and < 1", lambda value: 0 <= value < 1)


_URL = re.compile(r"^https?://[^\s/]+[^\s]*$")
_DATA_SOURCE_RULE = (
    "must be an http(s) URL (of mnist.npz, or of a directory holding the four MNIST IDX files), "
    "an absolute path (a directory on the volume under mountPath, or inside the trainer image), "
    "or a list of http(s) URLs of the four IDX .gz files or of one mnist.npz"
)


def data_source(raw: Any) -> str | tuple[str, ...] | None:
    """Where the staging Job gets MNIST (``python -m trainer.stage --source``, repeated for a list).

    None: the sample in the trainer image. A string: an http(s) URL (of ``mnist.npz``, or a base
    URL of a directory holding the four IDX files) or an absolute path. A list (JSON text, or
    a --path list): http(s) URLs whose last path segments are the four IDX .gz names
    (``recipe.IDX_FILE_NAMES``, in any order) or the one ``mnist.npz``.
    """
    if raw is None or raw == "" or raw == []:
        return None
    if isinstance(raw, str) and raw.lstrip().startswith("["):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError(_DATA_SOURCE_RULE) from None
    if isinstance(raw, str):
        if not (_URL.match(raw) or re.match(r"^/[^\s]*$", raw)):
            raise ValueError(_DATA_SOURCE_RULE)
        return raw
    if not isinstance(raw, list) or not all(isinstance(u, str) and _URL.match(u) for u in raw):
        raise ValueError(_DATA_SOURCE_RULE)
    names = sorted(u.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] for u in raw)
    if names not in (sorted(recipe.IDX_FILE_NAMES), [recipe.NPZ_FILE_NAME]):
        raise ValueError(_DATA_SOURCE_RULE)
    return tuple(raw)


def source_list(source: str | tuple[str, ...] | None) -> list[str]:
    """A parsed data.source (``data_source``) as the list of its sources: [] for None."""
    return [] if source is None else [source] if isinstance(source, str) else list(source)


# Kubernetes resource.Quantity (k8s.io/apimachinery/pkg/api/resource), restricted to the
# plain forms people write: a non-negative decimal and an optional SI or binary suffix.
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def quantity(raw: Any) -> str:
    """A positive Kubernetes quantity string such as 5Gi."""
    rule = "must be a Kubernetes quantity such as 5Gi, 500Mi or 2 (no spaces)"
    if isinstance(raw, bool):
        raise ValueError(rule)
    text = str(raw) if isinstance(raw, (int, float)) else raw
    if not isinstance(text, str) or not _QUANTITY.match(text) or float(re.sub(r"[A-Za-z]+$", "", text)) <= 0:
        raise ValueError(rule)
    return text


# Image reference grammar of github.com/distribution/reference (reference.go):
# [domain[:port]/]path[:tag][@digest], path components lowercase.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# As in the reference implementation, a first segment is a registry host only when it has a
# dot or a port, or is localhost; otherwise it is a (lowercase) path component.
_DOMAIN = rf"(?:localhost(?::[0-9]+)?|{_LABEL}(?:\.{_LABEL})+(?::[0-9]+)?|{_LABEL}:[0-9]+)"
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


def image_reference(raw: Any) -> str | None:
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


def optional_registry(raw: Any) -> str | None:
    """``registry``, or None when unset."""
    return None if raw is None or raw == "" else registry(raw)


def package_index(raw: Any) -> str | None:
    """A PEP 503 package index: an http(s) URL of a host, an optional port and a path, None
    when unset; no credentials in it (the pod spec shows the URL)."""
    if raw is None or raw == "":
        return None
    rule = "must be an http(s) URL of a package index, such as https://pypi.org/simple/ (no user or password)"
    if not isinstance(raw, str) or not re.match(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s@?#]*)?$", raw):
        raise ValueError(rule)
    return raw


def dns_label(raw: Any) -> str:
    """A name prefix: DNS-1035 label of <= 40 characters, leaving room for "-worker-NNN"."""
    if not isinstance(raw, str) or not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", raw) or len(raw) > 40:
        raise ValueError(
            "must be a DNS-1035 label of at most 40 characters (lowercase letters, "
            "digits and '-', starting with a letter)"
        )
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
    if (
        not isinstance(raw, str)
        or not re.match(r"^/[A-Za-z0-9._/-]*$", raw)
        or raw == "/"
        or "//" in raw
        or raw.endswith("/")
        or "/../" in raw + "/"
    ):
        raise ValueError("must be an absolute path other than '/', such as /data")
    return raw


def export_path(raw: Any) -> str | None:
    """An NFS export path: absolute ("/" allowed: NFSv4 servers often export their root), or
    None when unset."""
    if raw is None or raw == "":
        return None
    if (
        not isinstance(raw, str)
        or not re.match(r"^/[A-Za-z0-9._/-]*$", raw)
        or "//" in raw
        or (raw != "/" and raw.endswith("/"))
        or "/../" in raw + "/"
    ):
        raise ValueError("must be an absolute path such as /exports/tf-mnist")
    return raw


_HOST_LABEL = r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"


def nfs_server(raw: Any) -> str | None:
    """An NFS server: a host name or an IPv4 address, None when unset.

    No ':' and no path, as for NAS (the in-tree nfs volume takes the directory separately).
    """
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 253 or not re.match(rf"^{_HOST_LABEL}(\.{_HOST_LABEL})*$", raw):
        raise ValueError(
            "must be a host name or IPv4 address of the NFS server, without ':' or a path "
            "(the exported directory goes in nfs.path)"
        )
    return raw


def registry_host(raw: Any) -> str | None:
    """A registry host name with an optional port (no scheme, no path), None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not re.match(rf"^{_DOMAIN}$", raw):
        raise ValueError(
            "must be a registry host such as registry.cn-hangzhou.aliyuncs.com (no scheme, no path)"
        )
    return raw


def https_url(raw: Any) -> str | None:
    """An ``https://host[:port]`` URL (no path), None when unset; an IPv6 host in brackets."""
    if raw is None or raw == "":
        return None
    rule = "must be an https URL of a host and an optional port, such as https://10.244.0.1:6443 (no path)"
    if not isinstance(raw, str):
        raise ValueError(rule)
    found = re.match(r"^https://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:([0-9]{1,5}))?/?$", raw)
    if not found or (found.group(3) and not 1 <= int(found.group(3)) <= 65535):
        raise ValueError(rule)
    return raw.rstrip("/")


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def dns_subdomain(raw: Any) -> str | None:
    """A Kubernetes object name (DNS-1123 subdomain: Secrets, PriorityClasses), None when unset."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > 253 or not _DNS_SUBDOMAIN.match(raw):
        raise ValueError(
            "must be a Kubernetes object name (lowercase letters, digits, '-' and '.', at "
            "most 253 characters)"
        )
    return raw


def cidr(raw: Any) -> str:
    """An IPv4 network in CIDR form with no host bits set."""
    try:
        return str(ipaddress.IPv4Network(raw, strict=True))
    except (TypeError, ValueError):
        raise ValueError("must be an IPv4 CIDR block such as 192.168.0.0/16") from None


def cidr_list(raw: Any) -> tuple[str, ...]:
    """A list of IPv4 CIDRs: a JSON list, a comma-separated string, or a --path list."""
    items = raw_list(raw)
    try:
        return tuple(str(ipaddress.IPv4Network(i, strict=False)) for i in items)
    except (TypeError, ValueError):
        raise ValueError('must be a list of IPv4 CIDR blocks such as ["203.0.113.0/24"]') from None


def string_list(raw: Any) -> tuple[str, ...]:
    """A non-empty list of non-empty strings (JSON, comma-separated, or a --path list)."""
    items = raw_list(raw)
    if not items or not all(isinstance(i, str) and i for i in items):
        raise ValueError('must be a non-empty list of strings such as ["ecs.gn5-c4g1.xlarge"]')
    return tuple(items)


def raw_list(raw: Any) -> list:
    """A list value: a JSON list, a --path list, or a comma-separated string; ValueError
    ("must be a list") for anything else."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = [s.strip() for s in raw.split(",") if s.strip()]
    if not isinstance(raw, list):
        raise ValueError("must be a list")
    return raw


def optional(parse: Parser) -> Parser:
    """``parse``, or None when the value is unset or empty (the key's description says what the
    program uses then)."""
    return lambda raw: None if raw is None or raw == "" else parse(raw)


#: The largest uid or gid a pod's securityContext takes (Kubernetes validates them as int32).
MAX_POD_ID = 2**31 - 1


def pod_uid(raw: Any) -> int:
    """A pod's runAsUser: an integer in [1, MAX_POD_ID]. Not 0: Pod Security "restricted",
    which every pod of the stack passes, refuses root (runAsNonRoot, runAsUser 0)."""
    try:
        return integer(1, MAX_POD_ID)(raw)
    except ValueError:
        raise ValueError(
            f"must be an integer between 1 and {MAX_POD_ID}, a uid other than root's 0 (Pod "
            'Security "restricted" refuses pods that run as root)'
        ) from None


def pod_gid(raw: Any) -> int:
    """A pod's runAsGroup and fsGroup: an integer in [0, MAX_POD_ID] ("restricted" allows gid 0)."""
    return integer(0, MAX_POD_ID)(raw)


def image_host(image: str) -> str:
    """The registry host of an image reference (distribution/reference's rule: a first
    segment with a dot or a port, or localhost, is a host; otherwise Docker Hub)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"
