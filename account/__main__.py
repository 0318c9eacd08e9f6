"""Entry point of the account project (account/Pulumi.yaml): import path, then run.

The language host runs this directory as the program, so the repository root (holding the
``account`` package) is not on ``sys.path``; put it there, as infra/__main__.py does.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from account.program import run  # noqa: E402

run()
