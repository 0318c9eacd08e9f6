"""Which CPU kernels TensorFlow runs: oneDNN's on every x86-64 CPU, not only the newest.

TensorFlow's Linux x86 wheels carry two sets of CPU kernels for convolutions and matrix
products: oneDNN's, which pick their instructions from CPUID at run time (AVX2, AVX-512,
AMX, ...), and Eigen's, compiled once for a baseline. TensorFlow turns oneDNN on by default
only on CPUs with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX (``DefaultOneDnnPolicy`` in
tensorflow/core/util/port.cc); on an AVX2-only CPU such as AMD EPYC Zen 3 it runs Eigen's.
For this trainer's models Eigen is the slow choice on such a CPU, and much slower still for
the distributed layout, which oneDNN's AVX2 kernels run at about one process's speed
(docs/benchmarks.md, "The slowest machine", has the figures). So ``prefer_onednn`` asks for oneDNN wherever
TensorFlow would run it at all: on x86-64 Linux, unless the user set TF_ENABLE_ONEDNN_OPTS
(their choice wins, "0" included).

TensorFlow reads the variable once, when it is imported: ``prefer_onednn`` runs from the
package's ``__init__`` so that every ``python -m trainer...`` command and the launcher's
fork server set it before their first ``import tensorflow``.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping

#: TensorFlow's switch for its oneDNN kernels ("1"/"true" on, "0"/"false" off).
ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"
#: The machines TensorFlow's wheels build oneDNN for (INTEL_MKL): x86-64 Linux.
ONEDNN_MACHINES = frozenset({"x86_64", "amd64"})


def prefer_onednn(environ: MutableMapping[str, str] | None = None, machine: str | None = None) -> bool:
    """Sets TF_ENABLE_ONEDNN_OPTS=1 in ``environ`` (default ``os.environ``) on x86-64 Linux
    (``machine``, default this one's) when it is not set. Returns whether it set it."""
    env = os.environ if environ is None else environ
    arch = (machine or platform.machine()).lower()
    if ONEDNN_SWITCH in env or arch not in ONEDNN_MACHINES or not sys.platform.startswith("linux"):
        return False
    env[ONEDNN_SWITCH] = "1"
    return True


def onednn_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether TF_ENABLE_ONEDNN_OPTS asks for oneDNN ("1" or "true", any case)."""
    env = os.environ if environ is None else environ
    return env.get(ONEDNN_SWITCH, "").strip().lower() in ("1", "true")
