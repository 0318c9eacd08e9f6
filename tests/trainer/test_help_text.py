"""``--help`` of ``python -m trainer`` and ``python -m trainer.local`` shows the defaults each
command's parser uses: the one recipe for both."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from trainer import flags
from trainer.contract import recipe
from trainer.launcher.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
#: Flags whose help describes the default instead of printing it (an absolute path, "a free
#: port") or that have none (a switch).
DESCRIBED = {"data_dir", "tensorboard_port", "tensorboard"}


def _help(module: str) -> dict[str, str]:
    """``python -m <module> --help``, as {flag's dest: its help text on one line}."""
    proc = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    entries: dict[str, str] = {}
    current = None
    for line in proc.stdout.split("options:", 1)[1].splitlines():
        match = re.match(r"^  --(\w+)", line)
        if match:
            current = match[1]
            entries[current] = line[match.end() :]
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
    return {dest: " ".join(text.split()) for dest, text in entries.items()}


def _defaults_shown(text: str) -> list[str]:
    """The values a help text gives as its default: ``(default X)`` or ``(default X; ...)``."""
    return re.findall(r"\(default:? ([^);]+)[);]", text)


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_both_helps_show_the_one_recipe():
    # The launcher and the task take the one recipe of trainer/contract/recipe.py.
    expected = {
        "epochs": ["2"],
        "batch_size": ["64"],
        "learning_rate": ["0.004"],
        "model": ["convnet_fc_slim"],
        "optimizer": ["adam"],
        "lr_schedule": ["warmup_cosine"],
        "lr_scaling": ["sqrt"],
        "dropout": ["0.1"],
        "label_smoothing": ["0.1"],
        "augment_shift": ["0"],
        "seed": ["42"],
        "precision": ["auto"],
        "local_steps": ["50"],
    }
    for module in ("trainer", "trainer.local"):
        shown = _help(module)
        assert {dest: _defaults_shown(shown[dest]) for dest in expected} == expected, module
        # And every row, a newer one too, shows its default.
        assert all(
            _defaults_shown(shown[row.dest]) == [_shown(row.default)] for row in recipe.HYPERPARAMETERS
        )


def test_every_flag_s_help_shows_the_default_its_parser_uses():
    for module, parser in (("trainer", flags.build_parser()), ("trainer.local", build_parser())):
        shown = _help(module)
        actions = [a for a in parser._actions if a.dest != "help" and a.dest not in DESCRIBED]
        assert sorted(shown) == sorted(a.dest for a in parser._actions if a.dest != "help")
        for action in actions:
            expected = _shown(action.default)
            if action.dest == "run_id" and module == "trainer.local":
                # A fresh id per launch, so one made by another process.
                assert re.fullmatch(
                    r"'local-\d{8}-\d{6}-[0-9a-f]{6}'", _defaults_shown(shown["run_id"])[0]
                ), shown["run_id"]
                continue
            if action.dest == "run_id":
                expected = "''"
            assert _defaults_shown(shown[action.dest]) == [expected], (module, action.dest)
