"""Entry point of the Pulumi program (Pulumi.yaml ``main: infra``): import path, then run.

With ``main: infra`` the language host runs this directory as the program, so the repository
root (holding the ``infra`` and ``trainer`` packages) is not on ``sys.path``; put it there.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from infra.program import run  # noqa: E402

run()
