"""Unit tests of the tools' Python packages: no cluster, no root, no network.

tools/local-cluster is not an importable name (the hyphen), so its package directory goes on
sys.path here, as the tool's own launcher puts it on PYTHONPATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

LOCAL_CLUSTER_DIR = Path(__file__).resolve().parents[2] / "tools" / "local-cluster"
if str(LOCAL_CLUSTER_DIR) not in sys.path:
    sys.path.insert(0, str(LOCAL_CLUSTER_DIR))
