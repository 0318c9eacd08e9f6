"""The pull policy follows the image reference (infra/pull_policy.py) on every container
the stack creates: `pulumi up` resolves a tag to its digest (infra/image_pins.py) unless its
pull policy is set, and warns about a tag that a node may hold stale."""

from __future__ import annotations

import mock_engine as me
import pytest

from infra import pull_policy as images

REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DIGEST = "registry.example.com/team/trainer@sha256:" + "a" * 64
BOARD_DIGEST = "registry.example.com/team/tensorboard:2.21.0@sha256:" + "b" * 64


@pytest.fixture
def dev_config(dev_config):
    """The dev stack with images of your own (imageRegistry: the images built from
    docker/): the digests of their tags, the pull policies and stale-tag warnings.
    The default, the base image with the code and packages from the stack, is
    tests/infra/test_base_image.py's."""
    return {**dev_config, "tf-mnist:imageRegistry": REGISTRY}


def pulls(run: me.Run) -> dict[str, tuple[str, str]]:
    """Object name -> (image, imagePullPolicy) of its one container, for every Job and Deployment."""
    out = {}
    for obj in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        (container,) = obj.inputs["spec"]["template"]["spec"]["containers"]
        out[obj.name] = (container["image"], container["imagePullPolicy"])
    return out


def test_the_derived_policy_is_always_for_a_tag_and_if_not_present_for_a_digest():
    assert images.pull_policy(None, "registry.example.com/t/trainer:2.21.0-cpu") == "Always"
    assert images.pull_policy(None, DIGEST) == "IfNotPresent"
    assert images.pull_policy(None, BOARD_DIGEST) == "IfNotPresent"
    assert images.pull_policy("Never", DIGEST) == "Never"
    assert images.pull_policy("IfNotPresent", "trainer:2.21.0-cpu") == "IfNotPresent"


def test_up_runs_every_container_on_its_tag_s_digest_pulled_if_not_present(dev_config):
    registry = me.FakeRegistry()
    run = me.run_program(dev_config, registry=registry)
    assert run.error is None, run.error
    found = pulls(run)
    # Seven Jobs (staging, monitor, chief, 2 workers, 2 ps) and TensorBoard.
    assert len(found) == 8
    cpu, gpu, board = (
        f"{REGISTRY}/{name}" for name in ("trainer:2.21.0-cpu", "trainer:2.21.0-gpu", "tensorboard:2.21.0")
    )
    assert found["mnist-worker-0"] == found["mnist-worker-1"] == (me.pinned(gpu), "IfNotPresent")
    for name in ("mnist-ps-0", "mnist-ps-1", "mnist-chief-0", "mnist-stage-data", "mnist-monitor"):
        assert found[name] == (me.pinned(cpu), "IfNotPresent"), name
    assert found["mnist-tensorboard"] == (me.pinned(board), "IfNotPresent")
    # Each tag is asked once per `up`, anonymously (the dev stack has no registry login).
    assert registry.asked == [(gpu, None), (cpu, None), (board, None)]


def test_a_preview_asks_no_registry_and_shows_the_tags(dev_config, caplog):
    caplog.set_level("INFO")  # the notes are info, not warnings
    registry = me.FakeRegistry()
    found = pulls(me.run_program(dev_config, preview=True, registry=registry))
    assert registry.asked == []
    assert {policy for _, policy in found.values()} == {"Always"}
    assert all("@" not in image for image, _ in found.values())
    assert (
        f"worker.image {REGISTRY}/trainer:2.21.0-gpu: by tag in this preview; `pulumi up` resolves it to its "
        "digest, which every pod then runs" in caplog.text
    )


def test_digests_are_not_asked_for_and_tags_are(dev_config):
    config = {**dev_config, "tf-mnist:ps.image": DIGEST, "tf-mnist:tensorboard.image": BOARD_DIGEST}
    registry = me.FakeRegistry()
    found = pulls(me.run_program(config, registry=registry))
    assert (
        found["mnist-ps-0"]
        == found["mnist-chief-0"]
        == found["mnist-stage-data"]
        == found["mnist-monitor"]
        == (DIGEST, "IfNotPresent")
    )
    assert found["mnist-tensorboard"] == (BOARD_DIGEST, "IfNotPresent")
    assert found["mnist-worker-0"] == (me.pinned(f"{REGISTRY}/trainer:2.21.0-gpu"), "IfNotPresent")
    assert [image for image, _ in registry.asked] == [f"{REGISTRY}/trainer:2.21.0-gpu"]


def test_a_set_pull_policy_keeps_the_tag_unresolved(dev_config):
    registry = me.FakeRegistry()
    config = me.set_flat(
        me.set_flat(dev_config, "worker.imagePullPolicy", "Always"), "ps.imagePullPolicy", "Always"
    )
    found = pulls(me.run_program(config, registry=registry))
    assert registry.asked == []
    assert {policy for _, policy in found.values()} == {"Always"}
    assert all("@" not in image for image, _ in found.values())


def test_an_explicit_policy_wins_and_a_stale_tag_is_warned_about(dev_config, caplog):
    config = me.set_flat(
        me.set_flat(dev_config, "worker.imagePullPolicy", "IfNotPresent"), "ps.imagePullPolicy", "Never"
    )
    found = pulls(me.run_program(config))
    assert found["mnist-worker-1"][1] == "IfNotPresent"
    assert {
        found[n][1]
        for n in ("mnist-ps-0", "mnist-chief-0", "mnist-stage-data", "mnist-monitor", "mnist-tensorboard")
    } == {"Never"}
    assert (
        "worker.imagePullPolicy is IfNotPresent with tag registry.cn-hangzhou.aliyuncs.com/tf-mnist/"
        "trainer:2.21.0-gpu: a node that holds an image under that tag keeps running it" in caplog.text
    )
    assert (
        "ps.imagePullPolicy is Never with tag registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu, "
        "registry.cn-hangzhou.aliyuncs.com/tf-mnist/tensorboard:2.21.0" in caplog.text
    )
    assert "`pulumi config rm ps.imagePullPolicy`" in caplog.text


def test_no_warning_for_digests_or_resolved_tags(dev_config, caplog):
    me.run_program(
        me.set_flat(
            {**dev_config, "tf-mnist:ps.image": DIGEST, "tf-mnist:tensorboard.image": BOARD_DIGEST},
            "ps.imagePullPolicy",
            "IfNotPresent",
        )
    )
    assert "imagePullPolicy is" not in caplog.text
    assert images.stale_tag_warnings([("ps.imagePullPolicy", "t:1", "Always"), ("k", DIGEST, "Never")]) == []


def test_a_bad_policy_is_refused_with_the_fix(dev_config):
    run = me.run_program(me.set_flat(dev_config, "worker.imagePullPolicy", "Sometimes"))
    assert (
        "Configuration 'tf-mnist:worker.imagePullPolicy' value 'Sometimes' is invalid: must be one of Always, "
        "IfNotPresent, Never (or unset)" in str(run.error)
    )
    assert "fix: pulumi config set worker.imagePullPolicy Always" in str(run.error)


def test_the_pull_policy_leaves_the_run_alone(dev_config):
    base = me.run_program(dev_config).outputs["runDir"]
    assert (
        me.run_program(me.set_flat(dev_config, "ps.imagePullPolicy", "IfNotPresent")).outputs["runDir"]
        == base
    )
