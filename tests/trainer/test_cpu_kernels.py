"""trainer/cpu_kernels.py: oneDNN asked for on x86-64 Linux unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainer import cpu_kernels


@pytest.mark.parametrize("machine", ["x86_64", "AMD64"])
def test_onednn_is_asked_for_on_x86_64(machine, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    env: dict[str, str] = {}
    assert cpu_kernels.prefer_onednn(env, machine=machine)
    assert env == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert cpu_kernels.onednn_requested(env)


@pytest.mark.parametrize("chosen", ["0", "false", "1"])
def test_the_users_choice_is_kept(chosen, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    env = {"TF_ENABLE_ONEDNN_OPTS": chosen}
    assert not cpu_kernels.prefer_onednn(env, machine="x86_64")
    assert env == {"TF_ENABLE_ONEDNN_OPTS": chosen}


def test_nothing_is_set_on_arm(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    env: dict[str, str] = {}
    assert not cpu_kernels.prefer_onednn(env, machine="aarch64")
    assert env == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="oneDNN's switch is read on Linux")
def test_the_switch_is_on_before_tensorflow_is_imported():
    """A process that imports the package, then TensorFlow, has the switch on when TensorFlow
    reads it (x86-64), or untouched (elsewhere)."""
    code = "import os, platform, trainer, tensorflow\nprint(platform.machine(), os.environ.get('TF_ENABLE_ONEDNN_OPTS'))\n"
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-1] == ("1" if out[-2] in ("x86_64", "AMD64") else "None")
