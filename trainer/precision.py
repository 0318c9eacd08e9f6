"""``--precision``: the number format of the training arithmetic.

float32 throughout, or Keras' ``mixed_bfloat16`` policy: the layers compute in bfloat16
(8 exponent bits like float32, so no loss scaling is needed) while the weights, the
optimizer and the loss stay float32. On a CPU with native bfloat16 (Intel AMX-BF16 or
AVX512-BF16), oneDNN runs the convolutions and matrix products in it: faster than float32,
to the same test accuracy (docs/benchmarks.md has the figures). Where the
CPU lacks it, bfloat16 is emulated and slower than float32, and the GPUs of the stack's GN5
nodes (Tesla P100) have no bfloat16 either: ``auto`` picks it only on such a CPU with no GPU,
and only where oneDNN runs with that ISA (TF_ENABLE_ONEDNN_OPTS on, ONEDNN_MAX_CPU_ISA not
capped below it): Eigen's kernels and oneDNN's capped ones emulate bfloat16.

Evaluation and the exported model stay float32 (trainer.training.run builds them apart).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from trainer.cpu_kernels import onednn_requested

FLOAT32 = "float32"
MIXED_BFLOAT16 = "mixed_bfloat16"
#: Linux /proc/cpuinfo flags of native bfloat16 arithmetic (Intel AMX tiles, AVX-512 BF16).
NATIVE_BFLOAT16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
#: ONEDNN_MAX_CPU_ISA values below oneDNN's first ISA with bfloat16 arithmetic
#: (AVX512_CORE_BF16; oneDNN's "CPU Dispatcher Control" lists the values).
ISAS_WITHOUT_BFLOAT16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI"})


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags as Linux lists them (the first ``flags`` line), or an empty
    set where the file is missing or has none (another OS)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return set(value.split())
    return set()


def resolve(
    precision: str, has_gpu: bool, flags: set[str] | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """The Keras dtype policy name for ``--precision`` (one of
    trainer.contract.recipe.PRECISIONS): ``auto`` is mixed_bfloat16 on a CPU with native
    bfloat16 (``flags``, default this machine's) when ``has_gpu`` is False and oneDNN runs
    with its bfloat16 kernels (``environ``, default this process's: TF_ENABLE_ONEDNN_OPTS
    on, ONEDNN_MAX_CPU_ISA unset or not in ISAS_WITHOUT_BFLOAT16), else float32; the others
    are themselves."""
    if precision != "auto":
        return precision
    env = os.environ if environ is None else environ
    capped = env.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() in ISAS_WITHOUT_BFLOAT16
    if has_gpu or capped or not onednn_requested(env):
        return FLOAT32
    native = NATIVE_BFLOAT16_FLAGS & (cpu_flags() if flags is None else flags)
    return MIXED_BFLOAT16 if native else FLOAT32
