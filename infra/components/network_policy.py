"""NetworkPolicies of one run: its tasks' gRPC ports admit only the run's own tasks, and
TensorBoard admits only what its Service type exposes.

TensorFlow's gRPC server has no authentication and runs whatever graph it is sent (file reads
and writes included), so a task's port must not be reachable from any pod but its peers'. The
policies select pods by the run's labels (infra/components/labels.py): the instance (the name
prefix) and the stack's mark, so neither another prefix's run nor another stack's run with the
same prefix is admitted, and NetworkPolicies are namespaced, so nothing from another namespace
is. Traffic from the node itself (kubelet probes, ``kubectl port-forward``, which enters the pod
through the kubelet and the container runtime) is always allowed by the NetworkPolicy API.

Only ingress is restricted: the tasks, the staging Job and the run monitor open connections to
the API server, the volume, DNS and their peers, all of which egress rules would have to list per
cluster. A cluster enforces these objects only with a network plugin that implements
NetworkPolicy (on ACK, Terway does and Flannel does not: see docs/deploying.md, "Network policies").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.components.labels import STACK_LABEL, current_stack_mark, recommended_labels
from infra.components.tensorboard import TENSORBOARD_PORT

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
#: The label every task pod (chief, worker, ps) has and no other pod of the stack has
#: (labels.task_selector).
TASK_TYPE_LABEL = "tf-replica-type"


def tasks_policy_name(name: str) -> str:
    """The tasks' NetworkPolicy: ``<name>-tasks``."""
    return f"{name}-tasks"


def tensorboard_policy_name(name: str) -> str:
    """TensorBoard's NetworkPolicy: ``<name>-tensorboard`` (the Deployment's name, another kind)."""
    return f"{name}-tensorboard"


def object_names(name: str) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every object ``RunNetworkPolicies(name, ...)`` creates,
    in its namespace."""
    return [(NETWORK_POLICY, tasks_policy_name(name)), (NETWORK_POLICY, tensorboard_policy_name(name))]


def task_pods(name: str) -> k8s.meta.v1.LabelSelectorArgs:
    """The selector of the run's task pods: instance ``name``, this stack's mark, and a
    tf-replica-type label (which only task pods have)."""
    return k8s.meta.v1.LabelSelectorArgs(
        match_labels={"app.kubernetes.io/instance": name, STACK_LABEL: current_stack_mark()},
        match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key=TASK_TYPE_LABEL, operator="Exists")])


def tensorboard_pods(name: str) -> k8s.meta.v1.LabelSelectorArgs:
    """The selector of the run's TensorBoard pod (instance, component, this stack's mark)."""
    return k8s.meta.v1.LabelSelectorArgs(match_labels={
        "app.kubernetes.io/instance": name, "app.kubernetes.io/component": "tensorboard",
        STACK_LABEL: current_stack_mark()})


@dataclass
class RunNetworkPoliciesArgs:
    """What the run's pods listen on.

    Attributes:
        namespace: the run's namespace (an Output when the stack creates it).
        task_ports: the gRPC ports of the run's tasks (ps.port, worker.port; the chief listens
            on worker.port), each 1 to 65535.
        tensorboard_exposed: TensorBoard's Service is a NodePort or a LoadBalancer
            (tensorboard.serviceType), not the default ClusterIP.
    """

    namespace: pulumi.Input[str]
    task_ports: Sequence[int]
    tensorboard_exposed: bool


class RunNetworkPolicies(pulumi.ComponentResource):
    """Two ingress-only NetworkPolicies for the run ``name`` (networkPolicy.enabled).

    Children:
        ``<name>-tasks``: the task pods (``task_pods``) accept TCP on ``task_ports`` from the
            same pods only, and nothing else.
        ``<name>-tensorboard``: TensorBoard's pod accepts nothing with a ClusterIP Service
            (``kubectl port-forward`` still reaches it); with a NodePort or LoadBalancer it
            accepts TCP on its port from any address, because a load balancer's and a node
            port's traffic reaches the pod from node addresses (kube-proxy's SNAT with
            externalTrafficPolicy Cluster), so who may connect is decided at the load balancer
            (tensorboard.allowedSourceRanges: loadBalancerSourceRanges and the SLB ACL).
    """

    def __init__(self, name: str, args: RunNetworkPoliciesArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:RunNetworkPolicies", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ports = [k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=p) for p in sorted(set(args.task_ports))]
        self.tasks = k8s.networking.v1.NetworkPolicy(
            tasks_policy_name(name),
            metadata=self._metadata(tasks_policy_name(name), name, args),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=task_pods(name),
                policy_types=["Ingress"],
                ingress=[k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=task_pods(name))], ports=ports)]),
            opts=child)
        exposed = [k8s.networking.v1.NetworkPolicyIngressRuleArgs(
            ports=[k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=TENSORBOARD_PORT)])]
        self.tensorboard = k8s.networking.v1.NetworkPolicy(
            tensorboard_policy_name(name),
            metadata=self._metadata(tensorboard_policy_name(name), name, args),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=tensorboard_pods(name),
                policy_types=["Ingress"],
                ingress=exposed if args.tensorboard_exposed else []),
            opts=child)
        self.register_outputs({})

    @staticmethod
    def _metadata(object_name: str, name: str, args: RunNetworkPoliciesArgs) -> k8s.meta.v1.ObjectMetaArgs:
        return k8s.meta.v1.ObjectMetaArgs(name=object_name, namespace=args.namespace,
                                          labels=recommended_labels(name, "network-policy"))
