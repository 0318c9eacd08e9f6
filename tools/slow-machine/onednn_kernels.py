"""Which kernels oneDNN runs for the trainer's model here: the ISA line and each primitive's
implementation name, from one training step of convnet_fc_slim under ONEDNN_VERBOSE=1.

    tools/slow-machine/slow-machine --check      (under the stand-in: every kernel says avx2)
    .venv/bin/python tools/slow-machine/onednn_kernels.py       (this machine as it is)

Prints ``isa: ...`` (oneDNN's own line, e.g. "Intel AVX2 with ...") and one line per distinct
(primitive, implementation), e.g. ``convolution brg_conv_fwd:avx2``. Exit status 1 when
ONEDNN_MAX_CPU_ISA is AVX2 and some implementation names an AVX-512 or AMX kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEP = """
import numpy as np, tensorflow as tf
from trainer.model import build_model
model = build_model("convnet_fc_slim", 0.1)
x = tf.constant(np.random.default_rng(0).random((64, 28, 28, 1), dtype=np.float32))
y = tf.constant(np.arange(64) % 10)
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
tape.gradient(loss, model.trainable_variables)
"""


def main() -> int:
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", STEP], env=env, capture_output=True, text=True, check=True
    ).stdout
    isa = ""
    kernels: Counter[tuple[str, str]] = Counter()
    for line in out.splitlines():
        fields = line.split(",")
        if not line.startswith("onednn_verbose"):
            continue
        if "info" in fields and any(f.startswith("isa:") for f in fields):
            isa = next(f for f in fields if f.startswith("isa:"))[4:]
        elif "exec" in fields and "cpu" in fields:
            at = fields.index("cpu")
            kernels[(fields[at + 1], fields[at + 2])] += 1
    print(f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset)')}")
    print(f"isa: {isa or '(oneDNN printed no isa line)'}")
    for (primitive, impl), count in sorted(kernels.items()):
        print(f"{primitive} {impl} x{count}")
    wide = [impl for (_, impl) in kernels if "avx512" in impl or "amx" in impl]
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2" and wide:
        print(f"ERROR: kernels beyond AVX2 ran under ONEDNN_MAX_CPU_ISA=AVX2: {sorted(set(wide))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
