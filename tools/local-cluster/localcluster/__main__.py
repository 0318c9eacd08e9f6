"""Command line: local-cluster up | down | status | images | kubeconfig."""

from __future__ import annotations

import argparse
import os
import sys

from localcluster import cluster, dirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="local-cluster",
        description=(
            "A real single-node Kubernetes cluster (etcd, kube-apiserver, kube-controller-manager, "
            "kube-scheduler, kubelet on containerd + runc + CNI bridge, CoreDNS) on this machine. Needs root."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="build what is missing, start the cluster, print the kubeconfig path last")
    sub.add_parser("down", help="stop everything by pid, remove pods, network namespaces, bridge, mounts")
    sub.add_parser(
        "status",
        help="each component's pid and health; exit 0 up, 1 partly up, 3 down "
        "(every command: 2 when the state or run directory is not the tool's own)",
    )
    sub.add_parser("images", help="build docker/ images with buildah and import them into the cluster")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print(
            "local-cluster: must run as root (it runs containerd, a kubelet and makes a bridge)",
            file=sys.stderr,
        )
        return 2
    command = {
        "up": cluster.up,
        "down": cluster.down,
        "status": cluster.status,
        "images": cluster.images,
        "kubeconfig": cluster.kubeconfig_path,
    }[args.command]
    try:
        return command()
    except dirs.DirectoryError as err:
        # A refused state or run directory: nothing was touched.
        print(f"local-cluster {args.command}: {err}", file=sys.stderr)
        return 2
    except cluster.ClusterError as err:
        print(f"local-cluster {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"local-cluster {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
