"""The GPU image's pins (docker/trainer-gpu-requirements.txt) without network or build: every
package exact and hashed, the same TensorFlow and TensorBoard as trainer/requirements.txt,
CUDA 12 only, cuDNN at the release that still runs on the P100, the file in the generator's
own form, and the Dockerfile installing it with --require-hashes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_REQUIREMENTS = REPO / "docker" / "trainer-gpu-requirements.txt"
CPU_REQUIREMENTS = REPO / "trainer" / "requirements.txt"
ENTRY = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+)(?P<extras>\[[a-z-]+\])?==(?P<version>\S+) \\\n"
    r"    --hash=sha256:(?P<sha256>[0-9a-f]{64})$",
    re.MULTILINE,
)

_spec = importlib.util.spec_from_file_location("pin_requirements", REPO / "docker" / "pin_requirements.py")
pin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pin)


def entries() -> dict[str, dict[str, str]]:
    """{lower-case name: {name, extras, version, sha256}} of the GPU requirements file."""
    return {m["name"].lower(): m.groupdict() for m in ENTRY.finditer(GPU_REQUIREMENTS.read_text())}


def cpu_pins() -> dict[str, str]:
    return {
        line.split("==")[0]: line.split("==")[1].strip()
        for line in CPU_REQUIREMENTS.read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }


def test_every_requirement_line_is_an_exact_pin_with_one_hash() -> None:
    body = [line for line in GPU_REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert len(body) == 2 * len(entries()) > 80, "each package: a name==version line and a --hash line"


def test_tensorflow_and_tensorboard_are_the_cpu_image_s_versions() -> None:
    gpu, cpu = entries(), cpu_pins()
    assert cpu["tensorflow-cpu"] == "2.21.0" and cpu["tensorboard"] == "2.21.0"
    assert (gpu["tensorflow"]["extras"], gpu["tensorflow"]["version"]) == (
        "[and-cuda]",
        cpu["tensorflow-cpu"],
    )
    assert gpu["tensorboard"]["version"] == cpu["tensorboard"]
    assert "tensorflow-cpu" not in gpu


def test_the_cuda_libraries_are_cuda_12_and_cudnn_is_held_for_the_p100() -> None:
    nvidia = {name: e["version"] for name, e in entries().items() if name.startswith("nvidia-")}
    assert {"nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-cudnn-cu12"} <= nvidia.keys()
    assert all(name.endswith("-cu12") for name in nvidia), nvidia
    assert all(
        v.startswith("12.")
        for n, v in nvidia.items()
        if n in ("nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12")
    )
    assert (
        f"nvidia-cudnn-cu12=={nvidia['nvidia-cudnn-cu12']}" == pin.CUDNN_PIN == "nvidia-cudnn-cu12==9.10.2.21"
    )


def test_the_file_is_what_the_generator_writes_for_its_own_packages() -> None:
    report = {
        "install": [
            {
                "metadata": {"name": e["name"], "version": e["version"]},
                "download_info": {"archive_info": {"hashes": {"sha256": e["sha256"]}}},
            }
            for e in entries().values()
        ]
    }
    assert pin.render(report, pin.top_level(CPU_REQUIREMENTS)) == GPU_REQUIREMENTS.read_text()


def test_the_top_level_requirements_come_from_the_cpu_pins(tmp_path: Path) -> None:
    assert pin.top_level(CPU_REQUIREMENTS) == [
        "tensorflow[and-cuda]==2.21.0",
        "tensorboard==2.21.0",
        pin.CUDNN_PIN,
    ]
    partial = tmp_path / "requirements.txt"
    partial.write_text("tensorflow-cpu==2.21.0\n")
    with pytest.raises(ValueError, match=r"pins no tensorboard"):
        pin.top_level(partial)
    partial.write_text("tensorflow-cpu>=2.21\ntensorboard==2.21.0\n")
    with pytest.raises(ValueError, match=r"'tensorflow-cpu>=2.21' is not an exact name==version pin"):
        pin.top_level(partial)


def test_a_report_entry_without_a_sha256_is_refused() -> None:
    report = {
        "install": [
            {
                "metadata": {"name": "six", "version": "1.17.0"},
                "download_info": {"url": "file:///wheels/six.whl", "archive_info": {}},
            }
        ]
    }
    with pytest.raises(ValueError, match=r"six 1.17.0: pip's report gives no sha256"):
        pin.render(report, [])


def test_the_image_installs_the_file_with_hashes_required() -> None:
    dockerfile = (REPO / "docker" / "trainer-gpu.Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim\nFROM ${PYTHON_IMAGE}\n" in dockerfile
    assert "COPY docker/trainer-gpu-requirements.txt /tmp/requirements.txt" in dockerfile
    assert "pip install --require-hashes -r /tmp/requirements.txt" in dockerfile
    assert (
        "!docker/trainer-gpu-requirements.txt"
        in (REPO / "docker" / "trainer-gpu.Dockerfile.dockerignore").read_text()
    )
