"""Fixtures for the infra tests: the dev stack's config in the forms the CLI hands a program."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mock_engine as me  # noqa: E402


@pytest.fixture
def dev_config() -> dict:
    """Pulumi.dev.yaml (structured, as `--path` writes it) plus Pulumi.yaml defaults, engine form."""
    return me.engine_form(me.with_cli_defaults(me.stack_config("dev")))


@pytest.fixture
def checks():
    """A Checks whose every registered assertion must have run by the end of the test."""
    made = me.Checks()
    yield made
    made.verify()
