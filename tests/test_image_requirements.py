"""The CPU trainer and TensorBoard images' pins (docker/trainer-cpu-requirements.txt,
docker/tensorboard-requirements.txt) and every image's base, without network or build: each
file exact and hashed at trainer/requirements.txt's versions, in the generator's own form, the
packages the CPU and GPU images share at one version, each Dockerfile installing its file with
--require-hashes, and the base an argument whose check refuses what the wheels cannot run on."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
CPU_REQUIREMENTS = REPO / "trainer" / "requirements.txt"
ENTRY = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+)(?P<extras>\[[a-z-]+\])?==(?P<version>\S+) \\\n"
    r"    --hash=sha256:(?P<sha256>[0-9a-f]{64})$",
    re.MULTILINE,
)

_spec = importlib.util.spec_from_file_location("pin_requirements", DOCKER / "pin_requirements.py")
pin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pin)

#: Dockerfile -> the pinned file it installs.
IMAGES = {"trainer-cpu": "cpu", "tensorboard": "tensorboard"}


def entries(path: Path) -> dict[str, dict[str, str]]:
    """{normalized name: {name, extras, version, sha256}} of a pinned requirements file."""
    return {
        re.sub(r"[-_.]+", "-", m["name"]).lower(): m.groupdict() for m in ENTRY.finditer(path.read_text())
    }


@pytest.mark.parametrize("image", ["cpu", "tensorboard"])
def test_every_line_is_an_exact_pin_with_one_hash(image: str) -> None:
    path = pin.IMAGES[image].output
    body = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    assert len(body) == 2 * len(entries(path)) > 10, "each package: a name==version line and a --hash line"


def test_the_versions_are_trainer_requirements_pins() -> None:
    cpu, board = entries(pin.IMAGES["cpu"].output), entries(pin.IMAGES["tensorboard"].output)
    assert (cpu["tensorflow-cpu"]["version"], cpu["tensorboard"]["version"]) == ("2.21.0", "2.21.0")
    assert board["tensorboard"]["version"] == "2.21.0"
    assert "tensorflow-cpu" not in board and "tensorflow" not in board and "keras" not in board


def test_the_cpu_and_gpu_images_share_every_common_version() -> None:
    cpu, gpu = entries(pin.IMAGES["cpu"].output), entries(pin.IMAGES["gpu"].output)
    common = cpu.keys() & gpu.keys()
    assert len(common) > 25
    assert {n: cpu[n]["version"] for n in common} == {n: gpu[n]["version"] for n in common}


@pytest.mark.parametrize("image", ["cpu", "tensorboard"])
def test_the_file_is_what_the_generator_writes_for_its_own_packages(image: str) -> None:
    target = pin.IMAGES[image]
    report = {
        "install": [
            {
                "metadata": {"name": e["name"], "version": e["version"]},
                "download_info": {"archive_info": {"hashes": {"sha256": e["sha256"]}}},
            }
            for e in entries(target.output).values()
        ]
    }
    requirements = target.top_level(CPU_REQUIREMENTS)
    assert pin.render(report, requirements, target.header) == target.output.read_text()


def test_the_top_level_requirements_of_each_image() -> None:
    assert pin.cpu_top_level(CPU_REQUIREMENTS) == ["tensorflow-cpu==2.21.0", "tensorboard==2.21.0"]
    assert pin.tensorboard_top_level(CPU_REQUIREMENTS) == ["tensorboard==2.21.0"]
    assert set(pin.IMAGES) == {"gpu", "cpu", "tensorboard"}


def test_one_report_is_for_one_image(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        pin.main(["--report", "r.json"])
    assert "--report and --output take one --image" in capsys.readouterr().err


@pytest.mark.parametrize("dockerfile, image", IMAGES.items())
def test_the_image_installs_its_file_with_hashes_required(dockerfile: str, image: str) -> None:
    text = (DOCKER / f"{dockerfile}.Dockerfile").read_text()
    name = pin.IMAGES[image].output.name
    assert f"COPY docker/{name} /tmp/requirements.txt" in text
    assert "pip install --require-hashes -r /tmp/requirements.txt" in text
    assert [m.strip() for m in re.findall(r"pip install[^\n&]*", text)] == [
        "pip install --require-hashes -r /tmp/requirements.txt"
    ]
    ignore = (DOCKER / f"{dockerfile}.Dockerfile.dockerignore").read_text()
    assert f"!docker/{name}" in ignore and "!trainer/requirements.txt" not in ignore


def base_check(dockerfile: str) -> str:
    """The shell command of the Dockerfile's base check (its first RUN), continuation lines joined."""
    text = (DOCKER / f"{dockerfile}.Dockerfile").read_text()
    start = text.index("RUN python -c")
    return text[start + 4 : text.index("esac", start) + 4].replace("\\\n", "")


@pytest.mark.parametrize("dockerfile", ["trainer-cpu", "trainer-gpu", "tensorboard"])
def test_the_base_is_an_argument_with_the_tag_by_default(dockerfile: str) -> None:
    text = (DOCKER / f"{dockerfile}.Dockerfile").read_text()
    assert (
        "ARG PYTHON_IMAGE=python:3.11-slim\nFROM ${PYTHON_IMAGE}\nARG PYTHON_IMAGE\nARG REQUIRE_BASE_DIGEST=0\n"
        in text
    )
    assert text.count("FROM ") == 1
    assert base_check(dockerfile) == base_check("trainer-cpu")


@pytest.mark.parametrize(
    "image, require, refused",
    [
        ("python:3.11-slim", "0", False),
        ("python:3.11-slim", "1", True),
        ("python:3.11-slim@sha256:" + "0" * 64, "1", False),
    ],
)
def test_the_base_check_refuses_a_tag_only_when_a_digest_is_required(
    tmp_path: Path, image: str, require: str, refused: bool
) -> None:
    # `python` is this interpreter (CPython 3.11, as the check wants), on this x86_64 machine.
    (tmp_path / "python").symlink_to(sys.executable)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "PYTHON_IMAGE": image, "REQUIRE_BASE_DIGEST": require}
    proc = subprocess.run(["sh", "-c", base_check("trainer-cpu")], env=env, capture_output=True, text=True)
    assert (proc.returncode != 0) == refused, proc.stderr
    assert ("names no digest and REQUIRE_BASE_DIGEST=1" in proc.stderr) == refused


def test_the_base_check_refuses_another_python(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; sys.version_info = (3, 12, 0); '
        'exec(sys.argv[2])" "$@"\n'
    )
    fake.chmod(0o755)
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "PYTHON_IMAGE": "python:3.11-slim",
        "REQUIRE_BASE_DIGEST": "0",
    }
    proc = subprocess.run(["sh", "-c", base_check("trainer-cpu")], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "CPython 3.11 on x86_64 needed" in proc.stderr, proc.stderr
