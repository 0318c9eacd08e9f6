"""Certificates, keys and kubeconfigs of the local cluster, made with the openssl command.

Layout follows kubeadm's: one cluster CA signs the API server's serving certificate and every
client certificate (components, kubelet, admin); a separate front-proxy CA backs the
--requestheader-* flags; a separate etcd CA signs etcd's serving and peer certificates and the
only two clients etcd accepts (the API server and the tool's health check), so no cluster
client certificate opens etcd; an RSA key pair signs service-account tokens. Client
identities use the names Kubernetes' bootstrap RBAC roles are bound to
(system:kube-controller-manager, system:kube-scheduler, system:node:<node> in group
system:nodes, admin in system:masters).

Every file is written 0600 into a 0700 directory (openssl runs under umask 077), certificates
included: nothing here is meant for anyone but root.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from localcluster import dirs, layout

VALID_DAYS = 30


class PkiError(RuntimeError):
    """openssl failed; the message names the certificate and openssl's own words."""


def _openssl(*args: str, what: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, umask=0o077)
    if proc.returncode != 0:
        raise PkiError(f"openssl could not make {what}: {proc.stderr.strip()[-400:]}")


def _key(path: Path) -> None:
    _openssl(
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        str(path),
        what=str(path),
    )
    path.chmod(0o600)


def _ca(dir_: Path, name: str, cn: str) -> None:
    _key(dir_ / f"{name}.key")
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(dir_ / f"{name}.key"),
        "-subj",
        f"/CN={cn}",
        "-days",
        str(VALID_DAYS),
        "-out",
        str(dir_ / f"{name}.crt"),
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        what=f"the {cn} CA",
    )


def _cert(
    dir_: Path, name: str, ca: str, subject: str, *, sans: tuple[str, ...] = (), usages: tuple[str, ...] = ()
) -> None:
    """``name``.{crt,key} signed by ``ca``: a serving certificate when ``sans`` are given, else
    a client one (``usages`` overrides the extended key usage, e.g. etcd's peers are both)."""
    key, csr, crt = dir_ / f"{name}.key", dir_ / f"{name}.csr", dir_ / f"{name}.crt"
    ext = dir_ / f"{name}.ext"
    usage = ",".join(usages or (("serverAuth",) if sans else ("clientAuth",)))
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    dirs.write_private(ext, "\n".join(lines) + "\n")
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr), what=f"{name}.csr")
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(dir_ / f"{ca}.crt"),
        "-CAkey",
        str(dir_ / f"{ca}.key"),
        "-CAcreateserial",
        "-days",
        str(VALID_DAYS),
        "-extfile",
        str(ext),
        "-out",
        str(crt),
        what=f"{name}.crt",
    )
    csr.unlink()
    ext.unlink()


#: client certificate name -> (subject, kubeconfig user) for every component that talks to
#: the API server.
CLIENTS = {
    "admin": "/O=system:masters/CN=kubernetes-admin",
    "kube-controller-manager": "/CN=system:kube-controller-manager",
    "kube-scheduler": "/CN=system:kube-scheduler",
    "kubelet": f"/O=system:nodes/CN=system:node:{layout.NODE_NAME}",
    # Bound to the ClusterRole that config_files.COREDNS_RBAC creates.
    "coredns": "/CN=tf-mnist:coredns",
    # Bound to the ClusterRole that config_files.NETWORK_POLICIES_RBAC creates.
    "network-policies": "/CN=tf-mnist:network-policies",
}


def make_pki(dir_: Path) -> None:
    """Writes every key and certificate into ``dir_`` (created, mode 0700).

    Files: ca.{crt,key}, front-proxy-ca.{crt,key}, apiserver.{crt,key} (serving: loopback, the
    bridge address, the kubernetes Service IP and names), apiserver-kubelet-client.{crt,key},
    front-proxy-client.{crt,key}, sa.{key,pub}, <client>.{crt,key} for each of CLIENTS, and
    etcd's: etcd-ca.{crt,key}, etcd-server and etcd-peer (serving on 127.0.0.1 and localhost;
    the peer one also a client), apiserver-etcd-client and etcd-healthcheck-client.
    Raises PkiError naming the file openssl could not make.
    """
    dirs.private_dir(dir_)
    _ca(dir_, "ca", "tf-mnist-local-cluster-ca")
    _ca(dir_, "front-proxy-ca", "tf-mnist-local-cluster-front-proxy-ca")
    d = layout.CLUSTER_DOMAIN
    sans = (
        "IP:127.0.0.1",
        f"IP:{layout.BRIDGE_IP}",
        f"IP:{layout.KUBERNETES_SERVICE_IP}",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        f"DNS:kubernetes.default.svc.{d}",
    )
    _cert(dir_, "apiserver", "ca", "/CN=kube-apiserver", sans=sans)
    _cert(dir_, "apiserver-kubelet-client", "ca", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    _cert(dir_, "front-proxy-client", "front-proxy-ca", "/CN=front-proxy-client")
    for name, subject in CLIENTS.items():
        _cert(dir_, name, "ca", subject)
    _ca(dir_, "etcd-ca", "tf-mnist-local-cluster-etcd-ca")
    etcd_sans = ("IP:127.0.0.1", "DNS:localhost")
    _cert(dir_, "etcd-server", "etcd-ca", "/CN=tf-mnist-etcd", sans=etcd_sans)
    _cert(
        dir_,
        "etcd-peer",
        "etcd-ca",
        "/CN=tf-mnist-etcd-peer",
        sans=etcd_sans,
        usages=("serverAuth", "clientAuth"),
    )
    _cert(dir_, "apiserver-etcd-client", "etcd-ca", "/CN=kube-apiserver-etcd-client")
    _cert(dir_, "etcd-healthcheck-client", "etcd-ca", "/CN=tf-mnist-etcd-healthcheck-client")
    _openssl(
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        str(dir_ / "sa.key"),
        what="the service-account signing key",
    )
    _openssl(
        "pkey",
        "-in",
        str(dir_ / "sa.key"),
        "-pubout",
        "-out",
        str(dir_ / "sa.pub"),
        what="the service-account public key",
    )


def kubeconfig(pki_dir: Path, client: str, server: str) -> str:
    """A kubeconfig (YAML text) for ``client``'s certificate against ``server`` (https URL),
    with the CA and the client's certificate and key embedded."""

    def b64(name: str) -> str:
        return base64.b64encode((pki_dir / name).read_bytes()).decode()

    return (
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- name: tf-mnist-local\n  cluster:\n"
        f"    server: {server}\n    certificate-authority-data: {b64('ca.crt')}\n"
        f"users:\n- name: {client}\n  user:\n"
        f"    client-certificate-data: {b64(client + '.crt')}\n    client-key-data: {b64(client + '.key')}\n"
        f"contexts:\n- name: tf-mnist-local\n  context:\n    cluster: tf-mnist-local\n    user: {client}\n"
        "current-context: tf-mnist-local\n"
    )


def write_kubeconfig(path: Path, pki_dir: Path, client: str, server: str) -> None:
    """Writes ``client``'s kubeconfig (it embeds the client key) to ``path``, mode 0600."""
    dirs.write_private(path, kubeconfig(pki_dir, client, server))
