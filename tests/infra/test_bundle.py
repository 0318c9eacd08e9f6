"""infra/bundle.py: the content names of the trainer's code, its sample and the package sets,
and the pieces that fit ConfigMaps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra import bundle


def copy_project(tmp_path: Path) -> Path:
    """trainer/ and docker/ of the repository, copied under ``tmp_path``."""
    for part in ("trainer", "docker"):
        shutil.copytree(bundle.REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_code_is_every_trainer_module():
    files = bundle.code_files()
    assert (
        "trainer/__init__.py" in files
        and "trainer/install.py" in files
        and "trainer/contract/recipe.py" in files
    )
    assert all(path.endswith(".py") for path in files)
    assert len({bundle.config_map_key(p) for p in files}) == len(files)
    assert sum(map(len, files.values())) <= bundle.CONFIG_MAP_BYTES


def test_a_changed_module_changes_the_code_hash_only(tmp_path):
    root = copy_project(tmp_path)
    code, sample, cpu = bundle.code_hash(root), bundle.sample_hash(root), bundle.lock_hash("cpu", root)
    with (root / "trainer" / "model.py").open("a") as module:
        module.write("# changed\n")
    bundle.code_hash.cache_clear()
    assert bundle.code_hash(root) != code
    assert (bundle.sample_hash(root), bundle.lock_hash("cpu", root)) == (sample, cpu)
    assert len(code) == bundle.HASH_DIGITS


def test_a_changed_requirement_file_is_a_new_package_folder(tmp_path):
    root = copy_project(tmp_path)
    before = bundle.package_folder("/data/packages", "gpu", root)
    with (root / bundle.PACKAGE_FILES["gpu"]).open("a") as lock:
        lock.write("\n")
    bundle.lock_hash.cache_clear()
    after = bundle.package_folder("/data/packages", "gpu", root)
    assert before != after and after.startswith("/data/packages/gpu-")


def test_the_sample_is_cut_to_fit_configmaps_and_joins_back():
    files = bundle.sample_files()
    assert max(map(len, files.values())) > bundle.CONFIG_MAP_BYTES  # the reason for pieces
    groups = bundle.split_parts(files)
    assert all(sum(map(len, g.values())) <= bundle.CONFIG_MAP_BYTES for g in groups)
    pieces = {k: v for g in groups for k, v in g.items()}
    for name, data in files.items():
        count = len([k for k in pieces if k.startswith(f"{name}.part-")])
        assert b"".join(pieces[f"{name}.part-{i}"] for i in range(count)) == data


def test_split_parts_refuses_a_limit_of_nothing():
    with pytest.raises(ValueError, match="limit 0: must be a positive number of bytes"):
        bundle.split_parts({"a": b"x"}, limit=0)


def test_code_too_large_for_its_configmap_is_refused(tmp_path, monkeypatch):
    root = copy_project(tmp_path)
    monkeypatch.setattr(bundle, "CONFIG_MAP_BYTES", 1000)
    with pytest.raises(ValueError, match="more than the 1000 of the code ConfigMap"):
        bundle.code_files(root)


def test_a_copy_without_the_sample_is_refused_by_its_path(tmp_path):
    root = copy_project(tmp_path)
    for sample in (root / bundle.SAMPLE_DIR).glob("*.gz"):
        sample.unlink()
    with pytest.raises(FileNotFoundError, match="the bundled sample, which staging copies, has no .gz file"):
        bundle.sample_files(root)
