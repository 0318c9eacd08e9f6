"""``python -m infra.status`` (infra/status/cli.py)."""

import sys

from infra.status.cli import main

sys.exit(main())
