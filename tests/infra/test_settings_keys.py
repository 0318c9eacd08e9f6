"""The key table as Settings uses it: every key reaches a section. (As users read it:
tests/test_config_table.py, on scripts/config_table.py's table.)"""

from __future__ import annotations

from infra import settings as st
from infra.settings.derive import assemble, resolve
from infra.settings.read import Reading


class _Recording(dict):
    """Key -> value, remembering every key read."""

    def __init__(self, values: dict) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, name: str):
        self.read.add(name)
        return super().__getitem__(name)


def test_every_key_reaches_the_settings():
    # A key that neither a section field (from_key) nor derive.py reads would be validated
    # and then ignored: adding one to KEYS needs its field too.
    read: set[str] = set()
    for overrides in ({}, {"kubeconfig": "/etc/kubeconfig", "clusterIdentifier": "my-cluster"}):
        values = _Recording({**{key.name: key.default for key in st.KEYS}, **overrides})
        reading = Reading(raw_config=None, values=values)  # type: ignore[arg-type]
        assemble(reading, resolve(values), "dev")
        read |= values.read
    assert sorted(set(st.KEYS_BY_NAME) - read) == []
