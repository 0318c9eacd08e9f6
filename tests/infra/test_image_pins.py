"""`pulumi up` resolves every image tag to its digest once and runs every pod on it
(infra/image_pins.py), against a registry over real HTTP (tests/infra/registry_stub.py) and
against the mock engine's FakeRegistry; a tag without a digest fails `up` before anything."""

from __future__ import annotations

import mock_engine as me
import pytest
import registry_stub as stub

from infra import bundle, image_pins, stack_state
from infra.registry_digests import DigestUnavailable, lookup_digest

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


class OverHttp:
    """The program's own lookup (infra/registry_digests.py), as run_program's ``registry``."""

    lookup = staticmethod(lookup_digest)


def pulls(run: me.Run) -> dict[str, tuple[str, str]]:
    """Object name -> (image, imagePullPolicy) of its one container, for every Job and Deployment."""
    out = {}
    for obj in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        (container,) = obj.inputs["spec"]["template"]["spec"]["containers"]
        out[obj.name] = (container["image"], container["imagePullPolicy"])
    return out


@pytest.fixture
def registry():
    with stub.served(
        stub.Registry(
            public={"team/trainer": {"2.21.0-gpu": stub.digest(1), "2.21.0-cpu": stub.digest(2)}},
            bearer={"team/tensorboard": {"2.21.0": stub.digest(3)}, "team/private": {"1": stub.digest(4)}},
            private={"team/private"},
        )
    ) as served:
        yield served


def own_images(config: dict, host: str, board: str = "tensorboard:2.21.0") -> dict:
    return {
        **config,
        "tf-mnist:worker.image": f"{host}/team/trainer:2.21.0-gpu",
        "tf-mnist:ps.image": f"{host}/team/trainer:2.21.0-cpu",
        "tf-mnist:tensorboard.image": f"{host}/team/{board}",
    }


def test_up_runs_every_pod_on_the_digest_the_registry_gives_over_http(dev_config, registry):
    run = me.run_program(own_images(dev_config, registry.host), registry=OverHttp())
    assert run.error is None, run.error
    found = pulls(run)
    gpu, cpu = f"{registry.host}/team/trainer:2.21.0-gpu", f"{registry.host}/team/trainer:2.21.0-cpu"
    assert found["mnist-worker-0"] == found["mnist-worker-1"] == (f"{gpu}@{stub.digest(1)}", "IfNotPresent")
    for name in ("mnist-ps-0", "mnist-chief-0", "mnist-stage-data", "mnist-monitor"):
        assert found[name] == (f"{cpu}@{stub.digest(2)}", "IfNotPresent"), name
    # TensorBoard's repository answers behind a Bearer challenge, with an anonymous token.
    assert found["mnist-tensorboard"] == (
        f"{registry.host}/team/tensorboard:2.21.0@{stub.digest(3)}",
        "IfNotPresent",
    )
    heads = [path for method, path, _ in registry.requests if method == "HEAD"]
    # One HEAD per tag, and one more for the tag asked again with its token.
    assert sorted(heads) == sorted(
        [
            "/v2/team/trainer/manifests/2.21.0-gpu",
            "/v2/team/trainer/manifests/2.21.0-cpu",
            "/v2/team/tensorboard/manifests/2.21.0",
            "/v2/team/tensorboard/manifests/2.21.0",
        ]
    )


def test_a_private_tag_is_resolved_with_the_stack_s_registry_login(dev_config, registry):
    config = {
        **own_images(dev_config, registry.host, board="private:1"),
        "tf-mnist:registryCredentials.server": registry.host,
        "tf-mnist:registryCredentials.username": stub.LOGIN[0],
        "tf-mnist:registryCredentials.password": me.secret(stub.LOGIN[1]),
    }
    run = me.run_program(config, registry=OverHttp())
    assert run.error is None, run.error
    assert pulls(run)["mnist-tensorboard"] == (
        f"{registry.host}/team/private:1@{stub.digest(4)}",
        "IfNotPresent",
    )


def test_tags_without_a_digest_fail_up_before_anything_with_each_answer_and_fix(dev_config, registry):
    config = {
        **own_images(dev_config, registry.host, board="private:1"),
        "tf-mnist:worker.image": f"{registry.host}/team/trainer:9.9.9",
    }
    run = me.run_program(config, registry=OverHttp())
    assert run.registrations == []
    message = str(run.error)
    assert message.startswith("2 image tags could not be resolved to a digest")
    assert "nothing was deployed" in message
    worker = f"{registry.host}/team/trainer:9.9.9"
    assert (
        f"  worker.image {worker}: no digest for the tag: http://{registry.host}/v2/team/trainer/manifests/9.9.9 "
        "answered HTTP 404\n"
        f"    fix: name it by digest: pulumi config set worker.image {worker}@sha256:<digest> "
        f"(`docker buildx imagetools inspect {worker}` prints it)\n"
        "    or follow the tag without a digest (a pod started later may run another image): "
        "pulumi config set worker.imagePullPolicy Always"
    ) in message
    board = f"{registry.host}/team/private:1"
    assert (
        f"  tensorboard.image {board}: no digest for the tag: the token realm: http://{registry.host}/token answered HTTP 401"
        in message
    )
    assert (
        "or give the stack the registry's login: pulumi config set registryCredentials.username <user>"
        in message
    )
    assert "pulumi config set ps.imagePullPolicy Always" in message


def test_the_default_base_image_by_tag_is_pinned_with_the_setup_job(dev_config):
    # The dev stack is in cn-hangzhou: Alibaba Cloud Linux 3's Python, by tag.
    tag = bundle.ALINUX_PYTHON_IMAGE
    registry = me.FakeRegistry(digests={tag: stub.digest(7)})
    run = me.run_program(dev_config, registry=registry)
    assert run.error is None, run.error
    assert set(pulls(run).values()) == {(f"{tag}@{stub.digest(7)}", "IfNotPresent")}
    assert "mnist-setup" in pulls(run)
    assert run.outputs["baseImage"] == f"{tag}@{stub.digest(7)}"
    assert registry.asked == [(tag, None)]


def test_a_base_image_without_a_digest_names_base_image_and_both_policy_keys(dev_config):
    tag = bundle.ALINUX_PYTHON_IMAGE
    refused = DigestUnavailable("https://example.invalid/v2/x/manifests/1 answered HTTP 403", 403)
    run = me.run_program(dev_config, registry=me.FakeRegistry(errors={tag: refused}))
    message = str(run.error)
    assert (
        f"  baseImage {tag}: no digest for the tag: https://example.invalid/v2/x/manifests/1 answered HTTP 403"
        in message
    )
    assert f"pulumi config set baseImage {tag}@sha256:<digest>" in message
    assert (
        "pulumi config set worker.imagePullPolicy Always && pulumi config set ps.imagePullPolicy Always"
        in message
    )
    assert run.registrations == []


def test_a_preview_after_up_shows_the_digests_of_the_state(dev_config, caplog):
    caplog.set_level("INFO")  # the notes are info, not warnings
    up = me.run_program(dev_config)
    state = {
        reg.urn: {"type": reg.type, "outputs": reg.inputs}
        for reg in [*up.of_type(JOB), *up.of_type(DEPLOYMENT)]
    }
    registry = me.FakeRegistry()
    preview = me.run_program(dev_config, preview=True, state=state, registry=registry)
    assert registry.asked == []
    assert pulls(preview) == pulls(up)
    assert "shown as the last `pulumi up` pinned it" in caplog.text


def test_an_up_the_registry_does_not_answer_keeps_the_states_digest_with_a_warning(dev_config, caplog):
    # `pulumi destroy --run-program` runs the program as an up does: a registry out of reach
    # must not stop it, nor a re-up of the same images.
    tag = bundle.ALINUX_PYTHON_IMAGE
    up = me.run_program(dev_config, registry=me.FakeRegistry(digests={tag: stub.digest(7)}))
    state = {
        reg.urn: {"type": reg.type, "outputs": reg.inputs}
        for reg in [*up.of_type(JOB), *up.of_type(DEPLOYMENT)]
    }
    unreachable = DigestUnavailable("https://example.invalid/v2/x/manifests/1: connection refused")
    again = me.run_program(dev_config, state=state, registry=me.FakeRegistry(errors={tag: unreachable}))
    assert again.error is None, again.error
    assert pulls(again) == pulls(up)
    assert (
        f"baseImage {tag}: no digest for the tag (https://example.invalid/v2/x/manifests/1: connection refused); "
        f"kept the one the last `pulumi up` pinned, {stub.digest(7)}"
    ) in caplog.text
    # Without a digest in the state there is nothing to keep: the up fails before anything.
    first = me.run_program(dev_config, state={}, registry=me.FakeRegistry(errors={tag: unreachable}))
    assert str(first.error).startswith("1 image tag could not be resolved") and first.registrations == []


def test_a_tag_pushed_again_replaces_the_pods_and_keeps_the_run_directory(dev_config):
    tag = bundle.ALINUX_PYTHON_IMAGE
    first = me.run_program(dev_config, registry=me.FakeRegistry(digests={tag: stub.digest(7)}))
    pushed = me.run_program(dev_config, registry=me.FakeRegistry(digests={tag: stub.digest(8)}))
    # The run key holds the reference as configured: the same run directory, resumed by new
    # tasks (new pod templates, a new run ConfigMap and so a new run id) on the new digest.
    assert first.outputs["runDir"] == pushed.outputs["runDir"]
    assert pulls(first)["mnist-chief-0"][0].endswith(stub.digest(7))
    assert pulls(pushed)["mnist-chief-0"][0].endswith(stub.digest(8))
    assert first.outputs["runId"] != pushed.outputs["runId"]


def test_the_state_gives_a_tag_s_one_digest_and_no_guess_between_two():
    def job(image: str) -> dict:
        return {"type": JOB, "outputs": {"spec": {"template": {"spec": {"containers": [{"image": image}]}}}}}

    tag = "registry.example.com/team/trainer:1"
    resources = {
        "a": job(f"{tag}@{stub.digest(1)}"),
        "b": {"type": CONFIG_MAP, "outputs": {"data": {"image": f"{tag}@{stub.digest(9)}"}}},
        "c": job(f"{tag}2@{stub.digest(2)}"),
        "d": job(f"{tag}3@{stub.digest(3)}"),
        "e": job(f"{tag}3@{stub.digest(4)}"),
    }
    images = image_pins.state_images(resources)
    assert images == {
        f"{tag}@{stub.digest(1)}",
        f"{tag}2@{stub.digest(2)}",
        f"{tag}3@{stub.digest(3)}",
        f"{tag}3@{stub.digest(4)}",
    }
    # A half-done update left two digests of one tag: the preview shows the tag instead.
    assert image_pins.from_state([tag, f"{tag}3", f"{tag}4"], images) == {tag: f"{tag}@{stub.digest(1)}"}


def test_one_program_run_reads_its_state_once_and_replays_a_failure():
    reads = []

    def read() -> dict:
        reads.append(1)
        if len(reads) == 1 and failing:
            raise stack_state.StateUnreadable("backend busy")
        return {"urn": {"type": JOB}}

    failing = False
    once = stack_state.read_once(read)
    assert once() is once() and len(reads) == 1
    failing, reads = True, []
    once = stack_state.read_once(read)
    for _ in range(2):
        with pytest.raises(stack_state.StateUnreadable, match="backend busy"):
            once()
    assert len(reads) == 1
