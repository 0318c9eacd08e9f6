"""The cluster's components: the command line of each and its health check (the config files
they read are in config_files.py).

Start order (each waits for the one before to be healthy): etcd, kube-apiserver, the API
server's relay onto the bridge, kube-controller-manager, kube-scheduler, containerd, CoreDNS, the
NetworkPolicy agent (before the kubelet: no pod runs unguarded), kubelet. Flags that this
machine needs are explained where they are set (see also tools/local-cluster/README.md).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import layout
from localcluster.layout import Paths

APISERVER_URL = f"https://127.0.0.1:{layout.port('kube-apiserver', 'secure')}"


@dataclass(frozen=True)
class Component:
    """A daemon: its name, how to start it, and how to tell it is serving."""

    name: str
    argv: list[str]
    healthy: Callable[[], bool]
    #: seconds `up` waits for ``healthy``
    start_timeout: float = 60.0


def http_ok(
    url: str,
    *,
    client: tuple[Path, Path] | None = None,
    ca: Path | None = None,
    expect: str | None = None,
    timeout: float = 2.0,
) -> bool:
    """True when GET ``url`` answers 200 (and its body contains ``expect``, if given); False
    also when the CA or client files cannot be read (the cluster's pki is gone)."""
    ctx = None
    try:
        if url.startswith("https"):
            ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
            if client:
                ctx.load_cert_chain(str(client[0]), str(client[1]))
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            body = resp.read().decode(errors="replace")
            return resp.status == 200 and (expect is None or expect in body)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _admin_client(p: Paths) -> tuple[Path, Path]:
    return p.pki / "admin.crt", p.pki / "admin.key"


def apiserver_ready(p: Paths) -> bool:
    return http_ok(f"{APISERVER_URL}/readyz", client=_admin_client(p), ca=p.pki / "ca.crt", expect="ok")


ETCD_URL = f"https://127.0.0.1:{layout.port('etcd', 'client')}"


def etcd_healthy(p: Paths) -> bool:
    """etcd answers /health with its own CA and the tool's health-check client certificate."""
    return http_ok(
        f"{ETCD_URL}/health",
        client=(p.pki / "etcd-healthcheck-client.crt", p.pki / "etcd-healthcheck-client.key"),
        ca=p.pki / "etcd-ca.crt",
        expect='"health":"true"',
    )


def etcd(p: Paths, bin_dir: Path) -> Component:
    """etcd on loopback, TLS on both ports, and only clients with a certificate from its own CA
    (pki.py): the API server and the health check. Any local user could otherwise read and
    write every object, Secrets included, on 127.0.0.1."""
    peer = f"https://127.0.0.1:{layout.port('etcd', 'peer')}"
    k = p.pki
    return Component(
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name",
            "default",
            "--data-dir",
            str(p.etcd_data),
            "--listen-client-urls",
            ETCD_URL,
            "--advertise-client-urls",
            ETCD_URL,
            "--cert-file",
            str(k / "etcd-server.crt"),
            "--key-file",
            str(k / "etcd-server.key"),
            "--client-cert-auth",
            "--trusted-ca-file",
            str(k / "etcd-ca.crt"),
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--peer-cert-file",
            str(k / "etcd-peer.crt"),
            "--peer-key-file",
            str(k / "etcd-peer.key"),
            "--peer-client-cert-auth",
            "--peer-trusted-ca-file",
            str(k / "etcd-ca.crt"),
            "--initial-cluster",
            f"default={peer}",
            "--log-level",
            "warn",
        ],
        lambda: etcd_healthy(p),
        30,
    )


def kube_apiserver(p: Paths, bin_dir: Path) -> Component:
    k = p.pki
    return Component(
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={ETCD_URL}",
            f"--etcd-cafile={k / 'etcd-ca.crt'}",
            f"--etcd-certfile={k / 'apiserver-etcd-client.crt'}",
            f"--etcd-keyfile={k / 'apiserver-etcd-client.key'}",
            # Every client (components, kubelet, CoreDNS, the tool's /readyz check) presents a
            # certificate or a service-account token: an anonymous request is answered 401.
            "--anonymous-auth=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={layout.port('kube-apiserver', 'secure')}",
            # A loopback advertise address needs the endpoint reconciler off: with it on, every
            # sync logs "may not be in the loopback range". Pods reach the API through the relay
            # (apiserver_relay), not the kubernetes Service.
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            f"--service-cluster-ip-range={layout.SERVICE_SUBNET}",
            f"--client-ca-file={k / 'ca.crt'}",
            f"--tls-cert-file={k / 'apiserver.crt'}",
            f"--tls-private-key-file={k / 'apiserver.key'}",
            f"--kubelet-client-certificate={k / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={k / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc." + layout.CLUSTER_DOMAIN,
            f"--service-account-key-file={k / 'sa.pub'}",
            f"--service-account-signing-key-file={k / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--profiling=false",
            # Without the request-header flags the controller-manager and scheduler log
            # "missing content for CA bundle" on every start.
            f"--requestheader-client-ca-file={k / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={k / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={k / 'front-proxy-client.key'}",
        ],
        lambda: apiserver_ready(p),
        90,
    )


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a TCP connection to host:port opens."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def apiserver_relay(p: Paths, bin_dir: Path) -> Component:
    """socat forwarding the bridge address's port 6443 to the API server on loopback, so that a
    pod (the stack's run monitor) can call the API at layout.POD_APISERVER_URL. TLS passes
    through untouched, and the API server still refuses any request without a certificate or
    token (--anonymous-auth=false); the bridge is reachable only from this machine and its pods."""
    port = layout.port("apiserver-relay", "pods")
    return Component(
        "apiserver-relay",
        [
            "socat",
            f"TCP-LISTEN:{port},bind={layout.BRIDGE_IP},reuseaddr,fork",
            f"TCP:127.0.0.1:{layout.port('kube-apiserver', 'secure')}",
        ],
        lambda: port_open(layout.BRIDGE_IP, port),
        10,
    )


def kubeconfig_path(p: Paths, client: str) -> Path:
    """Where `up` writes the kubeconfig of ``client`` (a name in pki.CLIENTS)."""
    return p.etc / f"{client}.kubeconfig"


def _secure_component(p: Paths, bin_dir: Path, name: str, *flags: str) -> Component:
    """kube-controller-manager or kube-scheduler: its own kubeconfig for the API, delegated
    authentication and authorization, HTTPS on its loopback port, healthy when /healthz is ok."""
    kc = kubeconfig_path(p, name)
    port = layout.port(name, "secure")
    return Component(
        name,
        [
            str(bin_dir / name),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--leader-elect=false",
            *flags,
        ],
        lambda: http_ok(f"https://127.0.0.1:{port}/healthz", expect="ok"),
        60,
    )


def kube_controller_manager(p: Paths, bin_dir: Path) -> Component:
    return _secure_component(
        p,
        bin_dir,
        "kube-controller-manager",
        "--controllers=*",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={p.pki / 'sa.key'}",
        f"--root-ca-file={p.pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={p.pki / 'ca.crt'}",
        f"--cluster-signing-key-file={p.pki / 'ca.key'}",
        f"--service-cluster-ip-range={layout.SERVICE_SUBNET}",
        # A PV and a PVC created together can otherwise wait a 15 s resync to bind.
        "--pvclaimbinder-sync-period=1s",
    )


def kube_scheduler(p: Paths, bin_dir: Path) -> Component:
    return _secure_component(p, bin_dir, "kube-scheduler")


def containerd(p: Paths, bin_dir: Path) -> Component:
    config = p.etc / "containerd.toml"
    sock = str(p.containerd_socket)
    return Component(
        "containerd",
        ["containerd", "--config", str(config)],
        lambda: (
            subprocess.run(["ctr", "--address", sock, "version"], capture_output=True, timeout=10).returncode
            == 0
        ),
        30,
    )


def coredns(p: Paths, bin_dir: Path) -> Component:
    return Component(
        "coredns",
        [str(bin_dir / "coredns"), "-conf", str(p.etc / "Corefile")],
        lambda: http_ok(f"http://127.0.0.1:{layout.port('coredns', 'ready')}/ready"),
        60,
    )


def network_policies(p: Paths, bin_dir: Path) -> Component:
    """The NetworkPolicy agent (tools/go-build/kubernetes-programs/cmd/network-policies): the
    policy controller of sigs.k8s.io/kube-network-policies deciding each new connection between
    pods on the bridge, fed through an NFQUEUE (this kernel has the x_tables NFQUEUE target but
    not nft's queue expression). Healthy once its rule is in and the queue has its reader."""
    health = layout.port("network-policies", "health")
    return Component(
        "network-policies",
        [
            str(bin_dir / "network-policies"),
            f"-kubeconfig={kubeconfig_path(p, 'network-policies')}",
            f"-node-name={layout.NODE_NAME}",
            f"-bridge={layout.BRIDGE}",
            f"-nfqueue-id={layout.NFQUEUE_ID}",
            f"-health-address=127.0.0.1:{health}",
        ],
        lambda: http_ok(f"http://127.0.0.1:{health}/healthz", expect="ok"),
        60,
    )


def kubelet(p: Paths, bin_dir: Path) -> Component:
    labels = ",".join(f"{k}={v}" for k, v in layout.NODE_LABELS.items())
    return Component(
        "kubelet",
        [
            str(bin_dir / "kubelet"),
            f"--config={p.etc / 'kubelet.json'}",
            f"--kubeconfig={kubeconfig_path(p, 'kubelet')}",
            f"--hostname-override={layout.NODE_NAME}",
            f"--node-ip={layout.BRIDGE_IP}",
            f"--node-labels={labels}",
            f"--root-dir={p.kubelet_root}",
            f"--cert-dir={p.kubelet_root / 'pki'}",
        ],
        lambda: http_ok(f"http://127.0.0.1:{layout.port('kubelet', 'healthz')}/healthz", expect="ok"),
        60,
    )


#: In start order.
ALL = (
    etcd,
    kube_apiserver,
    apiserver_relay,
    kube_controller_manager,
    kube_scheduler,
    containerd,
    coredns,
    network_policies,
    kubelet,
)
NAMES = tuple(f.__name__.replace("_", "-") for f in ALL)
