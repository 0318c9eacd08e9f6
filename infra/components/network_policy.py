"""NetworkPolicies of one run: every pod of the run is selected by one, which admits only what
that pod must be reached by and lets it open only the connections it must open.

TensorFlow's gRPC server has no authentication and runs whatever graph it is sent (file reads
and writes included), so a task's port must not be reachable from any pod but its peers'. The
policies select pods by the run's labels (infra/components/labels.py): the instance (the name
prefix) and the stack's mark, so neither another prefix's run nor another stack's run with the
same prefix is admitted, and NetworkPolicies are namespaced, so nothing from another namespace
is. Traffic from the node itself (kubelet probes, ``kubectl port-forward``, which enters the pod
through the kubelet and the container runtime) is always allowed by the NetworkPolicy API.

Egress (what each pod may open), by what the pods' code connects to:
- every pod: DNS, port 53 over UDP and TCP, to the cluster DNS's pods (namespace kube-system,
  label k8s-app=kube-dns: CoreDNS's on ACK, kubeadm, EKS, GKE, k3s; a connection to the
  kube-dns Service reaches one of them after the Service's translation, which is what the
  plugin checks) and to link-local addresses (DNS_LINK_LOCAL: a node-local DNS cache, such as
  ACK's and the upstream NodeLocal DNSCache on 169.254.20.10, answers there, on the pod's own
  node; nothing off the node has such an address). Not to any other address: a pod cannot
  query, or tunnel through, a DNS server of its choosing. tools/local-cluster's CoreDNS runs
  on the node (10.244.0.1), which its agent never filters (node traffic is not queued);
- the tasks: the run's own task pods on the tasks' gRPC ports (TF_CONFIG's headless Services
  resolve to the pods' addresses), and nothing else: training reads and writes only the
  shared volume, which the node mounts (NAS, NFS, hostPath), outside the pod's network;
- the staging Job: TCP 80 and 443 and each data.source URL's own port, to any address, when
  data.source holds an http(s) URL (a server may redirect http to https); nothing else when
  it copies from the image or the volume;
- the setup Job (on the base image only): TCP 80 and 443 and the package index's own port, to
  any address: pip fetches the index's pages and the wheels they link to, which may live on
  another host (PyPI's files.pythonhosted.org);
- the run monitor: the API server, on the TCP port(s) it is reached on after the Service's
  translation, to any address (infra/monitor_egress.py says which: monitor.apiServerPort,
  monitor.apiServer's port, the kubernetes Service's endpoints' port, or ACK's 6443);
- TensorBoard: nothing but DNS (it reads the volume, and looks up its own host name once).
A cluster enforces these objects only with a network plugin that implements NetworkPolicy
(on ACK, Terway does and Flannel does not: see docs/deploying.md, "Network policies").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as k8s

from infra.components import checker_suppressions as suppress
from infra.components.labels import STACK_LABEL, current_stack_mark, recommended_labels
from infra.components.tensorboard import TENSORBOARD_PORT

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
#: The label every task pod (chief, worker, ps) has and no other pod of the stack has
#: (labels.task_selector).
TASK_TYPE_LABEL = "tf-replica-type"
#: An http(s) data source's ports besides its own (see the module docstring).
WEB_PORTS = (80, 443)
DNS_PORT = 53
#: The cluster DNS's pods: their namespace (by the name label every namespace has since
#: Kubernetes 1.22) and their label, as CoreDNS's and kube-dns's Deployments set it.
DNS_NAMESPACE = {"kubernetes.io/metadata.name": "kube-system"}
DNS_PODS = {"k8s-app": "kube-dns"}
#: IPv4 link-local addresses, where a node-local DNS cache listens (169.254.20.10 by default).
DNS_LINK_LOCAL = "169.254.0.0/16"
#: The components (app.kubernetes.io/component) of the run's two single-pod Jobs.
STAGE_COMPONENT = "stage-data"
MONITOR_COMPONENT = "monitor"
#: The setup Job's component (infra/components/setup.py COMPONENT).
SETUP_COMPONENT = "setup"


def tasks_policy_name(name: str) -> str:
    """The tasks' NetworkPolicy: ``<name>-tasks``."""
    return f"{name}-tasks"


def tensorboard_policy_name(name: str) -> str:
    """TensorBoard's NetworkPolicy: ``<name>-tensorboard`` (the Deployment's name, another kind)."""
    return f"{name}-tensorboard"


def component_policy_name(name: str, component: str) -> str:
    """The NetworkPolicy of the staging Job's or the monitor's pod: ``<name>-<component>``
    (the Job's name, another kind)."""
    return f"{name}-{component}"


def object_names(name: str, setup: bool = False) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every object ``RunNetworkPolicies(name, ...)`` creates,
    in its namespace; ``setup``: with the setup Job's policy (RunNetworkPoliciesArgs.setup_ports)."""
    return [
        (NETWORK_POLICY, policy)
        for policy in (
            tasks_policy_name(name),
            tensorboard_policy_name(name),
            component_policy_name(name, STAGE_COMPONENT),
            component_policy_name(name, MONITOR_COMPONENT),
            *([component_policy_name(name, SETUP_COMPONENT)] if setup else []),
        )
    ]


def task_pods(name: str) -> k8s.meta.v1.LabelSelectorArgs:
    """The selector of the run's task pods: instance ``name``, this stack's mark, and a
    tf-replica-type label (which only task pods have)."""
    return k8s.meta.v1.LabelSelectorArgs(
        match_labels={"app.kubernetes.io/instance": name, STACK_LABEL: current_stack_mark()},
        match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key=TASK_TYPE_LABEL, operator="Exists")],
    )


def component_pods(name: str, component: str) -> k8s.meta.v1.LabelSelectorArgs:
    """The selector of the run's pods of ``component`` (tensorboard, stage-data, monitor):
    instance, component, this stack's mark."""
    return k8s.meta.v1.LabelSelectorArgs(
        match_labels={
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": component,
            STACK_LABEL: current_stack_mark(),
        }
    )


def tensorboard_pods(name: str) -> k8s.meta.v1.LabelSelectorArgs:
    """The selector of the run's TensorBoard pod (instance, component, this stack's mark)."""
    return component_pods(name, "tensorboard")


def url_port(url: str) -> int | None:
    """The TCP port an http(s) URL names, or its scheme's (80, 443); None for anything else,
    or a port that is no number (the settings or the stager refuse such a URL first)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def url_ports(urls: Sequence[str]) -> list[int]:
    """The TCP ports that fetching ``urls`` needs, sorted: WEB_PORTS and each http(s) URL's
    port (``url_port``); empty when none is an http(s) URL (a path in the image or on the
    volume)."""
    ports = {port for port in map(url_port, urls) if port is not None}
    return sorted(ports | set(WEB_PORTS)) if ports else []


@dataclass
class RunNetworkPoliciesArgs:
    """What the run's pods listen on and connect to.

    Attributes:
        namespace: the run's namespace (an Output when the stack creates it).
        task_ports: the gRPC ports of the run's tasks (ps.port, worker.port; the chief listens
            on worker.port), each 1 to 65535.
        tensorboard_exposed: TensorBoard's Service is a NodePort or a LoadBalancer
            (tensorboard.serviceType), not the default ClusterIP.
        api_server_ports: the TCP ports the run monitor reaches the API server on, as the
            network plugin sees them (infra/monitor_egress.py).
        source_ports: the TCP ports the staging Job fetches data.source on (``url_ports``).
        setup_ports: the TCP ports the setup Job reaches the package index on (``url_ports``
            of packageIndex); empty: the stack has no setup Job, and no policy for it.
    """

    namespace: pulumi.Input[str]
    task_ports: Sequence[int]
    tensorboard_exposed: bool
    api_server_ports: Sequence[int]
    source_ports: Sequence[int] = ()
    setup_ports: Sequence[int] = ()


def _tcp(ports: Sequence[int]) -> list[k8s.networking.v1.NetworkPolicyPortArgs]:
    return [k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=p) for p in sorted(set(ports))]


def _dns() -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """Egress to DNS: the cluster DNS's pods and link-local addresses (see the module docstring)."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[
            k8s.networking.v1.NetworkPolicyPeerArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=DNS_NAMESPACE),
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=DNS_PODS),
            ),
            k8s.networking.v1.NetworkPolicyPeerArgs(
                ip_block=k8s.networking.v1.IPBlockArgs(cidr=DNS_LINK_LOCAL)
            ),
        ],
        ports=[
            k8s.networking.v1.NetworkPolicyPortArgs(protocol=protocol, port=DNS_PORT)
            for protocol in ("UDP", "TCP")
        ],
    )


def _anywhere(ports: Sequence[int]) -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    """Egress to any address on TCP ``ports``; no rule for no port."""
    return [k8s.networking.v1.NetworkPolicyEgressRuleArgs(ports=_tcp(ports))] if ports else []


class RunNetworkPolicies(pulumi.ComponentResource):
    """Four (five with a setup Job) NetworkPolicies for the run ``name`` (networkPolicy.enabled), each of Ingress and
    Egress (what each admits and opens: the module docstring).

    Children:
        ``<name>-tasks``: the task pods (``task_pods``) accept TCP on ``task_ports`` from the
            same pods only, and connect to the same pods on the same ports.
        ``<name>-tensorboard``: TensorBoard's pod accepts nothing with a ClusterIP Service
            (``kubectl port-forward`` still reaches it); with a NodePort or LoadBalancer it
            accepts TCP on its port from any address, because a load balancer's and a node
            port's traffic reaches the pod from node addresses (kube-proxy's SNAT with
            externalTrafficPolicy Cluster), so who may connect is decided at the load balancer
            (tensorboard.allowedSourceRanges: loadBalancerSourceRanges and the SLB ACL).
        ``<name>-stage-data``, ``<name>-monitor`` (and ``<name>-setup`` with setup ports): the
            staging Job's, the run monitor's (and the setup Job's) pods accept nothing (they
            listen on no port).
    """

    def __init__(
        self, name: str, args: RunNetworkPoliciesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("tf-mnist:index:RunNetworkPolicies", name, None, opts)
        self._name, self._args = name, args
        peers = [k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=task_pods(name))]
        self.tasks = self._policy(
            tasks_policy_name(name),
            task_pods(name),
            ingress=[
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=peers, ports=_tcp(args.task_ports))
            ],
            egress=[k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=peers, ports=_tcp(args.task_ports))],
        )
        exposed = [k8s.networking.v1.NetworkPolicyIngressRuleArgs(ports=_tcp([TENSORBOARD_PORT]))]
        self.tensorboard = self._policy(
            tensorboard_policy_name(name),
            tensorboard_pods(name),
            ingress=exposed if args.tensorboard_exposed else [],
            egress=[],
        )
        self.stage = self._policy(
            component_policy_name(name, STAGE_COMPONENT),
            component_pods(name, STAGE_COMPONENT),
            ingress=[],
            egress=_anywhere(args.source_ports),
        )
        self.monitor = self._policy(
            component_policy_name(name, MONITOR_COMPONENT),
            component_pods(name, MONITOR_COMPONENT),
            ingress=[],
            egress=_anywhere(args.api_server_ports),
        )
        if args.setup_ports:
            self.setup = self._policy(
                component_policy_name(name, SETUP_COMPONENT),
                component_pods(name, SETUP_COMPONENT),
                ingress=[],
                egress=_anywhere(args.setup_ports),
            )
        self.register_outputs({})

    def _policy(
        self,
        object_name: str,
        pods: k8s.meta.v1.LabelSelectorArgs,
        ingress: list[k8s.networking.v1.NetworkPolicyIngressRuleArgs],
        egress: list[k8s.networking.v1.NetworkPolicyEgressRuleArgs],
    ) -> k8s.networking.v1.NetworkPolicy:
        """One policy of both types for ``pods``: ``ingress`` as given, ``egress`` after DNS."""
        return k8s.networking.v1.NetworkPolicy(
            object_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=object_name,
                namespace=self._args.namespace,
                labels=recommended_labels(self._name, "network-policy"),
                annotations=suppress.merged(None, suppress.OBJECT),
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=pods,
                policy_types=["Ingress", "Egress"],
                ingress=ingress,
                egress=[_dns(), *egress],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
