"""The cross-check phase: rules between keys, each value already valid on its own.

A rule reads the typed configuration (``Config``) and what several keys give (``Derived``),
and yields ``Problem``s, which the Reading words (infra/settings/problems.py); ``RULES`` runs
them in the order the violations are reported. A key that is bad on its own holds its default
here, so a rule may report a second violation about a key whose own value was already refused.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Iterator

from infra.kubeconfig import is_kubeconfig_path
from infra.settings.cloud_rules import CLOUD_RULES
from infra.settings.config import Config, section_keys
from infra.settings.model import Derived
from infra.settings.problems import MISSING, NOT_APPLICABLE, Problem
from infra.settings.read import Reading
from infra.source_ranges import too_wide
from infra.url_credentials import not_plain, redacted
from infra.values.parsers import image_host, source_list
from trainer.contract import cluster_spec as cs

#: Namespaces every cluster has: the stack must never create (and on destroy delete) them.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Keys that configure one volume type only, by type (refused with the others).
VOLUME_KEYS = {"nas": section_keys("nas"), "nfs": section_keys("nfs"), "hostPath": section_keys("host_path")}

Rule = Callable[[Config, Derived, Reading], Iterable[Problem]]


def ports(c: Config, _: Derived, __: Reading) -> Iterator[Problem]:
    """ps and workers listen on different ports (a chief listens on worker.port)."""
    worker_port = c.worker.port
    if c.ps.port == worker_port:
        fix = worker_port + 1000 if worker_port <= 64535 else worker_port - 1000
        yield Problem("ps.port", f"must differ from worker.port ({worker_port})", fix=str(fix))


def cloud_layer(c: Config, _: Derived, __: Reading) -> Iterator[Problem]:
    """What the stack needs to create the cluster's pools and its vSwitch."""
    per_node = c.gpu_pool.gpus_per_instance
    if c.kubeconfig is None and c.worker.gpu_count > per_node:
        # A pod's GPUs come from one node: a bigger request stays Pending on every GPU node.
        yield Problem(
            "worker.gpuCount",
            f"must be at most gpuPool.gpusPerInstance ({per_node}), the GPUs of one node (or choose "
            "larger gpuPool.instanceTypes and set gpuPool.gpusPerInstance)",
            fix=str(per_node),
        )
    if c.creates_network and c.cluster.id is not None:
        yield Problem(
            "cluster.id",
            "needs vswitch.id (and vswitch.cidr) of the cluster's node vSwitch",
            fix_key="vswitch.id",
        )
    if c.creates_network and not c.zone:
        yield Problem("zone", "required when the stack creates the vSwitch", MISSING)


def volume(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """persistence.volume.type fits the cluster, and only its own keys are set, all of them."""
    volume_type = c.volume.type
    if c.kubeconfig is None and volume_type != "nas":
        # The cluster the stack creates has several nodes (a CPU pool, a GPU pool), which share
        # no host directory, and a VPC of its own, where no NFS server runs: NAS (created
        # with it) is what its pods can all mount.
        reason = (
            "a directory of one node is not shared by the several nodes of the cluster the stack creates"
            if volume_type == "hostPath"
            else "the stack creates the cluster in a VPC of its own, where it creates NAS and no NFS "
            "server runs"
        )
        yield Problem(
            "persistence.volume.type",
            f"must be nas without kubeconfig ({reason}); {volume_type} needs an existing cluster (kubeconfig)",
            fix="nas",
        )
    for type_, names in VOLUME_KEYS.items():
        if type_ != volume_type:
            rule = f"applies only with persistence.volume.type {type_} (this stack's is {volume_type})"
            yield from (Problem(name, rule, NOT_APPLICABLE) for name in names if r.is_set(name))
    if c.kubeconfig is not None and volume_type == "nas" and c.nas.mount_target_domain is None:
        yield Problem(
            "nas.mountTargetDomain", "required with kubeconfig (the stack then creates no NAS)", MISSING
        )
    if volume_type == "nfs":
        for name, value in (("nfs.server", c.nfs.server), ("nfs.path", c.nfs.path)):
            if value is None and name not in r.own_problem:
                yield Problem(name, "required with persistence.volume.type nfs", MISSING)


def namespace(c: Config, _: Derived, __: Reading) -> Iterator[Problem]:
    """The stack creates (and on destroy deletes) no namespace that every cluster has."""
    if c.creates_namespace and c.namespace in SYSTEM_NAMESPACES:
        yield Problem(
            "createNamespace",
            f"must be false with namespace {c.namespace}, which every cluster has: the stack would try "
            "to create it and, on destroy, delete it",
            fix="false",
        )


def cidrs(c: Config, d: Derived, __: Reading) -> Iterator[Problem]:
    """A new vSwitch lies in its new VPC; a new cluster's pod addresses (cluster.podCidr with
    Flannel, a pod vSwitch the stack creates with Terway) and Service CIDR overlap no node
    network and each other; a created pod vSwitch lies in a new VPC too."""
    if c.creates_network and c.vpc.id is None:
        if not ipaddress.IPv4Network(c.vswitch.cidr).subnet_of(ipaddress.IPv4Network(c.vpc.cidr)):
            yield Problem("vswitch.cidr", f"must lie inside vpc.cidr ({c.vpc.cidr})")
    if c.kubeconfig is not None or c.cluster.id is not None:
        return
    vpc = {"vpc.cidr": c.vpc.cidr} if c.vpc.id is None and c.creates_network else {}
    nodes = {**vpc, "vswitch.cidr": c.vswitch.cidr}
    if d.target.network_plugin == "terway":
        yield from _first_overlap("cluster.serviceCidr", c.cluster.service_cidr, nodes)
        if c.creates_network and c.cluster.pod_vswitch_id is None:
            yield from _pod_vswitch_cidr(c)
        return
    yield from _first_overlap("cluster.podCidr", c.cluster.pod_cidr, nodes)
    services = {**nodes, "cluster.podCidr": c.cluster.pod_cidr}
    yield from _first_overlap("cluster.serviceCidr", c.cluster.service_cidr, services)


def _first_overlap(name: str, cidr: str, others: dict[str, str], fix: str | None = None) -> Iterator[Problem]:
    """``name``'s ``cidr`` where it overlaps the first of ``others`` (key -> CIDR) it does; the
    fix sets ``fix`` (default the key's fix)."""
    for other, other_cidr in others.items():
        if ipaddress.IPv4Network(cidr).overlaps(ipaddress.IPv4Network(other_cidr)):
            yield Problem(name, f"must not overlap {other} ({other_cidr})", fix=fix)
            return


def _pod_vswitch_cidr(c: Config) -> Iterator[Problem]:
    """The pod vSwitch the stack creates: a vSwitch of the node VPC (inside vpc.cidr when the
    stack creates that VPC) beside the node vSwitch, and apart from the Service CIDR. The fix
    is the first block of its size in a new VPC that is free."""
    pods = ipaddress.IPv4Network(c.cluster.pod_vswitch_cidr)
    others = {"vswitch.cidr": c.vswitch.cidr, "cluster.serviceCidr": c.cluster.service_cidr}
    free = None
    if c.vpc.id is None:
        vpc = ipaddress.IPv4Network(c.vpc.cidr)
        taken = [ipaddress.IPv4Network(o) for o in others.values()]
        blocks = vpc.subnets(new_prefix=max(pods.prefixlen, vpc.prefixlen))
        free = next((str(s) for s in blocks if not any(s.overlaps(t) for t in taken)), None)
        if not pods.subnet_of(vpc):
            rule = f"must lie inside vpc.cidr ({c.vpc.cidr}): the pod vSwitch is one of the node VPC"
            yield Problem("cluster.podVswitchCidr", rule, fix=free)
            return
    yield from _first_overlap("cluster.podVswitchCidr", c.cluster.pod_vswitch_cidr, others, fix=free)


def registry_credentials(c: Config, d: Derived, r: Reading) -> Iterator[Problem]:
    """registryCredentials.*: a secret password, both or neither of user and password, and a
    server that some image of the stack comes from."""
    login = c.registry_credentials
    if login.password is not None and "registryCredentials.password" not in r.secrets:
        yield Problem(
            "registryCredentials.password",
            "the stack file would hold the registry password in plain text",
            "is not a secret",
            command="pulumi config set --secret registryCredentials.password <password>",
            path_command="pulumi config set --secret --path registryCredentials.password <password>",
        )
    both = "(the stack creates the pull Secret from both)"
    if login.username is not None and login.password is None:
        rule = f"required with registryCredentials.username {both}"
        yield Problem("registryCredentials.password", rule, MISSING, fix="<password>", secret=True)
    if login.password is not None and login.username is None:
        yield Problem(
            "registryCredentials.username", f"required with registryCredentials.password {both}", MISSING
        )
    if login.username is None and login.password is None:
        if r.is_set("registryCredentials.server"):
            rule = "applies only with registryCredentials.username and registryCredentials.password"
            yield Problem("registryCredentials.server", rule, NOT_APPLICABLE)
        return
    hosts = sorted(
        {image_host(i) for i in (d.training.worker.image, d.training.ps.image, d.tensorboard_image.image)}
    )
    if d.registry_server in hosts:
        return
    # Kubelet offers a Secret's login only to the registry it names.
    listed = ", ".join(hosts)
    if login.server is None:
        rule = (
            f"required when no image comes from the host of imageRegistry ({d.registry_server}): the "
            f"images come from {listed}"
        )
        yield Problem("registryCredentials.server", rule, MISSING, fix=hosts[0])
    else:
        rule = (
            f"names registry {d.registry_server}, which no image of the stack comes from ({listed}), so "
            "the pull Secret would never be used"
        )
        yield Problem("registryCredentials.server", rule, fix=hosts[0])


def cluster_identity(c: Config, d: Derived, r: Reading) -> Iterator[Problem]:
    """clusterIdentifier only with kubeconfig; without it, the kubeconfig must name its server."""
    if c.kubeconfig is None:
        if r.is_set("clusterIdentifier"):
            rule = "applies only with kubeconfig (without it the ACK cluster id identifies the cluster)"
            yield Problem("clusterIdentifier", rule, NOT_APPLICABLE)
    elif d.target.identifier_error is not None:
        # Content is shown by its size only: even unset as a secret it holds credentials.
        size = f"<kubeconfig content, {len(c.kubeconfig.splitlines())} lines>"
        shown = None if is_kubeconfig_path(c.kubeconfig) else size
        yield Problem("kubeconfig", d.target.identifier_error, shown=shown)


def tensorboard(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """A load balancer in front of TensorBoard, which has no login, names who may reach it:
    TensorBoard serves every run's data (and its file paths) to whoever connects.

    Source ranges are required on an internet load balancer, and on any load balancer with
    kubeconfig: tensorboard.addressType is an annotation that only ACK's cloud controller reads,
    and the stack knows the cluster is ACK only when it creates it or names it (cluster.id); on
    another cluster a LoadBalancer Service is typically internet-facing. Whatever the address
    type, the ranges must not admit the internet (source_ranges.too_wide: more than a /8 of
    public addresses together)."""
    if c.tensorboard.service_type != "LoadBalancer":
        return
    key = "tensorboard.allowedSourceRanges"
    ranges = c.tensorboard.allowed_source_ranges
    private = "or keep it private with tensorboard.serviceType ClusterIP and kubectl port-forward"
    fix = f"pulumi config set --path '{key}[0]' <your address>/32"
    if not ranges and c.kubeconfig is not None:
        rule = (
            "required with tensorboard.serviceType LoadBalancer and kubeconfig, whatever tensorboard.addressType "
            "says (the address type is an annotation only ACK's cloud controller reads: on another cluster the "
            f"load balancer is typically internet-facing, and TensorBoard has no login); {private}"
        )
        yield Problem(key, rule, "is missing", command=fix)
    elif not ranges and c.tensorboard.address_type == "internet":
        rule = (
            "required with tensorboard.serviceType LoadBalancer and tensorboard.addressType internet (TensorBoard "
            f"has no login: without source ranges the whole internet reaches it); {private}, or use "
            "tensorboard.addressType intranet"
        )
        yield Problem(key, rule, "is missing", command=fix)
    why = too_wide(ranges)
    if why is not None:
        rule = f"these ranges {why}: TensorBoard has no login, so list the networks that may reach it, not the internet; {private}"
        flat = f"pulumi config set {key} '[\"<your address>/32\"]'"
        yield Problem(key, rule, command=flat, path_command=f"pulumi config rm --path {key} && {fix}")


def data_source_credentials(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """A data.source URL with more than scheme, host, port and path (user info, a query, a
    fragment: see url_credentials) is set with ``--secret``; the stack then hands it to staging
    through a Kubernetes Secret (infra/components/staging.py). The message hides those parts."""
    sources = source_list(c.data.source)
    found = [what for what in map(not_plain, sources) if what is not None]
    if found and "data.source" not in r.secrets:
        value = c.data.source
        hidden = (
            redacted(value)
            if isinstance(value, str)
            else json.dumps([redacted(s) for s in sources], separators=(",", ":"))
        )
        yield Problem(
            "data.source",
            "a data.source in plain text is an http(s) URL of scheme, host, port and path only, since user "
            "info, a query or a fragment carries a credential whenever the server asks for one (a presigned "
            "URL's signature, an Azure SAS sig, a token), which the stack file, the staging Job's command and "
            "the state would hold in plain text",
            f"is not a secret but holds {found[0]}",
            command="pulumi config set --secret data.source <the same value>",
            path_command="pulumi config set --secret --path data.source <the same value>",
            shown=hidden,
        )


def kubeconfig_secret(c: Config, _: Derived, r: Reading) -> Iterator[Problem]:
    """kubeconfig content (not a path) is set with ``--secret``: it holds the cluster's
    credentials, as registryCredentials.password holds the registry's."""
    kubeconfig = c.kubeconfig
    if kubeconfig is not None and not is_kubeconfig_path(kubeconfig) and "kubeconfig" not in r.secrets:
        yield Problem(
            "kubeconfig",
            "kubeconfig content holds the cluster's credentials (a token, a client key or password), which the "
            "stack file (Pulumi.<stack>.yaml) would hold in plain text; set the content with --secret, or set "
            "the path of the file instead (a path is read at every operation and stored as the path)",
            "is not a secret",
            command="pulumi config set --secret kubeconfig < ~/.kube/config, or pulumi config set kubeconfig ~/.kube/config",
            shown=f"<kubeconfig content, {len(kubeconfig.splitlines())} lines>",
        )


def task_names(c: Config, d: Derived, __: Reading) -> Iterator[Problem]:
    """The longest object name must still be a DNS label: checked through the shared module."""
    try:
        cs.kubernetes_cluster_spec(c.name_prefix, c.namespace, d.training.replicas, d.training.ports)
    except cs.ClusterSpecError as error:
        yield Problem("namePrefix", f"gives invalid task names ({error})", fix="mnist")


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


def cross_check(c: Config, resolved: Derived, reading: Reading) -> None:
    """Run every rule of RULES, ``reading`` wording their problems."""
    for rule in RULES:
        reading.add(rule(c, resolved, reading))
