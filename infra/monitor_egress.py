"""The TCP ports the run monitor's NetworkPolicy lets it open: the port(s) its connections reach
the API server on, as the network plugin sees them.

A NetworkPolicy is checked against a connection's destination after the Service's translation
(kube-proxy's DNAT, or a plugin's own load balancing), so a monitor that calls the in-cluster
address (the ``kubernetes`` Service, port 443) is seen opening the port of that Service's
endpoints: the API server's own port, 6443 on ACK and on kubeadm's clusters. A port the policy
does not open loses the monitor silently: its connections time out, a stuck run is never
ended and the staging Job's deadline is never raised. So the ports are, first match wins:

1. ``monitor.apiServerPort``, set: that port (the rule for any cluster the program cannot read,
   or an address whose translation it cannot see);
2. ``monitor.apiServer``, set: its URL's port (443 for https without one);
3. an existing cluster (kubeconfig): the ports of the ``kubernetes`` Service's endpoints, read
   from its EndpointSlices at preview and at up (infra/cluster_objects.py); where they cannot
   be read (the cluster does not answer, the kubeconfig may not list EndpointSlices in
   ``default``, or it has none) the program warns and opens UNREAD_PORTS, the usual two;
4. a cluster the stack creates in the same ``up`` (ACK), which cannot be read before it exists:
   ACK_API_SERVER_PORT.

The ports are read on every preview and up, so a cluster whose API server moves to another port
gets a policy that follows it on the next ``up``. A monitor that cannot reach the server fails
loudly meanwhile (infra/run_monitor.py: exit EXIT_UNREACHABLE, the address, its port and these
ports in its message); the ports are in its pod's environment (MONITOR_EGRESS_PORTS), so the
``up`` that changes them also starts a new monitor.
"""

from __future__ import annotations

from typing import Protocol

import pulumi

from infra.cluster_objects import Refused, Unreachable
from infra.components.network_policy import url_port
from infra.settings import Settings

#: The port of ACK's API server behind the kubernetes Service (its endpoints: the internal SLB
#: of the control plane listens on 6443, as the kubeconfig ACK issues names).
ACK_API_SERVER_PORT = 6443
#: What the policy opens when an existing cluster's endpoints cannot be read: the two ports API
#: servers listen on (443: EKS, GKE, AKS; 6443: ACK, kubeadm, k3s).
UNREAD_PORTS = (443, 6443)


class EndpointsView(Protocol):
    """Where ``monitor_ports`` reads the API server's endpoints from
    (infra.cluster_objects.KubeconfigCluster; tests fake it)."""

    def api_server_ports(self) -> list[int]:
        """The ports of the kubernetes Service's endpoints; raises Unreachable or Refused."""
        ...


def monitor_ports(settings: Settings, cluster: EndpointsView | None) -> list[int]:
    """The TCP ports the run monitor's NetworkPolicy opens to the API server, by the rule in the
    module docstring, sorted.

    Args:
        cluster: the existing cluster (kubeconfig mode); None when the stack creates it.
    """
    training = settings.training
    if training.monitor.api_server_port is not None:
        return [training.monitor.api_server_port]
    if training.monitor.api_server:
        port = url_port(training.monitor.api_server)
        assert port is not None, "monitor.apiServer is an https URL (infra.values.parsers.https_url)"
        return [port]
    if cluster is None:
        return [ACK_API_SERVER_PORT]
    try:
        ports = cluster.api_server_ports()
        why = "the kubernetes Service has no endpoints"
    except (Unreachable, Refused) as error:
        ports, why = [], f"they could not be read ({error})"
    if ports:
        return ports
    pulumi.log.warn(
        "the run monitor's NetworkPolicy opens TCP "
        + " and ".join(map(str, UNREAD_PORTS))
        + f" to the API server, the usual ports, not the ports of the kubernetes Service's endpoints: {why}. "
        "On an API server that listens on another port the monitor cannot reach it and its Job fails; "
        "`pulumi config set monitor.apiServerPort <port>` names the port (`kubectl get endpointslices "
        "--namespace default -l kubernetes.io/service-name=kubernetes` shows it)"
    )
    return list(UNREAD_PORTS)
