"""The cross-check phase: rules between keys, each value already valid on its own.

Each rule adds its violations to the Reading; ``RULES`` runs them in the order the
violations are reported. A key that is bad on its own holds its default here, so a rule may
report a second violation about a key whose own value was already refused.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable

from infra.settings.cloud_rules import CLOUD_RULES
from infra.settings.derive import Resolved, creates_namespace
from infra.settings.key_values import PROJECT
from infra.settings.keys import VOLUME_KEYS
from infra.settings.kubeconfig import is_kubeconfig_path
from infra.settings.messages import (
    kubeconfig_not_secret,
    password_not_secret,
    shown,
    source_not_plain,
    source_ranges_too_wide,
)
from infra.settings.parsers import image_host, source_list
from infra.settings.read import Reading
from infra.settings.source_ranges import too_wide
from infra.settings.url_credentials import not_plain, redacted
from trainer.contract import cluster_spec as cs

#: Namespaces every cluster has: the stack must never create (and on destroy delete) them.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

Rule = Callable[[Reading, Resolved], None]


def _creates_network(r: Reading) -> bool:
    """Whether the stack creates the vSwitch (and, without vpc.id, the VPC)."""
    return r.values["kubeconfig"] is None and r.values["vswitch.id"] is None


def ports(r: Reading, _: Resolved) -> None:
    """ps and workers listen on different ports (a chief listens on worker.port)."""
    worker_port = r.values["worker.port"]
    if r.values["ps.port"] == worker_port:
        r.bad(
            "ps.port",
            f"must differ from worker.port ({worker_port})",
            fix_value=str(worker_port + 1000 if worker_port <= 64535 else worker_port - 1000),
        )


def cloud_layer(r: Reading, _: Resolved) -> None:
    """What the stack needs to create the cluster's pools and its vSwitch."""
    v = r.values
    if v["kubeconfig"] is None and v["worker.gpuCount"] > v["gpuPool.gpusPerInstance"]:
        # A pod's GPUs come from one node: a bigger request stays Pending on every GPU node.
        r.bad(
            "worker.gpuCount",
            f"must be at most gpuPool.gpusPerInstance ({v['gpuPool.gpusPerInstance']}), "
            "the GPUs of one node (or choose larger gpuPool.instanceTypes and set gpuPool.gpusPerInstance)",
            fix_value=str(v["gpuPool.gpusPerInstance"]),
        )
    if _creates_network(r) and v["cluster.id"] is not None:
        r.bad("cluster.id", "needs vswitch.id (and vswitch.cidr) of the cluster's node vSwitch", "vswitch.id")
    if _creates_network(r) and not v["zone"]:
        r.missing("zone", "required when the stack creates the vSwitch")


def volume(r: Reading, _: Resolved) -> None:
    """persistence.volume.type fits the cluster, and only its own keys are set, all of them."""
    v = r.values
    volume_type = v["persistence.volume.type"]
    if v["kubeconfig"] is None and volume_type != "nas":
        # The cluster the stack creates has several nodes (a CPU pool, a GPU pool), which share
        # no host directory, and a VPC of its own, where no NFS server runs: NAS (created
        # with it) is what its pods can all mount.
        reason = (
            "a directory of one node is not shared by the several nodes of the cluster the stack creates"
            if volume_type == "hostPath"
            else "the stack creates the cluster in a VPC of its own, where it creates NAS and no NFS "
            "server runs"
        )
        r.bad(
            "persistence.volume.type",
            f"must be nas without kubeconfig ({reason}); {volume_type} needs an "
            "existing cluster (kubeconfig)",
            fix_value="nas",
        )
    for type_, names in VOLUME_KEYS.items():
        if type_ != volume_type:
            for name in names:
                if r.is_set(name):
                    r.refuse(
                        name,
                        f"applies only with persistence.volume.type {type_} (this stack's is {volume_type})",
                    )
    if v["kubeconfig"] is not None and volume_type == "nas" and v["nas.mountTargetDomain"] is None:
        r.missing("nas.mountTargetDomain", "required with kubeconfig (the stack then creates no NAS)")
    if volume_type == "nfs":
        for name in ("nfs.server", "nfs.path"):
            if v[name] is None and name not in r.own_problem:
                r.missing(name, "required with persistence.volume.type nfs")


def namespace(r: Reading, _: Resolved) -> None:
    """The stack creates (and on destroy deletes) no namespace that every cluster has."""
    if creates_namespace(r.values) and r.values["namespace"] in SYSTEM_NAMESPACES:
        r.bad(
            "createNamespace",
            f"must be false with namespace {r.values['namespace']}, which every cluster "
            "has: the stack would try to create it and, on destroy, delete it",
            fix_value="false",
        )


def cidrs(r: Reading, d: Resolved) -> None:
    """A new vSwitch lies in its new VPC; a new cluster's pod addresses (cluster.podCidr with
    Flannel, a pod vSwitch the stack creates with Terway) and Service CIDR overlap no node
    network and each other; a created pod vSwitch lies in a new VPC too."""
    v = r.values
    if _creates_network(r) and v["vpc.id"] is None:
        if not ipaddress.IPv4Network(v["vswitch.cidr"]).subnet_of(ipaddress.IPv4Network(v["vpc.cidr"])):
            r.bad("vswitch.cidr", f"must lie inside vpc.cidr ({v['vpc.cidr']})")
    if v["kubeconfig"] is not None or v["cluster.id"] is not None:
        return
    node_cidrs = {"vpc.cidr": v["vpc.cidr"]} if v["vpc.id"] is None and _creates_network(r) else {}
    node_cidrs["vswitch.cidr"] = v["vswitch.cidr"]
    if d.network_plugin == "terway":
        _first_overlap(r, "cluster.serviceCidr", node_cidrs)
        if _creates_network(r) and v["cluster.podVswitchId"] is None:
            _pod_vswitch_cidr(r)
        return
    _first_overlap(r, "cluster.podCidr", node_cidrs)
    _first_overlap(r, "cluster.serviceCidr", {**node_cidrs, "cluster.podCidr": v["cluster.podCidr"]})


def _first_overlap(r: Reading, name: str, others: dict[str, str], fix_value: str | None = None) -> None:
    """Report ``name``'s CIDR where it overlaps the first of ``others`` (key -> CIDR) it does;
    the fix sets ``fix_value`` (default the key's fix)."""
    for other, other_cidr in others.items():
        if ipaddress.IPv4Network(r.values[name]).overlaps(ipaddress.IPv4Network(other_cidr)):
            r.bad(name, f"must not overlap {other} ({other_cidr})", fix_value=fix_value)
            return


def _pod_vswitch_cidr(r: Reading) -> None:
    """The pod vSwitch the stack creates: a vSwitch of the node VPC (inside vpc.cidr when the
    stack creates that VPC) beside the node vSwitch, and apart from the Service CIDR. The fix
    is the first block of its size in a new VPC that is free."""
    v = r.values
    pods = ipaddress.IPv4Network(v["cluster.podVswitchCidr"])
    others = {"vswitch.cidr": v["vswitch.cidr"], "cluster.serviceCidr": v["cluster.serviceCidr"]}
    free = None
    if v["vpc.id"] is None:
        vpc = ipaddress.IPv4Network(v["vpc.cidr"])
        taken = [ipaddress.IPv4Network(c) for c in others.values()]
        free = next(
            (
                str(s)
                for s in vpc.subnets(new_prefix=max(pods.prefixlen, vpc.prefixlen))
                if not any(s.overlaps(t) for t in taken)
            ),
            None,
        )
        if not pods.subnet_of(vpc):
            r.bad(
                "cluster.podVswitchCidr",
                f"must lie inside vpc.cidr ({v['vpc.cidr']}): the pod vSwitch is one of the node VPC",
                fix_value=free,
            )
            return
    _first_overlap(r, "cluster.podVswitchCidr", others, fix_value=free)


def registry_credentials(r: Reading, d: Resolved) -> None:
    """registryCredentials.*: a secret password, both or neither of user and password, and a
    server that some image of the stack comes from."""
    v = r.values
    username, password = v["registryCredentials.username"], v["registryCredentials.password"]
    if password is not None and "registryCredentials.password" not in r.secrets:
        r.problems.append(
            password_not_secret("registryCredentials.password", r.forms["registryCredentials.password"])
        )
    if username is not None and password is None:
        r.missing(
            "registryCredentials.password",
            "required with registryCredentials.username (the stack creates the pull Secret from both)",
            "<password>",
            secret=True,
        )
    if password is not None and username is None:
        r.missing(
            "registryCredentials.username",
            "required with registryCredentials.password (the stack creates the pull Secret from both)",
        )
    if username is None and password is None:
        if r.is_set("registryCredentials.server"):
            r.refuse(
                "registryCredentials.server",
                "applies only with registryCredentials.username and registryCredentials.password",
            )
        return
    hosts = sorted({image_host(i) for i in (d.worker_image, d.cpu_image, d.tensorboard_image)})
    if d.registry_server in hosts:
        return
    # Kubelet offers a Secret's login only to the registry it names.
    shown = ", ".join(hosts)
    if v["registryCredentials.server"] is None:
        r.missing(
            "registryCredentials.server",
            f"required when no image comes from the host of imageRegistry "
            f"({d.registry_server}): the images come from {shown}",
            hosts[0],
        )
    else:
        r.bad(
            "registryCredentials.server",
            f"names registry {d.registry_server}, which no image of the stack "
            f"comes from ({shown}), so the pull Secret would never be used",
            fix_value=hosts[0],
        )


def cluster_identity(r: Reading, d: Resolved) -> None:
    """clusterIdentifier only with kubeconfig; without it, the kubeconfig must name its server."""
    kubeconfig = r.values["kubeconfig"]
    if kubeconfig is None:
        if r.is_set("clusterIdentifier"):
            r.refuse(
                "clusterIdentifier",
                "applies only with kubeconfig (without it the ACK cluster id identifies the cluster)",
            )
    elif d.cluster_identifier_error is not None:
        # Content is shown by its size only: even unset as a secret it holds credentials.
        r.bad(
            "kubeconfig",
            d.cluster_identifier_error,
            shown_as=None
            if is_kubeconfig_path(kubeconfig)
            else f"<kubeconfig content, {len(kubeconfig.splitlines())} lines>",
        )


def tensorboard(r: Reading, _: Resolved) -> None:
    """A load balancer in front of TensorBoard, which has no login, names who may reach it:
    TensorBoard serves every run's data (and its file paths) to whoever connects.

    Source ranges are required on an internet load balancer, and on any load balancer with
    kubeconfig: tensorboard.addressType is an annotation that only ACK's cloud controller reads,
    and the stack knows the cluster is ACK only when it creates it or names it (cluster.id); on
    another cluster a LoadBalancer Service is typically internet-facing. Whatever the address
    type, the ranges must not admit the internet (source_ranges.too_wide: more than a /8 of
    public addresses together)."""
    v = r.values
    if v["tensorboard.serviceType"] != "LoadBalancer":
        return
    key = "tensorboard.allowedSourceRanges"
    ranges = v[key]
    private = "or keep it private with tensorboard.serviceType ClusterIP and kubectl port-forward"
    fix = f"    fix: pulumi config set --path '{key}[0]' <your address>/32"
    if not ranges and v["kubeconfig"] is not None:
        r.problems.append(
            f"Configuration '{PROJECT}:{key}' is missing: required with tensorboard.serviceType LoadBalancer "
            "and kubeconfig, whatever tensorboard.addressType says (the address type is an annotation only ACK's "
            "cloud controller reads: on another cluster the load balancer is typically internet-facing, and "
            f"TensorBoard has no login); {private}.\n{fix}"
        )
    elif not ranges and v["tensorboard.addressType"] == "internet":
        # A list key: the fix sets its first item with --path (messages.missing would not).
        r.problems.append(
            f"Configuration '{PROJECT}:{key}' is missing: required with "
            "tensorboard.serviceType LoadBalancer and tensorboard.addressType internet (TensorBoard has no login: "
            f"without source ranges the whole internet reaches it); {private}, or use tensorboard.addressType "
            f"intranet.\n{fix}"
        )
    why = too_wide(ranges)
    if why is not None:
        r.problems.append(
            source_ranges_too_wide(
                key,
                shown(r.raws[key]),
                f"{why}: TensorBoard has no login, so list the networks that may reach it, not the internet; {private}",
                r.forms[key],
            )
        )


def data_source_credentials(r: Reading, _: Resolved) -> None:
    """A data.source URL with more than scheme, host, port and path (user info, a query, a
    fragment: see url_credentials) is set with ``--secret``; the stack then hands it to staging
    through a Kubernetes Secret (infra/components/staging.py). The message hides those parts."""
    sources = source_list(r.values["data.source"])
    found = [what for what in map(not_plain, sources) if what is not None]
    if found and "data.source" not in r.secrets:
        value = r.values["data.source"]
        hidden = (
            redacted(value)
            if isinstance(value, str)
            else json.dumps([redacted(s) for s in sources], separators=(",", ":"))
        )
        r.problems.append(source_not_plain("data.source", hidden, found[0], r.forms["data.source"]))


def kubeconfig_secret(r: Reading, _: Resolved) -> None:
    """kubeconfig content (not a path) is set with ``--secret``: it holds the cluster's
    credentials, as registryCredentials.password holds the registry's."""
    kubeconfig = r.values["kubeconfig"]
    if kubeconfig is not None and not is_kubeconfig_path(kubeconfig) and "kubeconfig" not in r.secrets:
        r.problems.append(kubeconfig_not_secret("kubeconfig", len(kubeconfig.splitlines())))


def task_names(r: Reading, d: Resolved) -> None:
    """The longest object name must still be a DNS label: checked through the shared module."""
    try:
        cs.kubernetes_cluster_spec(r.values["namePrefix"], r.values["namespace"], d.replicas, d.ports)
    except cs.ClusterSpecError as error:
        r.bad("namePrefix", f"gives invalid task names ({error})", fix_value="mnist")


#: Every rule, in the order its violations are reported.
RULES: tuple[Rule, ...] = (
    ports,
    cloud_layer,
    *CLOUD_RULES,
    volume,
    namespace,
    cidrs,
    registry_credentials,
    data_source_credentials,
    kubeconfig_secret,
    cluster_identity,
    tensorboard,
    task_names,
)


def cross_check(reading: Reading, resolved: Resolved) -> None:
    """Run every rule of RULES on ``reading``, which collects their violations."""
    for rule in RULES:
        rule(reading, resolved)
