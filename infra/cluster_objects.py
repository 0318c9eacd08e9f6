"""Reads from an existing cluster, with the stack's kubeconfig, what the program must know before
it registers anything: the metadata of named objects (what infra/ownership.py checks), and the
ports of the ``kubernetes`` Service's endpoints (the run monitor's egress, infra/monitor_egress.py).

Only metadata is read of the stack's objects (``PartialObjectMetadata``: a Secret's data never
leaves the API server), one GET per object, and nothing about the kubeconfig (content, path,
server) appears in an error: the kubeconfig may be a secret. A cluster that did not answer once
is not asked again in the same run: each ask would wait CONNECT_TIMEOUT_S for nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.kubeconfig import is_kubeconfig_path
from trainer.contract.printable import printable

#: The API server answers with the object's metadata only (its kind PartialObjectMetadata).
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#: Seconds to connect to the API server and to wait for one answer. A cluster that does not
#: answer within them is reported unreachable (infra/ownership.py decides what that means).
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 15
#: Kinds whose plural is not ``<kind, lower case>s``.
PLURALS = {
    "NetworkPolicy": "networkpolicies",
    "Ingress": "ingresses",
    "PriorityClass": "priorityclasses",
    "StorageClass": "storageclasses",
}
#: The EndpointSlices of the ``kubernetes`` Service: where the API server says pods reach it
#: once the Service's address is translated (its reconciler writes them; discovery.k8s.io/v1).
API_SERVER_SLICES = (
    "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    "?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes"
)


@dataclass(frozen=True)
class ObjectRef:
    """One Kubernetes object the stack would create.

    Attributes:
        type: the Pulumi type token, e.g. ``kubernetes:core/v1:ConfigMap``.
        namespace: the namespace; None for a cluster-scoped object (PersistentVolume, Namespace).
        name: metadata.name.
    """

    type: str
    namespace: str | None
    name: str

    @property
    def kind(self) -> str:
        """The Kubernetes kind, the token's last part (``ConfigMap``)."""
        return self.type.rsplit(":", 1)[1]

    def api_path(self) -> str:
        """The object's REST path, e.g. ``/api/v1/namespaces/default/configmaps/mnist-run``
        (the core group under /api, every other group under /apis)."""
        group, version = self.type.split(":")[1].split("/")
        base = f"/api/{version}" if group == "core" else f"/apis/{group}/{version}"
        plural = PLURALS.get(self.kind, self.kind.lower() + "s")
        scope = f"/namespaces/{self.namespace}" if self.namespace is not None else ""
        return f"{base}{scope}/{plural}/{self.name}"

    def __str__(self) -> str:
        """``Kind namespace/name`` or ``Kind name``, as an error names the object."""
        where = f"{self.namespace}/{self.name}" if self.namespace is not None else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True)
class LiveObject:
    """What the cluster holds under an ObjectRef's name: its uid and labels."""

    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)


class Unreachable(Exception):
    """The API server did not answer (connection refused, timed out, no route): the message
    names the kind of failure only."""


class Refused(Exception):
    """The API server answered with an error other than 404 (401, 403, 5xx).

    Attributes:
        status: the HTTP status.
    """

    def __init__(self, status: int, reason: str) -> None:
        # The reason phrase is the server's: it reaches `pulumi up` as text (printable).
        super().__init__(f"HTTP {status} {printable(reason)}".strip())
        self.status = status


def live_object(document: Mapping[str, Any]) -> LiveObject:
    """A LiveObject from an API answer (an object or PartialObjectMetadata)."""
    metadata = document.get("metadata") or {}
    return LiveObject(uid=str(metadata.get("uid", "")), labels=dict(metadata.get("labels") or {}))


class KubeconfigCluster:
    """The cluster a kubeconfig's current context names, as the kubernetes provider uses it.

    Args:
        kubeconfig: the ``kubeconfig`` setting: a path (``~`` expanded) or the content.

    Raises:
    The kubeconfig is loaded on the first request; a kubeconfig that cannot be loaded is
    reported there as Unreachable, named by the error's class only.
    """

    def __init__(self, kubeconfig: str) -> None:
        self._kubeconfig = kubeconfig
        self._api: Any = None
        self._unreachable: Unreachable | None = None

    def _client(self) -> Any:
        """The ApiClient, made on first use: importing the kubernetes client is slow, and a
        command that needs no cluster should not pay for it."""
        if self._api is not None:
            return self._api
        import yaml
        from kubernetes import client

        from infra import kube_credentials

        configuration = client.Configuration()
        # One try per request: an API server that does not answer is reported at once, not
        # after urllib3's three retries of the connect timeout.
        configuration.retries = 0
        try:
            if is_kubeconfig_path(self._kubeconfig):
                source: str | dict = os.path.expanduser(self._kubeconfig)
            else:
                source = yaml.safe_load(self._kubeconfig)
            # The credentials stay in memory: none is left in the temp directory (kube_credentials).
            self._api = kube_credentials.load(source, configuration)
        except Exception as error:  # the loader's errors may quote the file: name the class only
            raise Unreachable(f"the kubeconfig could not be loaded ({type(error).__name__})") from None
        return self._api

    def read(self, ref: ObjectRef) -> LiveObject | None:
        """The object's uid and labels, or None when the cluster has no such object (404).

        Raises:
            Unreachable: no answer from the API server, or a kubeconfig that cannot be loaded.
            Refused: an answer other than 200 or 404.
        """
        status, reason, body = self._get(ref.api_path(), ACCEPT_METADATA)
        if status == 404:
            return None
        if status != 200:
            raise Refused(status, reason)
        return live_object(json.loads(body))

    def api_server_ports(self) -> list[int]:
        """The TCP ports of the ``kubernetes`` Service's endpoints (``endpoint_ports`` of its
        EndpointSlices), sorted; empty when it has none (its API server's endpoint reconciler is
        off, as on tools/local-cluster).

        Raises:
            Unreachable, Refused: as ``read`` (a 404 too: the discovery.k8s.io/v1 API is missing).
        """
        status, reason, body = self._get(API_SERVER_SLICES, "application/json")
        if status != 200:
            raise Refused(status, reason)
        return endpoint_ports(json.loads(body).get("items") or [])

    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The ``data`` of ConfigMap ``namespace/name``, or None when the cluster has none (404).

        Raises:
            Unreachable, Refused: as ``read`` (403: the kubeconfig may not read it).
        """
        status, reason, body = self._get(
            f"/api/v1/namespaces/{namespace}/configmaps/{name}", "application/json"
        )
        if status == 404:
            return None
        if status != 200:
            raise Refused(status, reason)
        return dict(json.loads(body).get("data") or {})

    def _get(self, path: str, accept: str) -> tuple[int, str, bytes]:
        """One GET of ``path``: (HTTP status, reason phrase, body)."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        if self._unreachable is not None:
            raise self._unreachable
        try:
            api = self._client()
            method, url, headers, _, _ = api.param_serialize(
                "GET", path, header_params={"Accept": accept}, auth_settings=["BearerToken"]
            )
            response = api.call_api(
                method, url, header_params=headers, _request_timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
            )
            body = response.read()
        except Unreachable as error:
            self._unreachable = error
            raise
        except (urllib3.exceptions.HTTPError, OSError) as error:
            cause = getattr(error, "reason", None) or error
            self._unreachable = Unreachable(f"the API server did not answer ({type(cause).__name__})")
            raise self._unreachable from None
        except ApiException as error:  # TLS failures come as status 0
            if error.status == 0:
                self._unreachable = Unreachable("the API server did not answer (TLS or connection error)")
                raise self._unreachable from None
            raise Refused(error.status, str(error.reason or "")) from None
        return response.status, str(response.reason or ""), body


def endpoint_ports(slices: Sequence[Mapping[str, Any]]) -> list[int]:
    """The TCP ports of the EndpointSlices ``slices`` (their ``ports``, protocol TCP or unset)
    that hold at least one endpoint, sorted and without repeats."""
    return sorted(
        {
            port["port"]
            for item in slices
            if item.get("endpoints")
            for port in item.get("ports") or []
            if isinstance(port.get("port"), int) and port.get("protocol", "TCP") == "TCP"
        }
    )
