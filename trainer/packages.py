"""The packages a task imports beyond the standard library (trainer/requirements.txt), and the
error that says how to get them when the Python running it lacks one."""

from __future__ import annotations

import importlib.util
import sys

#: The top-level modules the tasks import: NumPy (the data), TensorFlow and Keras (the
#: rest); tensorflow-cpu, in trainer/requirements.txt, installs all three.
TASK_MODULES = ("numpy", "tensorflow", "keras")


def first_missing(modules: tuple[str, ...] = TASK_MODULES) -> tuple[str, str] | None:
    """(module, why) for the first of ``modules`` that this Python cannot find, looked up
    without importing any (``importlib.util.find_spec``); None when all are there."""
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                return name, f"No module named {name!r}"
        except (ImportError, ValueError) as err:
            return name, str(err)
    return None


def missing_package_message(module: str, why: str, command: str) -> str:
    """The error of ``command`` (``python -m trainer.local``, say) run by a Python that cannot
    import ``module`` for the reason ``why``: which Python, and the two fixes."""
    return (
        f"{sys.executable} cannot import {module} ({why}), which the trainer needs: run "
        f"it with the project's virtual environment, `.venv/bin/{command} ...` from the "
        "repository root (`bash scripts/bootstrap.sh` creates .venv), or install "
        "trainer/requirements.txt into this Python"
    )


def import_error_message(err: ImportError, command: str) -> str:
    """``missing_package_message`` for an ImportError raised while ``command`` ran."""
    return missing_package_message(err.name or "a module", str(err), command)
