"""The key table as users read it (config_table_markdown) and as Settings uses it (every key
reaches a section)."""

from __future__ import annotations

import re

from infra import settings as st
from infra.settings.derive import assemble, resolve
from infra.settings.keys import config_table_markdown
from infra.settings.read import Reading

#: A cell separator of a GitHub table row: a '|' that no backslash escapes.
CELL = re.compile(r"(?<!\\)\|")


def _rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in CELL.split(line)[1:-1]] for line in table.splitlines()]


def test_config_table_lists_every_key_once_in_table_order():
    table = config_table_markdown()
    assert table.endswith("\n")
    header, rule, *rows = _rows(table)
    assert header == ["Key", "Type", "Default", "Description"]
    assert rule == ["---"] * 4
    assert [row[0] for row in rows] == [f"`{key.name}`" for key in st.KEYS]
    assert all(len(row) == 4 for row in rows), [row for row in rows if len(row) != 4]


def test_config_table_rows_show_type_default_and_description():
    lines = config_table_markdown().splitlines()

    def row(name: str) -> str:
        return next(line for line in lines if line.startswith(f"| `{name}` |"))

    assert (
        row("worker.number")
        == "| `worker.number` | integer | `2` | Number of worker tasks (1 to 32; each GPU worker is a GPU node). |"
    )
    assert row("hyperparams.learningrate") == (
        "| `hyperparams.learningrate` | number | `0.004` | Learning rate (\\> 0), the peak one with the "
        "warmup_cosine schedule; trainer --learning_rate. |"
    )
    assert row("persistence.pvc.matchLabels") == (
        '| `persistence.pvc.matchLabels` | map | `{"train":"mnist"}` | Labels on the PV that the PVC selects. |'
    )
    assert row("gpuPool.instanceTypes") == (
        '| `gpuPool.instanceTypes` | list | `["ecs.gn5-c4g1.xlarge","ecs.gn6i-c4g1.xlarge","ecs.gn6i-c8g1.2xlarge",'
        '"ecs.gn6v-c8g1.2xlarge"]` | GPU instance types, tried in order for each node (the guide\'s GN5 first, then '
        "T4 and V100 types with one GPU each, should GN5 be sold out). |"
    )
    assert row("createNamespace").startswith("| `createNamespace` | boolean | unset | ")
    # No default; '<' would start an HTML tag, so it is escaped.
    assert row("tensorboard.image") == (
        "| `tensorboard.image` | string | unset | Your own TensorBoard image; unset = \\<imageRegistry\\>/tensorboard:2.21.0 "
        "with imageRegistry set, else baseImage with TensorBoard's packages. |"
    )
    assert row("gpuPool.size").startswith("| `gpuPool.size` | integer | unset | ")


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
