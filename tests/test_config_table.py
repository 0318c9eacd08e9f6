"""docs/configuration.md's table of every key is the one scripts/config_table.py generates from KEYS."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra.settings import KEYS

REPO = Path(__file__).resolve().parents[1]


def _load_config_table():
    # scripts/ is not a package: load the script by path, as `python scripts/config_table.py` runs it.
    spec = importlib.util.spec_from_file_location("config_table", REPO / "scripts" / "config_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ct = _load_config_table()


def test_the_docs_table_is_the_generated_one():
    page = (REPO / "docs" / "configuration.md").read_text()
    assert ct.current_table(page) == ct.render(), (
        "docs/configuration.md's key table differs from the key table: run .venv/bin/python scripts/config_table.py --write"
    )


def test_one_row_per_key_in_the_key_tables_order():
    rows = ct.render().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{k.name}`" for k in KEYS]
    assert len(rows) == len(KEYS) > 60
    # Four cells in every row: a '|' that no backslash escapes ends a cell.
    assert all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows), rows


def _row(name: str) -> list[str]:
    for row in ct.render().splitlines():
        if row.startswith(f"| `{name}` |"):
            return [cell.strip() for cell in row.strip("|").split(" | ")]
    raise AssertionError(f"no row for {name}")


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("worker.number", "`2`"),
        ("hyperparams.learningrate", "`0.004`"),
        ("mountPath", "`/data`"),
        ("createNamespace", "unset"),
        ("namespace", "`tf-mnist`"),
        ("nas.retainOnDestroy", "`true`"),
        ("persistence.pvc.matchLabels", '`{"train": "mnist"}`'),
        (
            "gpuPool.instanceTypes",
            '`["ecs.gn5-c4g1.xlarge", "ecs.gn6i-c4g1.xlarge", "ecs.gn6i-c8g1.2xlarge", "ecs.gn6v-c8g1.2xlarge"]`',
        ),
        ("cluster.networkPlugin", "unset"),
        ("nas.storageType", "unset"),
        ("worker.tolerations", "`[]`"),
        ("worker.nodeSelector", "`{}`"),
        ("zone", "unset"),
    ],
)
def test_defaults_as_pulumi_config_set_takes_them(name, default):
    assert _row(name)[1] == default


def test_secret_column_marks_exactly_the_secret_capable_keys():
    marked = {k.name for k in KEYS if _row(k.name)[2] == "yes"}
    assert marked == {
        "kubeconfig",
        "nas.mountTargetDomain",
        "nfs.server",
        "nfs.path",
        "data.source",
        "registryCredentials.server",
        "registryCredentials.username",
        "registryCredentials.password",
    }


def test_cells_escape_pipes_newlines_and_tags_outside_code():
    key = SimpleNamespace(
        name="a.b", default="x|y", description="one | two\nthree <reg>/`<kept>`", secret=False
    )
    row = ct.render([key]).splitlines()[2]
    assert row == "| `a.b` | `x\\|y` |  | one \\| two three &lt;reg>/`<kept>` |"
    assert _row("worker.image")[3].startswith(
        "Your own worker image; unset = &lt;imageRegistry>/trainer:2.21.0-gpu"
    )


def test_with_table_replaces_only_between_the_markers():
    text = f"intro\n{ct.BEGIN}\nold table\n{ct.END}\noutro\n"
    new = ct.with_table(text, "| t |\n")
    assert new == f"intro\n{ct.BEGIN}\n| t |\n{ct.END}\noutro\n"
    assert ct.with_table(new, "| t |\n") == new
    assert ct.current_table(new) == "| t |\n"


@pytest.mark.parametrize(
    "text", ["no markers\n", f"{ct.BEGIN}\n{ct.BEGIN}\n{ct.END}\n", f"{ct.END}\nx\n{ct.BEGIN}\n"]
)
def test_missing_doubled_or_swapped_markers_are_refused(text):
    with pytest.raises(ct.MarkerError, match="config-table"):
        ct.with_table(text, "| t |\n")


def test_the_readmes_few_keys_are_keys_with_their_generated_defaults():
    # The README lists the keys most users set; each must exist, with the default the full
    # table (docs/configuration.md) gives it.
    readme = (REPO / "README.md").read_text()
    start = readme.index("## The keys most users set")
    section = readme[start : readme.index("\n## ", start + 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10, section
    for line in rows:
        name, default = [cell.strip() for cell in line.strip().strip("|").split(" | ")][:2]
        assert _row(name.strip("`"))[1] == default, line
