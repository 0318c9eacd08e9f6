"""``load_settings()``: every key read, checked alone and against the others, then the Settings."""

from __future__ import annotations

import difflib
import json
import ipaddress
import math
from typing import Any, Mapping, Optional

import pulumi
from pulumi.runtime.config import is_config_secret

from infra.settings.keys import (
    KEYS, KEYS_BY_NAME, PLACEMENT_ROLES, PROJECT, SECRET_CAPABLE_KEYS, SYSTEM_NAMESPACES, TENSORBOARD_TAG,
    TRAINER_CPU_TAG, TRAINER_GPU_TAG, VOLUME_KEYS,
)
from infra.settings.kubeconfig import is_kubeconfig_path, kubeconfig_server
from infra.settings.messages import (
    ConfigError, conflict, fix_args, missing, not_applicable, secret_refused, shown, violation,
)
from infra.settings.model import Placement, RegistryCredentials, Settings, TaskSettings
from infra.settings.parsers import image_host
from infra.settings.raw import FLAT, PATH, RawConfig, conflicting, project_config
from trainer import cluster_spec as cs


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
        out.append(f"Configuration '{PROJECT}:{path}' value '{shown(raw, secret)}' is not a setting of this "
                   f"stack{hint}: the program would ignore it.\n"
                   f"    fix: pulumi config rm {'--path ' if structured else ''}{path}")
    return out


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
    raw_config = RawConfig(config or pulumi.Config(PROJECT))
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

    problems += unknown_keys(project_config())

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
