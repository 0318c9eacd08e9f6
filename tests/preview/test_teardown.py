"""Tearing a stack down after its stored Kubernetes credential has expired, through the real CLI
and pulumi-resource-kubernetes against a stand-in API server on loopback (fake_apiserver.py).

The kubernetes provider of a cloud stack is configured with a temporary ACK credential
(``cluster.credentialMinutes``, 240 by default) that the program reads at every run. A plain
``pulumi destroy`` does not run the program: it configures the provider from the state, with
the credential of the last ``up``; once that has expired, every Kubernetes object answers 401
and the destroy stops before the node pools, the cluster and the NAS mount target behind them.
``pulumi destroy --run-program`` runs the program first, which reads a fresh credential and
updates the provider with it, then deletes everything with it.

Offline there is no ACK to issue a credential, so the stack here is in kubeconfig mode and the
"fresh credential" is the ``kubeconfig`` setting, which the program hands the provider exactly
as the cloud layer hands it ACK's (infra/components/cluster.py); the state holds the expired
one. The stack's objects are written into the state and into the stand-in server as if an
``up`` had made them; the server lets in only the fresh token.

The command under test is the README's own teardown (block ``cloud-stack-down``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import readme_blocks as rb

from .dev_stack import configure
from .engine import PulumiProject, Toolchain, alicloud_offline_config
from .fake_apiserver import FakeApiServer, object_path
from .test_live_cloud_stack import CREDENTIAL_CALL, UNKNOWN
from .test_live_cloud_stack import _make_live as make_live

pytestmark = pytest.mark.engine

EXPIRED, FRESH = "expired-ack-credential", "fresh-ack-credential"
PROVIDER_TYPE = "pulumi:providers:kubernetes"
DOMAIN = "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com"


def kubeconfig(api: FakeApiServer, token: str) -> str:
    return (
        f'apiVersion: v1\nkind: Config\nclusters:\n- name: ack\n  cluster: {{server: "{api.url}", '
        f"certificate-authority-data: {api.ca_data}}}\n"
        "contexts:\n- name: ack\n  context: {cluster: ack, user: ack}\ncurrent-context: ack\n"
        f"users:\n- name: ack\n  user: {{token: {token}}}\n"
    )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeApiServer]:
    tls = tmp_path / "tls"
    tls.mkdir()
    server = FakeApiServer(good_token=FRESH).start(tls)
    try:
        yield server
    finally:
        server.stop()


def _known(value: Any) -> Any:
    """A planned input with every unknown (a uid the API server would have given) filled in."""
    if value == UNKNOWN:
        return "known-after-up"
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known(v) for v in value]
    return value


def _deploy(project: PulumiProject, api: FakeApiServer) -> list[str]:
    """Write the stack, as an ``up`` with the now expired credential would have left it, into
    the state and into ``api``; returns the objects' REST paths."""
    project.set_config("tf-mnist:kubeconfig", kubeconfig(api, EXPIRED), secret=True)
    project.set_config("tf-mnist:nas.mountTargetDomain", DOMAIN)
    planned = project.preview()
    assert planned.returncode == 0, planned.messages()
    exported = json.loads(project.pulumi("stack", "export").stdout)
    provider_id = str(uuid.uuid4())
    entries, paths = [], []
    for state in (step["newState"] for step in planned.steps if step.get("newState")):
        entry = {"urn": state["urn"], "custom": bool(state.get("custom")), "type": state["type"]}
        entry.update({k: state[k] for k in ("parent", "dependencies") if state.get(k)})
        inputs = _known(state.get("inputs", {}))
        if state["type"] == PROVIDER_TYPE:
            # The preview shows both as [secret]: the values an up would have stored.
            inputs = {**inputs, "kubeconfig": kubeconfig(api, EXPIRED), "clusterIdentifier": api.url}
            entry.update(id=provider_id, inputs=inputs, outputs=inputs)
        elif entry["custom"]:
            inputs = _pinned_as_up_leaves_them(inputs)
            metadata = {**inputs["metadata"], "uid": str(uuid.uuid4()), "resourceVersion": "1"}
            live = {**inputs, "metadata": metadata}
            namespace = metadata.get("namespace")
            entry.update(
                id=f"{namespace}/{metadata['name']}" if namespace else metadata["name"],
                inputs=inputs,
                outputs={**live, "__inputs": inputs},
                provider=f"{state['provider'].rsplit('::', 1)[0]}::{provider_id}",
            )
            path = object_path(live["apiVersion"], live["kind"], namespace, metadata["name"])
            api.objects[path] = live
            paths.append(path)
        else:
            entry["inputs"] = inputs
        entries.append(entry)
    assert sum(e["type"] == PROVIDER_TYPE for e in entries) == 1
    exported["deployment"]["resources"] = entries
    state_file = project.dir / "deployed-state.json"
    state_file.write_text(json.dumps(exported))
    project.pulumi("stack", "import", "--file", str(state_file), "--force")
    return paths


def _pinned_as_up_leaves_them(inputs: dict[str, Any]) -> dict[str, Any]:
    """A workload's inputs as `pulumi up` stores them: each container's image by tag given the
    digest the registry answered then (infra/image_pins.py), pulled IfNotPresent; the preview
    they come from shows the tags, as it asks no registry."""
    spec = inputs.get("spec", {}).get("template", {}).get("spec", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        image = container.get("image")
        if isinstance(image, str) and "@" not in image:
            container["image"] = f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"
            container["imagePullPolicy"] = "IfNotPresent"
    return inputs


def _kubernetes_objects_in_state(project: PulumiProject) -> int:
    resources = json.loads(project.pulumi("stack", "export").stdout)["deployment"].get("resources") or []
    return sum(1 for r in resources if r["type"].startswith("kubernetes:"))


def test_the_readmes_teardown_deletes_everything_after_the_credential_expired(
    dev_project: PulumiProject, api: FakeApiServer
) -> None:
    paths = _deploy(dev_project, api)
    assert len(paths) >= 10, paths
    # ACK has issued a new credential: the program would read it (here: the setting holds it).
    dev_project.set_config("tf-mnist:kubeconfig", kubeconfig(api, FRESH), secret=True)

    # The finding: a plain destroy configures the provider from the state, gets 401 and stops,
    # deleting nothing and keeping every object in the state.
    plain = dev_project.pulumi("destroy", "--yes", check=False)
    assert plain.returncode != 0, plain.stdout
    assert "unreachable" in plain.stdout + plain.stderr, plain.stdout[-3000:]
    assert api.deletes() == [] and api.tokens() == {EXPIRED}
    assert sorted(api.objects) == sorted(paths)
    assert _kubernetes_objects_in_state(dev_project) == len(paths)

    (destroy,) = [c for c in rb.commands("cloud-stack-down") if c.startswith("pulumi destroy")]
    assert "--run-program" in destroy.split()
    seen = len(api.requests)
    done = dev_project.pulumi(*destroy.split("#")[0].split()[1:], check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Every object deleted, each with the fresh credential, and nothing created or changed.
    assert api.objects == {}
    assert sorted(path for path, _ in api.deletes()) == sorted(paths)
    assert {token for _, _, token in api.requests[seen:]} == {FRESH}
    assert api.writes() == []
    assert _kubernetes_objects_in_state(dev_project) == 0


def test_refresh_after_the_credential_expired_needs_the_program_too(
    dev_project: PulumiProject, api: FakeApiServer
) -> None:
    """refresh reads every object: with the state's provider it gets 401, with the program's not."""
    paths = _deploy(dev_project, api)
    dev_project.set_config("tf-mnist:kubeconfig", kubeconfig(api, FRESH), secret=True)
    plain = dev_project.pulumi("refresh", "--yes", check=False)
    assert plain.returncode != 0 and "unreachable" in plain.stdout + plain.stderr, plain.stdout[-3000:]
    seen = len(api.requests)
    refreshed = dev_project.pulumi("refresh", "--run-program", "--yes", check=False)
    assert refreshed.returncode == 0, refreshed.stdout[-4000:] + refreshed.stderr[-2000:]
    assert {token for _, _, token in api.requests[seen:]} == {FRESH}
    assert api.deletes() == [] and api.writes() == [] and sorted(api.objects) == sorted(paths)
    assert _kubernetes_objects_in_state(dev_project) == len(paths)


def test_a_cloud_stacks_destroy_with_the_program_asks_ack_for_a_new_credential(
    dev_project: PulumiProject, toolchain: Toolchain
) -> None:
    """The cloud layer's side, as far as it goes offline: on a live cloud stack (its network,
    cluster, pools and NAS in the state) a destroy that runs the program asks ACK for a credential
    for the cluster in the state before it deletes anything; offline that call is the one that
    fails. A plain destroy plans its deletions without asking."""
    configure(dev_project, toolchain, "cloud")
    make_live(dev_project)
    # ACK's endpoint named: unnamed, the provider asks Alibaba's location service for it, which
    # offline it retries for 2 minutes before the credential call fails (nothing here comes after).
    dev_project.env["ALIBABA_CLOUD_ENDPOINT_CS"] = (
        f"cs.{alicloud_offline_config()['alicloud:region']}.aliyuncs.com"
    )
    plain = dev_project.pulumi("destroy", "--preview-only", check=False)
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-2000:]
    assert CREDENTIAL_CALL not in plain.stdout + plain.stderr
    fresh = dev_project.pulumi("destroy", "--run-program", "--preview-only", check=False)
    assert fresh.returncode != 0
    assert CREDENTIAL_CALL in fresh.stdout + fresh.stderr, fresh.stdout[-3000:] + fresh.stderr[-2000:]
