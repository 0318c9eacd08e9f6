"""What ``pulumi destroy --run-program`` relies on in the cloud layer, under the mock engine
(offline the real engine stops at ACK's credential call: tests/preview/test_teardown.py).

The README tears a cloud stack down with ``--run-program`` because the kubeconfig stored in the
state is a temporary ACK credential. That works only if every run of the program, the one a
destroy makes included, asks ACK for a credential for the cluster in the state and hands exactly
that one to the kubernetes provider, under an identifier that does not change with it (the
provider is then updated, not replaced, before the deletions).
"""

from __future__ import annotations

import mock_engine as me
import pytest

PROVIDER = "pulumi:providers:kubernetes"


@pytest.mark.parametrize("issued", ["at the last up", "at the destroy, after the first expired"])
def test_each_run_hands_the_provider_the_credential_ack_issues_then(dev_config, monkeypatch, issued):
    credential = f"apiVersion: v1\nkind: Config\n# issued {issued}\n"
    monkeypatch.setattr(me.harness, "KUBECONFIG", credential)  # where run_program reads it
    run = me.run_program(dev_config)
    (call,) = [c for c in run.calls if c.token == me.CREDENTIAL_TOKEN]
    assert call.args["clusterId"] == me.CLUSTER_ID
    provider = run.one(PROVIDER, "tf-mnist-dev-k8s")
    assert me.is_secret_value(provider.inputs["kubeconfig"])
    assert provider.inputs["kubeconfig"]["value"] == credential
    # The cluster id, not the credential, identifies the provider: a new credential updates it.
    assert provider.inputs["clusterIdentifier"] == me.CLUSTER_ID
    assert run.outputs["kubeconfig"] == credential and run.secret_outputs["kubeconfig"]
    k8s_objects = [r for r in run.registrations if r.type.startswith("kubernetes:")]
    assert k8s_objects and all(r.provider.startswith(provider.urn + "::") for r in k8s_objects)
