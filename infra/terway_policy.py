"""Whether the cluster's Terway enforces the stack's NetworkPolicies.

The stack's gRPC servers (ps, workers, chief) accept any connection: its NetworkPolicies are
the boundary that keeps other pods off them. On ACK, Terway enforces NetworkPolicy only when
its component config asks for it: ACK's console offers "NetworkPolicy support" as an option,
and its Terraform guide sets ``config = {"NetworkPolicy": "true"}`` on the terway-eniip addon,
which the cluster this stack creates does (infra/components/cluster.py). Terway reads the
setting from the ConfigMap ``kube-system/eni-config``, key ``disable_network_policy``
(``"true"``: the policies exist and nothing enforces them).

On a cluster the stack is pointed at by a kubeconfig, that ConfigMap is read at every preview
and up while ``networkPolicy.enabled`` is true (``check``): ``"true"`` there stops the program
before anything is registered, naming the ConfigMap, the value and the fixes. A cluster without
the ConfigMap is not Terway (its plugin is the user's to know: docs/deploying.md); one whose
ConfigMap cannot be read (403, no answer) gets a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import pulumi

from infra.cluster_objects import Refused, Unreachable

#: Where Terway keeps its daemon's settings, and the key that turns its policy agent off.
ENI_CONFIG = ("kube-system", "eni-config")
DISABLE_KEY = "disable_network_policy"


class ConfigMapView(Protocol):
    """What the check reads from an existing cluster (infra/cluster_objects.KubeconfigCluster)."""

    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None: ...


class PolicyNotEnforced(pulumi.RunError):
    """The cluster's Terway does not enforce NetworkPolicy; nothing was deployed.

    A ``pulumi.RunError``: the CLI prints the message without a traceback.
    """


def check(network_policy: bool, cluster: ConfigMapView | None) -> None:
    """Refuse a cluster whose Terway has NetworkPolicy off while the stack relies on it.

    Args:
        network_policy: networkPolicy.enabled.
        cluster: the existing cluster (kubeconfig mode); None when the stack creates it (its
            addon config asks for enforcement).

    Raises:
        PolicyNotEnforced: eni-config's ``disable_network_policy`` is ``"true"``.
    """
    if not network_policy or cluster is None:
        return
    namespace, name = ENI_CONFIG
    try:
        data = cluster.config_map_data(namespace, name)
    except (Unreachable, Refused) as error:
        pulumi.log.warn(
            f"could not read ConfigMap {namespace}/{name} ({error}) to check that the cluster's Terway, if it "
            "is Terway, enforces the stack's NetworkPolicies; `kubectl -n kube-system get configmap eni-config "
            f"-o jsonpath='{{.data.{DISABLE_KEY}}}'` must not print true"
        )
        return
    value = (data or {}).get(DISABLE_KEY)
    if value is None or value.strip().lower() != "true":
        return
    raise PolicyNotEnforced(
        f"ConfigMap {namespace}/{name} has {DISABLE_KEY}: {value!r}: the cluster's Terway does not enforce "
        "NetworkPolicy, so the stack's policies would leave the training's gRPC ports (no authentication) "
        "open to every pod of the cluster; nothing was deployed.\n"
        "    fix: turn on NetworkPolicy support in the cluster's Terway component (ACK console: the cluster's "
        'Add-ons, terway-eniip, NetworkPolicy), which sets it to "false"\n'
        "    or, on a cluster you trust every pod of: pulumi config set networkPolicy.enabled false"
    )
