"""The GPU trainer image, built on this machine and checked inside (no GPU needed): opt-in.

Builds docker/trainer-gpu.Dockerfile with ``tools/local-cluster/images.sh build base
trainer-gpu`` (a step whose inputs have not changed is skipped), then runs
tests/tools/gpu_image_check.py in a buildah working container of the image and asserts what it
reports: TensorFlow 2.21.0 built with CUDA for compute capability 6.0 (GN5's P100), the CUDA 12
and cuDNN 9.10 libraries of the nvidia wheels present and loading with ctypes, cuDNN's kernels
carrying sm_60 machine code, no GPU listed and no crash without a driver, ``python -m trainer
--help`` exiting 0, uid/gid 10001. The working container is removed by name afterwards.

Opt-in (TF_MNIST_GPU_IMAGE=1), root on Linux with buildah and debootstrap: the image is several
GB, and a cold build downloads about 3 GB of wheels (docs/building.md gives the measured size
and time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
IMAGES_SH = REPO / "tools" / "local-cluster" / "images.sh"
CHECK = Path(__file__).with_name("gpu_image_check.py")
IMAGE = "registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu"
OPT_IN = "TF_MNIST_GPU_IMAGE"
#: A cold build on 2 cores (wheel downloads, pip install, layer commit) with room to spare, s.
BUILD_TIMEOUT_S = 3600
#: Importing TensorFlow, loading the libraries, reading cuDNN's 100 MB of kernels, s.
CHECK_TIMEOUT_S = 600


def unavailable() -> str:
    """Why the image cannot be built and run here, or '' when it can."""
    if os.environ.get(OPT_IN) != "1":
        return f"opt-in: set {OPT_IN}=1 to build the GPU trainer image (several GB) and check it"
    if not sys.platform.startswith("linux"):
        return "images.sh needs Linux"
    if os.geteuid() != 0:
        return "images.sh needs root (buildah's rootful store, debootstrap)"
    missing = [tool for tool in ("buildah", "debootstrap", "findmnt", "flock") if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install buildah debootstrap util-linux)"
    return ""


def buildah_ulimits() -> list[str]:
    """``--ulimit`` flags within this host's hard limits, as images.sh gives its RUN steps:
    without CAP_SYS_RESOURCE a container cannot be given more than the host allows, and buildah
    caps its own nproc at 32768."""
    import resource

    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
    flags = [] if nofile == resource.RLIM_INFINITY else ["--ulimit", f"nofile={nofile}:{nofile}"]
    return flags + ["--ulimit", f"nproc={nproc}:{nproc}"]


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built (or found up to date) by images.sh."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    build = subprocess.run(
        ["bash", str(IMAGES_SH), "build", "base", "trainer-gpu"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"images.sh build base trainer-gpu failed:\n{build.stderr[-4000:]}"
    return IMAGE


@pytest.fixture(scope="module")
def facts(image: str) -> Iterator[dict]:
    """gpu_image_check.py's report from a working container of ``image``, which is removed
    (by its name, whatever happened) before the tests see the report."""
    name = f"tf-mnist-gpu-image-check-{os.getpid()}"
    subprocess.run(["buildah", "rm", name], capture_output=True)  # a leftover of a killed run
    created = subprocess.run(
        ["buildah", "from", "--pull=never", "--name", name, *buildah_ulimits(), image],
        capture_output=True,
        text=True,
    )
    assert created.returncode == 0, f"buildah from {image}:\n{created.stderr}"
    try:
        run = subprocess.run(
            ["buildah", "run", "--isolation", "chroot", name, "--", "python", "-c", CHECK.read_text()],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
        )
    finally:
        removed = subprocess.run(["buildah", "rm", name], capture_output=True, text=True, timeout=300)
    assert removed.returncode == 0, f"buildah rm {name}:\n{removed.stderr}"
    left = subprocess.run(
        ["buildah", "containers", "--noheading", "--format", "{{.ContainerName}}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert name not in left
    assert run.returncode == 0, (
        f"the check failed in the image (exit {run.returncode}):\n{run.stderr[-4000:]}"
    )
    yield json.loads(run.stdout.strip().splitlines()[-1])


def test_it_runs_as_uid_and_gid_10001_with_the_nvidia_runtime_settings(facts: dict) -> None:
    assert (facts["uid"], facts["gid"]) == (10001, 10001)
    assert facts["env"] == {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


def test_tensorflow_2_21_0_is_built_with_cuda_12_for_the_p100(facts: dict) -> None:
    tf = facts["tensorflow"]
    assert tf["version"] == "2.21.0"
    assert tf["built_with_cuda"] is True
    assert tf["cuda_version"].startswith("12."), tf
    assert "sm_60" in tf["compute_capabilities"], tf


def test_no_gpu_is_listed_without_a_driver_and_nothing_crashes(facts: dict) -> None:
    assert facts["gpus"] == []


def test_the_cuda_and_cudnn_libraries_of_the_wheels_load(facts: dict) -> None:
    failed = {name: lib["error"] for name, lib in facts["libraries"].items() if not lib["loaded"]}
    assert failed == {}
    assert facts["versions"]["cudart"] // 1000 == 12, facts["versions"]
    assert facts["versions"]["cudnn"] == 91002, facts["versions"]  # 9.10.2: the pin
    assert facts["versions"]["cublas_major"] == 12, facts["versions"]


def test_cudnn_carries_machine_code_for_the_p100(facts: dict) -> None:
    assert facts["sass"].keys() == {"libcudnn_ops.so.9", "libcudnn_cnn.so.9"}
    for name, archs in facts["sass"].items():
        assert "sm_60" in archs, (name, archs)


def test_the_trainer_help_exits_0(facts: dict) -> None:
    assert facts["trainer_help"]["rc"] == 0, facts["trainer_help"]
    assert "usage:" in facts["trainer_help"]["stdout_head"], facts["trainer_help"]
