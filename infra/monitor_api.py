"""The run monitor's side of the Kubernetes API (infra/run_monitor.py): the few calls it makes,
over HTTPS with the pod's service-account token, where the API server is (``api_server``), and
what the monitor says when it never reached it (``unreachable``).

Standard library only, delivered beside the script in the monitor's ConfigMap
(infra/components/monitor.py), as infra/pod_progress.py is.
"""

from __future__ import annotations

import json
import re
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Protocol

#: Control characters, written as their escapes in what the monitor logs and annotates (pod
#: and registry messages are server text): trainer/contract/printable.py's rule, repeated
#: because this script runs alone in the monitor's pod, on the standard library only.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every CONTROL character written as its escape (``\\x1b``)."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


#: The annotation that says why the monitor ended a Job (infra.status shows it).
ENDED_BECAUSE = "tf-mnist.io/ended-because"
#: The field manager of the monitor's patches (kubectl shows it in managedFields).
FIELD_MANAGER = "tf-mnist-monitor"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(RuntimeError):
    """The API server refused a request or could not be reached; ``reached``: it answered
    (an HTTP error, an answer that is no JSON), not a connection that failed or timed out."""

    def __init__(self, message: str, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


class Calls(Protocol):
    """The API calls the monitor's loop makes (``Api``; the tests record them)."""

    def items(self, path: str, selector: str) -> list[dict]: ...

    def pod_events(self, namespace: str) -> list[dict]: ...

    def set_deadline(self, namespace: str, name: str, seconds: int) -> None: ...

    def end_job(self, namespace: str, name: str, reason: str) -> None: ...

    def pod_log(self, namespace: str, name: str, tail_lines: int, container: str | None = None) -> str: ...

    def annotate_job(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None: ...


class Api:
    """The few Kubernetes API calls the monitor makes, over HTTPS with a bearer token."""

    def __init__(self, server: str, token_file: str, ca_file: str, timeout_s: float = 20.0) -> None:
        self.server, self.token_file, self.timeout_s = server.rstrip("/"), token_file, timeout_s
        self.context = ssl.create_default_context(cafile=ca_file)

    def _request(
        self, method: str, path: str, body: dict | None = None, accept: str = "application/json"
    ) -> bytes:
        """The answer's body; ApiError for an HTTP error or a connection that failed."""
        with open(self.token_file, encoding="utf-8") as file:  # re-read: the kubelet rotates it
            token = file.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": accept}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/merge-patch+json"
        request = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return response.read()
        except urllib.error.HTTPError as err:
            raise ApiError(
                f"{method} {path}: HTTP {err.code}: {err.read()[:300].decode(errors='replace')}"
            ) from None
        except (OSError, ValueError) as err:
            raise ApiError(
                f"{method} {self.server}{path}: {err}", reached=not isinstance(err, OSError)
            ) from None

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        answer = self._request(method, path, body)
        try:
            return json.loads(answer)
        except ValueError as err:
            raise ApiError(f"{method} {self.server}{path}: {err}") from None

    def items(self, path: str, selector: str) -> list[dict]:
        """The ``items`` of a list call with a label selector."""
        return self._call("GET", f"{path}?{urllib.parse.urlencode({'labelSelector': selector})}")["items"]

    def pod_events(self, namespace: str) -> list[dict]:
        """The namespace's Events about pods (Events carry no labels of their object)."""
        query = urllib.parse.urlencode({"fieldSelector": "involvedObject.kind=Pod"})
        return self._call("GET", f"/api/v1/namespaces/{namespace}/events?{query}")["items"]

    def set_deadline(self, namespace: str, name: str, seconds: int) -> None:
        """Set the Job's ``spec.activeDeadlineSeconds``."""
        query = urllib.parse.urlencode({"fieldManager": FIELD_MANAGER})
        self._call(
            "PATCH",
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}?{query}",
            {"spec": {"activeDeadlineSeconds": seconds}},
        )

    def pod_log(self, namespace: str, name: str, tail_lines: int, container: str | None = None) -> str:
        """The last ``tail_lines`` lines of the pod's container's log (text, the newest last)."""
        query = {"tailLines": str(tail_lines), **({"container": container} if container else {})}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log?{urllib.parse.urlencode(query)}"
        return self._request("GET", path, accept="text/plain, */*").decode("utf-8", errors="replace")

    def annotate_job(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        """Set the Job's ``annotations`` (others are left as they are)."""
        query = urllib.parse.urlencode({"fieldManager": FIELD_MANAGER})
        self._call(
            "PATCH",
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}?{query}",
            {"metadata": {"annotations": {k: printable(v) for k, v in annotations.items()}}},
        )

    def end_job(self, namespace: str, name: str, reason: str) -> None:
        """Annotate the Job with ``reason`` and give it a deadline already past."""
        query = urllib.parse.urlencode({"fieldManager": FIELD_MANAGER})
        self._call(
            "PATCH",
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}?{query}",
            {
                "metadata": {"annotations": {ENDED_BECAUSE: printable(reason)}},
                "spec": {"activeDeadlineSeconds": 1},
            },
        )


def api_server(env: Mapping[str, str]) -> str:
    """MONITOR_API_SERVER, else the in-cluster address (as client-go's InClusterConfig)."""
    if env.get("MONITOR_API_SERVER"):
        return env["MONITOR_API_SERVER"]
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return "https://kubernetes.default.svc"
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def unreachable(server: str, prefix: str, egress: str, tries: int, seconds: float, err: ApiError) -> str:
    """Why a monitor that never reached the API server at ``server`` gives up, and the fix.

    Args:
        prefix: the run's name prefix (its NetworkPolicy is ``<prefix>-monitor``).
        egress: MONITOR_EGRESS_PORTS, the ports that policy opens ("6443", "443,6443"); empty:
            the stack made no policy.
        tries: the polls that failed; seconds: since the first began.
    """
    port = urllib.parse.urlsplit(server).port or 443
    policy = (
        f"NetworkPolicy {prefix}-monitor opens TCP {egress.replace(',', ' and ')} to it, which must be the port "
        "the address reaches after the Service's translation (the kubernetes Service's endpoints'): set "
        "monitor.apiServerPort to that port, or monitor.apiServer to an address pods can reach"
        if egress
        else "No NetworkPolicy of the stack limits it (networkPolicy.enabled false): check monitor.apiServer, "
        "and the cluster's own policies"
    )
    return (
        f"run monitor: cannot reach the API server at {server} (TCP port {port}): {tries} tries in "
        f"{seconds:.0f} s, the last: {err}. The run is NOT watched. {policy}; `pulumi up` then starts a "
        "new monitor."
    )


#: The file the kubelet takes a container's termination message from (the pod's default
#: terminationMessagePath). Written, the message is exactly the monitor's last word; with
#: FallbackToLogsOnError, an empty one would make it the log's tail, where a stderr line and the
#: stdout line before it may come in either order (the two streams are merged by time).
TERMINATION_LOG = "/dev/termination-log"


def give_up(message: str, termination_log: str = TERMINATION_LOG) -> None:
    """Print the monitor's last word on stderr and, where the kubelet provides the file, make
    it the container's termination message (what `kubectl get pod` and infra.status show)."""
    print(printable(message), file=sys.stderr, flush=True)
    try:
        with open(termination_log, "w", encoding="utf-8") as file:
            file.write(printable(message) + "\n")
    except OSError:
        pass  # outside a pod, or a read-only path: stderr has it
