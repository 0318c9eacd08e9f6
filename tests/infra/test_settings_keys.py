"""The schema (infra/settings/config.py) gives every key once: its name from its section and
field, its value at that field of the config, and the Settings are the config."""

from __future__ import annotations

import dataclasses

import pytest

from infra import settings as st
from infra.settings.keys import build, camel, key, keys_of, part
from infra.settings.model import Settings


def _at(config: object, path: tuple[str, ...]) -> object:
    value = config
    for name in path:
        value = value[name] if isinstance(value, dict) else getattr(value, name)
    return value


def test_every_key_has_a_field_that_holds_its_value():
    values = {key.name: key.default for key in st.KEYS}
    config = build(st.Config, values)
    assert [key.name for key in st.KEYS if _at(config, key.path) != key.default] == []
    assert len(st.KEYS) == len(st.KEYS_BY_NAME) > 90


def test_a_key_is_its_section_prefix_and_its_field_in_camel_case():
    names = {key.path: key.name for key in st.KEYS}
    assert names[("worker", "gpu_count")] == "worker.gpuCount"
    assert names[("cpu_pool", "size")] == "cpuPool.size"
    assert names[("pvc", "match_labels")] == "persistence.pvc.matchLabels"
    assert names[("cluster_identifier",)] == "clusterIdentifier"
    assert names[("hyperparams", "learning_rate")] == "hyperparams.learningrate"
    assert camel("gpus_per_instance") == "gpusPerInstance"


def test_the_settings_are_the_config_and_what_comes_of_it():
    config_fields = [f.name for f in dataclasses.fields(st.Config)]
    assert [f.name for f in dataclasses.fields(Settings)][: len(config_fields)] == config_fields


@dataclasses.dataclass(frozen=True)
class _Section:
    count: int = key(2, lambda raw: int(raw), "Count.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Root:
    section: _Section = part("a.b")


def test_a_new_section_field_is_a_new_key():
    (key,) = keys_of(_Root)
    assert (key.name, key.default, key.fix, key.path) == ("a.b.count", 2, "2", ("section", "count"))
    assert build(_Root, {"a.b.count": 5}) == _Root(section=_Section(count=5))


def test_a_key_without_a_scalar_default_names_its_fix():
    with pytest.raises(ValueError, match="needs a fix example"):
        key(None, str, "No default.")
