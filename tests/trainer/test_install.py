"""``python -m trainer.install`` (the setup Job): real pip with --require-hashes against a wheel
index served on loopback; a set installed once and reused; a tampered wheel, an index out of
reach and a full volume each fail with one line naming it, leaving nothing half-installed."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from loopback_http import serving

from infra import bundle
from trainer import install

WHEEL = "tinypkg-1.0-py3-none-any.whl"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(path: Path, body: str = "VALUE = 1\n") -> bytes:
    """A minimal pure-Python wheel of ``tinypkg`` 1.0 at ``path``; returns its bytes."""
    files = {
        "tinypkg/__init__.py": body.encode(),
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += "tinypkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("tinypkg-1.0.dist-info/RECORD", record)
    return path.read_bytes()


@pytest.fixture
def index(tmp_path):
    """A PEP 503 index of tinypkg on loopback: (its URL, the served wheel's path, the lock file
    pinning the wheel as first built)."""
    root = tmp_path / "index"
    (root / "simple" / "tinypkg").mkdir(parents=True)
    (root / "files").mkdir()
    wheel = root / "files" / WHEEL
    digest = hashlib.sha256(make_wheel(wheel)).hexdigest()
    (root / "simple" / "tinypkg" / "index.html").write_text(f'<a href="../../files/{WHEEL}">{WHEEL}</a>\n')
    lock = tmp_path / "tiny.txt"
    lock.write_text(f"# pinned\ntinypkg==1.0 \\\n    --hash=sha256:{digest}\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *_: None  # type: ignore[attr-defined]
    with serving(handler) as url:
        yield f"{url}/simple/", wheel, lock


@pytest.fixture(autouse=True)
def _no_local_wheels(monkeypatch):
    # This machine's pip configuration may add a wheel folder; the pods' pip has none.
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)


def leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.iterdir() if p.name.startswith("."))


def test_a_set_is_installed_by_hash_then_reused(index, tmp_path):
    url, _, lock = index
    dest = tmp_path / "packages"
    dest.mkdir()
    cost = install.install("tinypkg", lock, dest, url)
    folder = dest / install.content_name(lock, "tinypkg")
    assert cost["folder"] == str(folder) and cost["reused"] is False
    assert (folder / install.SITE / "tinypkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (folder / "INSTALLED").is_file()
    assert cost["bytes"] > 0 and cost["pip_seconds"] >= 0 and cost["import_seconds"] > 0
    assert leftovers(dest) == []
    again = install.install("tinypkg", lock, dest, url)
    assert again["reused"] is True and again["folder"] == str(folder)
    assert "reused" in install.measure_line(again)


def test_the_folder_is_the_one_infra_puts_on_pythonpath(tmp_path):
    lock = tmp_path / "cpu.txt"
    lock.write_text(bundle.lock_text("cpu"))
    name = install.content_name(lock, "cpu")
    assert bundle.package_path("/data/packages", "cpu") == f"/data/packages/{name}/{install.SITE}"


def test_a_tampered_wheel_fails_naming_the_file_and_installs_nothing(index, tmp_path):
    url, wheel, lock = index
    make_wheel(wheel, body="VALUE = 666\n")
    dest = tmp_path / "packages"
    dest.mkdir()
    with pytest.raises(install.SetupError) as failed:
        install.install("tinypkg", lock, dest, url)
    message = str(failed.value)
    assert WHEEL in message
    assert lock.read_text().split("sha256:")[1].strip() in message
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() in message
    assert list(dest.iterdir()) == []


def test_an_index_out_of_reach_fails_by_its_url(tmp_path):
    lock = tmp_path / "tiny.txt"
    lock.write_text("tinypkg==1.0 --hash=sha256:" + "0" * 64 + "\n")
    with serving(http.server.BaseHTTPRequestHandler) as url:
        closed = f"{url}/simple/"
    dest = tmp_path / "packages"
    dest.mkdir()
    with pytest.raises(install.SetupError) as failed:
        install.install("tinypkg", lock, dest, closed)
    assert f"package index {closed} cannot be reached" in str(failed.value)
    assert "packageIndex" in str(failed.value)
    assert list(dest.iterdir()) == []


def test_an_index_without_the_package_names_the_page(index, tmp_path):
    url, _, _ = index
    lock = tmp_path / "other.txt"
    lock.write_text("otherpkg==1.0 --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(install.SetupError, match=r"answered .*/simple/otherpkg/ with HTTP 404"):
        install.install("other", lock, tmp_path, url)


def test_a_full_volume_fails_with_its_free_space_and_leaves_nothing(index, tmp_path):
    url, _, lock = index
    dest = tmp_path / "packages"
    dest.mkdir()

    def full(command, **kwargs):
        (Path(command[command.index("--target") + 1]) / "partial").mkdir(parents=True)
        out = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n"
        return subprocess.CompletedProcess(command, 1, stdout="", stderr=out)

    with pytest.raises(install.SetupError) as failed:
        install.install("tinypkg", lock, dest, url, run=full)
    assert failed.value.code == install.EXIT_NO_ROOM
    assert "has no room for its packages" in str(failed.value) and "MB free" in str(failed.value)
    assert "persistence.pvc.storage" in str(failed.value)
    assert list(dest.iterdir()) == []


def test_pips_hash_report_gives_each_file():
    report = (
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated ...\n"
        "    numpy==2.4.6 from https://mirror.example/packages/ab/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"
        "#sha256=ff (from -r /locks/cpu.txt (line 30)):\n"
        "        Expected sha256 " + "a" * 64 + "\n"
        "             Got        " + "b" * 64 + "\n"
    )
    assert install.mismatches(report) == [
        f"numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl: expected sha256 {'a' * 64}, got {'b' * 64}"
    ]
    assert install.mismatches("Successfully installed numpy") == []


def test_pip_failures_are_told_apart(tmp_path):
    network = (
        "WARNING: Retrying ... Max retries exceeded with url: /packages/x.whl (Caused by NewConnectionError)"
    )
    error = install.pip_failure(network, "cpu", "cpu.txt", "https://mirror.example/simple/", tmp_path)
    assert "failed on the network" in str(error) and "https://mirror.example/simple/" in str(error)
    other = install.pip_failure("ERROR: something else\n", "cpu", "cpu.txt", "https://x/", tmp_path)
    assert str(other) == "package set cpu: pip failed: ERROR: something else"


@pytest.mark.parametrize(("machine", "version"), [("aarch64", (3, 11)), ("x86_64", (3, 12))])
def test_a_base_image_the_wheels_are_not_for_is_refused(machine, version):
    with pytest.raises(install.SetupError, match="set baseImage to a Python 3.11 image") as failed:
        install.check_python(machine, version)
    assert failed.value.code == install.EXIT_USAGE


def test_the_sample_is_joined_once_from_its_pieces(tmp_path):
    files = {"a.gz": b"x" * 10, "b.gz": b"y" * 3}
    parts = tmp_path / "parts"
    parts.mkdir()
    for group in bundle.split_parts(files, limit=4):
        for name, data in group.items():
            (parts / name).write_bytes(data)
    dest = tmp_path / "sample" / "h"
    assert install.join_sample(parts, dest) is True
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == files
    assert install.join_sample(parts, dest) is False
    (parts / "a.gz.part-1").unlink()
    with pytest.raises(install.SetupError, match=r"a.gz has pieces \[0, 2\]"):
        install.join_sample(parts, tmp_path / "sample" / "other")
    assert sorted(p.name for p in dest.parent.iterdir()) == ["h"]


def test_main_prints_the_cost_and_ends_with_the_reason(index, tmp_path, capsys):
    url, wheel, lock = index
    dest = tmp_path / "packages"
    assert install.main(["--dest", str(dest), "--index_url", url, "--lock", f"tinypkg={lock}"]) == 0
    out = capsys.readouterr().out
    assert "package set tinypkg: installed into" in out and "MB on the volume" in out
    assert "install-measure {" in out
    make_wheel(wheel, body="VALUE = 2\n")
    (lock.parent / "changed.txt").write_text(lock.read_text() + "\n")
    code = install.main(
        ["--dest", str(dest), "--index_url", url, "--lock", f"tinypkg={lock.parent / 'changed.txt'}"]
    )
    assert code == install.EXIT_FAILED
    assert (
        capsys.readouterr().err.strip().splitlines()[-1].startswith("trainer.install: package set tinypkg:")
    )


def test_runs_as_a_module_with_the_standard_library_alone(tmp_path):
    # The setup Job runs it on a base image with no package installed: -S drops site-packages.
    done = subprocess.run(
        [sys.executable, "-S", "-m", "trainer.install", "--help"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "--index_url" in done.stdout
