"""Renders the stack's Kubernetes objects as YAML files, one file per configuration, so that
policy checkers (checkov, kube-score: tools/checkers) can read what the stack would deploy.

    .venv/bin/python tools/render-manifests/render_manifests.py OUTDIR [CONFIG ...]

The program runs under the project's mock engine (tools/mock-engine/program_mocks.py: no cloud, no
cluster, no Pulumi CLI), once per configuration of ``CONFIGS``: the committed dev stack plus the
overrides named there, which together make every kind of object and every option the stack can
create (cloud mode and kubeconfig mode; GPU workers, no ps and two ps; a NAS, an NFS and a
hostPath volume; a ClusterIP, a NodePort and a LoadBalancer TensorBoard with source ranges; a
created namespace and pull Secret; a data source set with --secret; no NetworkPolicies; the
namespace ``default``). The last two are choices a user may make that the checkers report, as
``CHOSEN_FINDINGS`` lists; nothing else is a finding in any file. Each file ``OUTDIR/<config>.yaml`` holds that run's
objects as YAML documents in the order the program registered them; the Pulumi providers and
components are no Kubernetes objects and are left out. A Secret's values are written as
``REDACTED_VALUE`` (the configurations' credentials are made up, but a rendered file is
something people copy around). Prints each file and its object count; exit status 2 on an
unknown configuration name, 1 when the program rejects a configuration.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "mock-engine"))
sys.path.insert(0, str(REPO))

import program_mocks as me  # noqa: E402

#: base64 of "REDACTED": what every value of a rendered Secret's ``data`` becomes.
REDACTED_VALUE = "UkVEQUNURUQ="
#: kubeconfig mode: the content set as `pulumi config set --secret kubeconfig` sets it.
_EXISTING = {"kubeconfig": me.secret(me.kubeconfig_content())}
#: Configuration name -> flat keys (without ``tf-mnist:``) set over the dev stack
#: (Pulumi.dev.yaml with Pulumi.yaml's defaults: GPU workers, 2 ps, NAS, ClusterIP TensorBoard).
CONFIGS: dict[str, dict[str, str | me.SecretConfig]] = {
    "dev": {},
    # Cloud mode, no ps (a GPU chief), a created namespace, an internet LoadBalancer with source
    # ranges (and the SLB ACL), a pull Secret created from credentials, placement everywhere.
    "cloud-lb-registry": {
        "ps.number": "0",
        "namespace": "training",
        "createNamespace": "true",
        "job.waitForChief": "true",
        "tensorboard.serviceType": "LoadBalancer",
        "tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
        "registryCredentials.username": "ml-team",
        "registryCredentials.password": "not-a-secret",
        "job.priorityClassName": "training-high",
        "job.activeDeadlineSeconds": "86400",
        "worker.nodeSelector": '{"aliyun.accelerator/nvidia_name": "Tesla-P100-PCIE-16GB"}',
        "ps.tolerations": '[{"operator":"Exists"}]',
        "tensorboard.nodeSelector": '{"tf-mnist/pool": "cpu"}',
    },
    # kubeconfig mode on an existing NAS file system, CPU workers, one ps, a data source URL.
    "existing-nas": {
        **_EXISTING,
        "nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
        "worker.gpuCount": "0",
        "ps.number": "1",
        "data.source": "https://example.com/mnist/mnist.npz",
    },
    # kubeconfig mode on an NFS server, an intranet LoadBalancer, an existing pull Secret, the
    # CPU trainer and TensorBoard images by digest (pulled IfNotPresent), the GPU one by tag
    # (which `pulumi up` pins: the mock engine's FakeRegistry gives its digest).
    "existing-nfs": {
        **_EXISTING,
        "persistence.volume.type": "nfs",
        "nfs.server": "10.0.0.5",
        "nfs.path": "/exports/tf-mnist",
        "imagePullSecret": "acr-pull",
        "tensorboard.serviceType": "LoadBalancer",
        "tensorboard.addressType": "intranet",
        "tensorboard.allowedSourceRanges": '["10.0.0.0/8"]',
        "ps.image": f"registry.example.com/team/trainer@sha256:{'a' * 64}",
        "tensorboard.image": f"registry.example.com/team/tensorboard:2.21.0@sha256:{'b' * 64}",
    },
    # kubeconfig mode on a node directory (the local cluster's setup): NodePort, CPU only, no
    # ps, a created namespace, the run monitor on an explicit API server, images preloaded on
    # the node and so pulled IfNotPresent.
    "existing-hostPath": {
        **_EXISTING,
        "persistence.volume.type": "hostPath",
        "tensorboard.serviceType": "NodePort",
        "worker.gpuCount": "0",
        "ps.number": "0",
        "namespace": "training",
        "createNamespace": "true",
        "monitor.apiServer": "https://10.244.0.1:6443",
        "worker.imagePullPolicy": "IfNotPresent",
        "ps.imagePullPolicy": "IfNotPresent",
    },
    # data.source set with --secret (a presigned URL, made up): the stack keeps it in a Secret
    # that the staging Job reads, out of the Job's command.
    "secret-data-source": {
        "data.source": me.secret(
            "https://tf-mnist.oss-cn-hangzhou.aliyuncs.com/datasets/mnist.npz"
            "?OSSAccessKeyId=LTAI5tExample&Expires=1767225600&Signature=bWFkZS11cA%3D"
        ),
    },
    # The user's choices that the checkers report (CHOSEN_FINDINGS): no NetworkPolicies, and
    # the namespace every cluster has.
    "no-network-policy": {"networkPolicy.enabled": "false"},
    "namespace-default": {"namespace": "default"},
}
#: What the checkers report in a configuration because of the user's choice, not of the stack:
#: configuration -> {(checker, check id): reason}. tests/tools/test_checkers.py allows exactly
#: these findings there, and fails when one of them is no longer found. Not suppressed: a
#: platform team running the checkers on such a stack should see them.
CHOSEN_FINDINGS: dict[str, dict[tuple[str, str], str]] = {
    "no-network-policy": {
        ("kube-score", "pod-networkpolicy"): "networkPolicy.enabled false removes the run's "
        "NetworkPolicies (for a cluster whose network plugin enforces none, such as Flannel)",
    },
    "namespace-default": {
        ("checkov", "CKV_K8S_21"): "namespace default keeps a stack deployed there before; the stack's "
        "own namespace tf-mnist is the default",
    },
}
#: The configurations whose overrides hold a secret (set with ``--secret``).
SECRET_KEYS = {"cloud-lb-registry": ("tf-mnist:registryCredentials.password",)}


def dev_config() -> dict[str, str]:
    """Pulumi.dev.yaml with Pulumi.yaml's defaults, in the form the CLI hands the program."""
    return me.engine_form(me.with_cli_defaults(me.stack_config("dev")))


def render(name: str) -> list[dict[str, Any]]:
    """The Kubernetes objects (plain manifests: apiVersion, kind, metadata, ...) that the
    configuration ``name`` of ``CONFIGS`` creates, Secrets' values redacted.

    Raises:
        KeyError: ``name`` is not in CONFIGS.
        ValueError: the program rejected the configuration (its error is the message).
    """
    overrides = CONFIGS[name]
    config = dev_config()
    for key, value in overrides.items():
        config = me.set_flat(config, key, value)
    run = me.run_program(config, secret_keys=SECRET_KEYS.get(name, ()))
    if run.error is not None:
        raise ValueError(f"configuration {name}: {run.error}")
    manifests = []
    for registration in run.registrations:
        if not (registration.custom and registration.type.startswith("kubernetes:")):
            continue
        manifest = me.to_manifest(registration.inputs)
        if manifest.get("kind") == "Secret":
            for field in ("data", "stringData"):
                if field in manifest:
                    manifest[field] = {key: REDACTED_VALUE for key in manifest[field]}
        manifests.append(manifest)
    return manifests


def write(outdir: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Writes ``outdir/<name>.yaml`` for each configuration of ``names`` (default: all of
    CONFIGS); returns name -> file. Raises what ``render`` raises."""
    outdir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in names or list(CONFIGS):
        path = outdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(render(name), sort_keys=False), encoding="utf-8")
        files[name] = path
    return files


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("configs", nargs="*", help=f"configurations (default all): {', '.join(CONFIGS)}")
    args = parser.parse_args(argv)
    unknown = [n for n in args.configs if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    try:
        files = write(args.outdir, args.configs or None)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    for name, path in files.items():
        count = sum(1 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc)
        print(f"{path}: {count} objects ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
