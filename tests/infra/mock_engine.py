"""The infra tests' harness: the mock engine's program run (tools/mock-engine/program_mocks.py,
which tools/render-manifests and benchmarks/infra_benchmark.py use too), re-exported under one
name, and the helpers only tests need: a deployed cloud layer's state, annotations without the
checkers' suppressions, flat keys, and ``Checks``.

``Checks`` counts assertions that run inside ``apply`` callbacks, so an assertion that never
ran (an unknown output under preview) fails the test instead of passing vacuously.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "mock-engine"))

import program_mocks as harness  # noqa: E402, F401  (the module: tests patch its constants there)
from program_mocks import (  # noqa: E402, F401  (re-exported: the tests' one name for the harness)
    CLUSTER_ID,
    CLUSTER_SERVER,
    CREDENTIAL_TOKEN,
    INSTANCE_PRICE,
    INSTANCE_TYPES_TOKEN,
    KUBECONFIG,
    LOAD_BALANCER_IP,
    MOUNT_TARGET_DOMAIN,
    NAS_ZONES,
    NAS_ZONES_TOKEN,
    PROJECT,
    REPO,
    STATE_TOKEN,
    FakeCluster,
    FakeRegistry,
    Registration,
    Run,
    SecretConfig,
    _Mocks,
    _Monitor,
    engine_form,
    fake_digest,
    is_secret_value,
    kubeconfig_content,
    mock_uid,
    pinned,
    project_defaults,
    run_program,
    secret,
    set_flat,
    stack_config,
    to_manifest,
    with_cli_defaults,
)

CLUSTER_TYPE = "alicloud:cs/managedKubernetes:ManagedKubernetes"
FILE_SYSTEM_TYPE = "alicloud:nas/fileSystem:FileSystem"


def deployed_cloud(plugin: str = "flannel", storage_type: str = "Performance", stack: str = "dev") -> dict:
    """A state (``Run.state``) holding the ACK cluster and NAS file system of the cloud layer as a
    stack deployed them: Flannel on its pod CIDR or Terway on a pod vSwitch, and a file system of
    ``storage_type`` in the zone NAS picked for it (outputs as the provider records them)."""
    prefix = f"urn:pulumi:{stack}::tf-mnist::pulumi:pulumi:Stack"
    network = (
        {"podCidr": "172.20.0.0/16", "addons": [{"name": "flannel"}]}
        if plugin == "flannel"
        else {"podVswitchIds": ["vsw-pods0123456789"], "addons": [{"name": "terway-eniip"}]}
    )
    return {
        f"{prefix}$tf-mnist:index:Cluster${CLUSTER_TYPE}::tf-mnist-{stack}-ack": {
            "type": CLUSTER_TYPE,
            "outputs": {"id": "c-deployed", "serviceCidr": "172.21.0.0/20", **network},
        },
        f"{prefix}$tf-mnist:index:NasStorage${FILE_SYSTEM_TYPE}::tf-mnist-{stack}-fs": {
            "type": FILE_SYSTEM_TYPE,
            "outputs": {"id": "0a1b2c3d4e", "storageType": storage_type, "zoneId": "cn-hangzhou-g"},
        },
    }


def own_annotations(metadata: dict) -> dict:
    """An object's annotations without the policy checkers' suppressions (``checkov.io/skip*``,
    ``kube-score/ignore``: infra/components/checker_suppressions.py, tested on their own)."""
    return {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if not k.startswith("checkov.io/skip") and k != "kube-score/ignore"
    }


#: What infra/components/pods.resources adds to every container's requests and limits.
EPHEMERAL_REQUEST = {"ephemeral-storage": "64Mi"}
EPHEMERAL_LIMIT = {"ephemeral-storage": "512Mi"}


def flatten(config: dict[str, Any]) -> dict[str, Any]:
    """Structured project keys to flat dotted keys (what `pulumi config set a.b v` stores).

    Label maps stay objects below ``matchLabels``: a flat key holds one value.
    """
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and not prefix.endswith("matchLabels"):
            for k, v in value.items():
                walk(f"{prefix}.{k}", v)
        else:
            out[prefix] = value

    for key, value in config.items():
        if key.startswith(f"{PROJECT}:") and isinstance(value, dict):
            walk(key, value)
        else:
            out[key] = value
    return out


# --- assertions that must run ---------------------------------------------------------------


class Checks:
    """Counts assertions made inside Output callbacks; ``verify()`` fails on any that never ran.

    Usage: ``checks.on(output, "label", lambda value: ...)`` then, after the program finished,
    ``checks.verify()``.
    """

    def __init__(self) -> None:
        self.expected: list[str] = []
        self.ran: list[str] = []

    def on(self, output: pulumi.Output, label: str, check: Callable[[Any], None]) -> pulumi.Output:
        self.expected.append(label)

        def run_check(value: Any) -> None:
            check(value)
            self.ran.append(label)

        return output.apply(run_check)

    def verify(self) -> None:
        missing = [label for label in self.expected if label not in self.ran]
        assert not missing, f"assertions that never ran (unknown outputs?): {missing}"
        assert self.expected, "no assertion was registered"
