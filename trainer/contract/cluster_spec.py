"""Cluster spec and TF_CONFIG for every task of a distributed training run.

Pure Python on purpose (no TensorFlow, no Pulumi import): the Pulumi program in infra/
imports it to generate the Kubernetes topology, and the local launcher
(``python -m trainer.local``) imports it to run the same topology on one machine.

Terms follow TensorFlow: a *task type* is one of ``chief``, ``worker``, ``ps``,
``evaluator``; a *task* is ``(task_type, task_index)``; the *cluster spec* maps each
task type to the list of its ``host:port`` addresses; ``TF_CONFIG`` is the JSON of
``{"cluster": <cluster spec>, "task": {"type": ..., "index": ...}}``
(https://www.tensorflow.org/guide/distributed_training#setting_up_the_tf_config_environment_variable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

#: Task types in the order TensorFlow documents them.
TASK_TYPES: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")

#: RFC 1035 label, which Kubernetes requires of Service names (DNS-1035 label):
#: lowercase alphanumerics and '-', starting with a letter, ending alphanumeric.
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: RFC 1123 label, which Kubernetes requires of namespace names (DNS-1123 label).
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_LABEL_LENGTH = 63


class ClusterSpecError(ValueError):
    """A replica count, port, name prefix or namespace that cannot make a valid cluster."""


@dataclass(frozen=True)
class Replicas:
    """How many tasks of each type a run has.

    Attributes:
        chief: 0 or 1 (TensorFlow allows at most one chief).
        worker: >= 1 workers.
        ps: >= 0 parameter servers; 0 means synchronous workers
            (MultiWorkerMirroredStrategy) instead of ParameterServerStrategy.
        evaluator: 0 or 1 side-car evaluator (not part of the training cluster spec).
    """

    chief: int = 1
    worker: int = 1
    ps: int = 0
    evaluator: int = 0

    def __post_init__(self) -> None:
        limits = {"chief": (0, 1), "worker": (1, None), "ps": (0, None), "evaluator": (0, 1)}
        for task_type, (low, high) in limits.items():
            count = getattr(self, task_type)
            if isinstance(count, bool) or not isinstance(count, int):
                raise ClusterSpecError(f"replica count for '{task_type}' must be an integer, got {count!r}")
            if count < low or (high is not None and count > high):
                rule = f">= {low}" if high is None else f"between {low} and {high}"
                raise ClusterSpecError(f"replica count for '{task_type}' is {count}: must be {rule}")
        if self.ps > 0 and self.chief == 0:
            raise ClusterSpecError(
                "ps tasks need a chief: ParameterServerStrategy runs its coordinator on the chief"
            )

    def count(self, task_type: str) -> int:
        """Number of tasks of ``task_type`` (one of TASK_TYPES)."""
        if task_type not in TASK_TYPES:
            raise ClusterSpecError(f"unknown task type {task_type!r}: must be one of {TASK_TYPES}")
        return getattr(self, task_type)

    def tasks(self) -> Iterator[tuple[str, int]]:
        """Every task as ``(task_type, task_index)``, in TASK_TYPES order."""
        for task_type in TASK_TYPES:
            for index in range(self.count(task_type)):
                yield task_type, index


ClusterSpec = dict[str, list[str]]
AddressFn = Callable[[str, int], str]


def build_cluster_spec(replicas: Replicas, address: AddressFn) -> ClusterSpec:
    """The cluster spec: task type -> list of ``host:port``, one entry per task.

    The evaluator is left out: TensorFlow expects it outside the training cluster
    (its TF_CONFIG names only itself as the task).

    Args:
        replicas: task counts.
        address: ``address(task_type, task_index) -> "host:port"``.

    Returns:
        ``{"chief": [...], "worker": [...], "ps": [...]}`` with empty types omitted.

    Raises:
        ClusterSpecError: if two tasks get the same address.
    """
    spec: ClusterSpec = {}
    for task_type, index in replicas.tasks():
        if task_type == "evaluator":
            continue
        spec.setdefault(task_type, []).append(address(task_type, index))
    hosts = [h for hosts in spec.values() for h in hosts]
    duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
    if duplicates:
        raise ClusterSpecError(f"cluster spec has duplicate addresses: {duplicates}")
    return spec


def tf_config(cluster_spec: Mapping[str, list[str]], task_type: str, task_index: int) -> dict:
    """The TF_CONFIG dict for one task.

    Raises:
        ClusterSpecError: if the task is not in the cluster spec (evaluator excepted).
    """
    if task_type != "evaluator":
        hosts = cluster_spec.get(task_type, [])
        if not 0 <= task_index < len(hosts):
            raise ClusterSpecError(
                f"task ({task_type}, {task_index}) is not in the cluster spec "
                f"({len(hosts)} {task_type} task(s))"
            )
    return {
        "cluster": {k: list(v) for k, v in cluster_spec.items()},
        "task": {"type": task_type, "index": task_index},
    }


def tf_config_json(cluster_spec: Mapping[str, list[str]], task_type: str, task_index: int) -> str:
    """TF_CONFIG as the compact, key-sorted JSON string set in the environment."""
    return json.dumps(tf_config(cluster_spec, task_type, task_index), sort_keys=True, separators=(",", ":"))


# --- Kubernetes naming -------------------------------------------------------------


def validate_name_prefix(name_prefix: str) -> None:
    """Check that ``<name_prefix>-<task_type>-<index>`` can be a Service name.

    Raises:
        ClusterSpecError: if the prefix is not a DNS-1035 label.
    """
    if not _DNS_1035_LABEL.match(name_prefix or ""):
        raise ClusterSpecError(
            f"name prefix {name_prefix!r} must be a DNS-1035 label: lowercase letters, digits "
            "and '-', starting with a letter and ending with a letter or digit"
        )


def validate_namespace(namespace: str) -> None:
    """Raises ClusterSpecError unless ``namespace`` is a DNS-1123 label (Kubernetes' rule)."""
    if not _DNS_1123_LABEL.match(namespace or "") or len(namespace) > _MAX_LABEL_LENGTH:
        raise ClusterSpecError(
            f"namespace {namespace!r} must be a DNS-1123 label of at most 63 characters: "
            "lowercase letters, digits and '-', starting and ending with a letter or digit"
        )


def task_name(name_prefix: str, task_type: str, task_index: int) -> str:
    """Kubernetes object name of one task, ``<prefix>-<task_type>-<index>``, e.g. mnist-ps-0.

    Raises:
        ClusterSpecError: if the prefix is invalid or the name exceeds 63 characters
            (the DNS label limit that Service names share).
    """
    validate_name_prefix(name_prefix)
    name = f"{name_prefix}-{task_type}-{task_index}"
    if len(name) > _MAX_LABEL_LENGTH:
        raise ClusterSpecError(
            f"task name {name!r} is {len(name)} characters: Kubernetes Service names are at "
            f"most {_MAX_LABEL_LENGTH}; use a shorter name prefix"
        )
    return name


def validate_port(port: int, what: str = "port") -> None:
    """Raises ClusterSpecError unless ``port`` is an integer TCP port in 1-65535."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ClusterSpecError(f"{what} {port!r} must be an integer between 1 and 65535")


def kubernetes_cluster_spec(
    name_prefix: str,
    namespace: str,
    replicas: Replicas,
    ports: Mapping[str, int],
) -> ClusterSpec:
    """Cluster spec whose hosts are the tasks' headless Services.

    Each host is ``<prefix>-<task_type>-<index>.<namespace>.svc:<port>``; every task runs
    in its own pod behind its own Service, so tasks of one type may share a port.

    Args:
        name_prefix: DNS-1035 label, e.g. "mnist".
        namespace: DNS-1123 label, e.g. "default".
        replicas: task counts.
        ports: task type -> port, e.g. {"chief": 8000, "worker": 8000, "ps": 9000}.

    Raises:
        ClusterSpecError: on an invalid prefix, namespace, port, or a missing port.
    """
    validate_namespace(namespace)

    def address(task_type: str, index: int) -> str:
        if task_type not in ports:
            raise ClusterSpecError(f"no port given for task type '{task_type}'")
        validate_port(ports[task_type], f"{task_type} port")
        return f"{task_name(name_prefix, task_type, index)}.{namespace}.svc:{ports[task_type]}"

    return build_cluster_spec(replicas, address)


def local_cluster_spec(
    replicas: Replicas, ports: Mapping[tuple[str, int], int], host: str = "localhost"
) -> ClusterSpec:
    """Cluster spec for every task on one machine, each on its own port.

    Args:
        replicas: task counts.
        ports: (task_type, task_index) -> a free TCP port on ``host``.
        host: "localhost" by default.

    Raises:
        ClusterSpecError: on a missing, invalid or repeated port.
    """

    def address(task_type: str, index: int) -> str:
        if (task_type, index) not in ports:
            raise ClusterSpecError(f"no port given for task ({task_type}, {index})")
        validate_port(ports[(task_type, index)], f"port of ({task_type}, {index})")
        return f"{host}:{ports[(task_type, index)]}"

    return build_cluster_spec(replicas, address)


# --- Reading TF_CONFIG (the trainer's side) -----------------------------------------

#: What a task does, decided from TF_CONFIG (see ``strategy_kind``).
PARAMETER_SERVER = "parameter_server"
MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
SINGLE_PROCESS = "single_process"


@dataclass(frozen=True)
class TaskConfig:
    """TF_CONFIG as read by one task.

    Attributes:
        cluster_spec: task type -> ``host:port`` list; empty without TF_CONFIG.
        task_type: "chief", "worker", "ps" or "evaluator"; "chief" without TF_CONFIG
            (a single process plays the chief: it logs, checkpoints and evaluates).
        task_index: index within ``task_type``.
    """

    cluster_spec: ClusterSpec
    task_type: str = "chief"
    task_index: int = 0

    @property
    def is_chief(self) -> bool:
        """True for the task that logs, checkpoints, evaluates and writes TensorBoard."""
        if self.task_type == "chief":
            return True
        # Without a chief, TensorFlow's convention makes worker 0 the chief.
        return self.task_type == "worker" and self.task_index == 0 and "chief" not in self.cluster_spec

    @property
    def strategy_kind(self) -> str:
        """PARAMETER_SERVER with ps tasks, MULTI_WORKER_MIRRORED with workers and no ps,
        SINGLE_PROCESS without a cluster (the same code path with no TF_CONFIG)."""
        return strategy_kind(self.cluster_spec)


def strategy_kind(cluster_spec: Mapping[str, list[str]]) -> str:
    """Which tf.distribute strategy a cluster spec calls for.

    ps tasks -> ParameterServerStrategy (chief = coordinator); workers without ps ->
    MultiWorkerMirroredStrategy (chief included as a worker); nothing -> one process.
    """
    if cluster_spec.get("ps"):
        return PARAMETER_SERVER
    if cluster_spec.get("worker") or cluster_spec.get("chief"):
        return MULTI_WORKER_MIRRORED
    return SINGLE_PROCESS


def parse_tf_config(text: str | None) -> TaskConfig:
    """Parse and check a TF_CONFIG string (TensorFlow's standard format).

    Args:
        text: the value of the TF_CONFIG environment variable; None or blank means
            no cluster (a single process).

    Returns:
        The task's view of the cluster.

    Raises:
        ClusterSpecError: invalid JSON, an unknown task type, a task index outside the
            cluster spec, a host that is not ``host:port``, or ps tasks without a chief
            (ParameterServerStrategy needs a coordinator).
    """
    if text is None or not text.strip():
        return TaskConfig(cluster_spec={})
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ClusterSpecError(f"TF_CONFIG is not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise ClusterSpecError(f"TF_CONFIG must be a JSON object, got {type(config).__name__}")
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ClusterSpecError("TF_CONFIG 'cluster' and 'task' must be JSON objects")
    spec: ClusterSpec = {}
    for task_type, hosts in cluster.items():
        if task_type not in TASK_TYPES:
            raise ClusterSpecError(
                f"TF_CONFIG cluster has unknown task type {task_type!r}: must be one of {TASK_TYPES}"
            )
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ClusterSpecError(f"TF_CONFIG cluster[{task_type!r}] must be a list of 'host:port'")
        for host in hosts:
            name, _, port = host.rpartition(":")
            if not name or not port.isdigit() or not 1 <= int(port) <= 65535:
                raise ClusterSpecError(
                    f"TF_CONFIG cluster[{task_type!r}] entry {host!r} must be 'host:port' "
                    "with a port in 1-65535"
                )
        spec[task_type] = list(hosts)
    if len(spec.get("chief", [])) > 1:
        raise ClusterSpecError("TF_CONFIG cluster has more than one chief")
    if spec.get("ps") and not spec.get("chief"):
        raise ClusterSpecError(
            "TF_CONFIG has ps tasks but no chief: ParameterServerStrategy runs its coordinator on the chief"
        )
    if not spec and not task:
        return TaskConfig(cluster_spec={})
    task_type = task.get("type")
    task_index = task.get("index", 0)
    if task_type not in TASK_TYPES:
        raise ClusterSpecError(f"TF_CONFIG task type {task_type!r} is invalid: must be one of {TASK_TYPES}")
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise ClusterSpecError(f"TF_CONFIG task index {task_index!r} must be an integer")
    if task_type != "evaluator":
        tf_config(spec, task_type, task_index)  # raises when the task is not in the spec
    return TaskConfig(cluster_spec=spec, task_type=task_type, task_index=task_index)
