"""The trainer images are part of the run key (infra/runs.py: trainer_images): a
trainer image named by a new digest is a new run; TensorBoard's image is not."""

from __future__ import annotations

import mock_engine as me
import pytest

DIGEST = "registry.example.com/team/trainer@sha256:" + "a" * 64
BOARD_DIGEST = "registry.example.com/team/tensorboard:2.21.0@sha256:" + "b" * 64


@pytest.mark.parametrize("key", ["worker.image", "ps.image"])
def test_a_new_digest_of_a_trainer_image_is_a_new_run(dev_config, key):
    first = me.run_program({**dev_config, f"tf-mnist:{key}": DIGEST}).outputs["runDir"]
    again = me.run_program({**dev_config, f"tf-mnist:{key}": DIGEST}).outputs["runDir"]
    pushed = me.run_program({**dev_config, f"tf-mnist:{key}": DIGEST.replace("a" * 64, "c" * 64)}).outputs[
        "runDir"
    ]
    assert first == again != pushed
    assert first.rsplit("/", 1)[0] == pushed.rsplit("/", 1)[0]


def test_tensorboard_s_image_leaves_the_run_alone(dev_config):
    base = me.run_program(dev_config).outputs["runDir"]
    assert (
        me.run_program({**dev_config, "tf-mnist:tensorboard.image": BOARD_DIGEST}).outputs["runDir"] == base
    )
