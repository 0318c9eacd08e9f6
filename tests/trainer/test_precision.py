"""``--precision``: which arithmetic ``auto`` picks, and the bfloat16 network that training
runs beside the float32 one that is evaluated and exported."""

from __future__ import annotations

import os

import numpy as np
import pytest

from trainer import precision

AMX_CPU = {"fpu", "avx512f", "amx_bf16", "amx_tile"}
AVX512_BF16_CPU = {"fpu", "avx512f", "avx512_bf16"}
OLDER_CPU = {"fpu", "avx2", "avx512f"}


@pytest.mark.parametrize(
    "flags,has_gpu,expected",
    [
        (AMX_CPU, False, "mixed_bfloat16"),
        (AVX512_BF16_CPU, False, "mixed_bfloat16"),
        (OLDER_CPU, False, "float32"),
        (set(), False, "float32"),
        (AMX_CPU, True, "float32"),  # the GN5 nodes' P100 GPUs have no bfloat16
    ],
)
def test_auto_is_bfloat16_only_on_a_cpu_with_native_bfloat16_and_no_gpu(flags, has_gpu, expected):
    assert precision.resolve("auto", has_gpu, flags, environ=ONEDNN_ON) == expected


#: The environment the trainer sets on x86-64 Linux (trainer/cpu_kernels.py).
ONEDNN_ON = {"TF_ENABLE_ONEDNN_OPTS": "1"}


@pytest.mark.parametrize(
    "environ",
    [
        {"TF_ENABLE_ONEDNN_OPTS": "0"},  # Eigen's kernels: bfloat16 emulated
        {},  # TensorFlow's own default, which the trainer replaces on x86-64 Linux
        {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},  # the slowest machine's stand-in
        {"TF_ENABLE_ONEDNN_OPTS": "true", "ONEDNN_MAX_CPU_ISA": "avx512_core_vnni"},
    ],
)
def test_auto_is_float32_where_onednn_cannot_run_bfloat16_natively(environ):
    assert precision.resolve("auto", False, AMX_CPU, environ=environ) == "float32"


def test_auto_keeps_bfloat16_under_an_isa_cap_that_has_it():
    environ = {**ONEDNN_ON, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}
    assert precision.resolve("auto", False, AMX_CPU, environ=environ) == "mixed_bfloat16"


@pytest.mark.parametrize("given", ["float32", "mixed_bfloat16"])
def test_a_named_precision_is_kept_whatever_the_machine(given):
    assert precision.resolve(given, True, set()) == given
    assert precision.resolve(given, False, AMX_CPU) == given


def test_cpu_flags_are_read_from_the_first_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Xeon\nflags\t\t: fpu avx512f amx_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert precision.cpu_flags(cpuinfo) == {"fpu", "avx512f", "amx_bf16"}
    assert precision.cpu_flags(tmp_path / "missing") == set()


@pytest.mark.skipif(
    os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in precision.ISAS_WITHOUT_BFLOAT16
    and "avx512f" in precision.cpu_flags(),
    reason="oneDNN capped below bfloat16 on an AVX-512 CPU (tools/slow-machine): TensorFlow, reading "
    "CPUID, hands bfloat16 to oneDNN, which then has no kernel for it; a real AVX2-only CPU gets Eigen's",
)
def test_the_bfloat16_network_trains_the_float32_weights_with_float32_logits():
    import tensorflow as tf

    from trainer.model import build_model
    from trainer.packed import PackedWeights

    model = build_model("convnet_fc_slim", 0.25)
    compute = build_model("convnet_fc_slim", 0.25, dtype="mixed_bfloat16")
    assert [tuple(v.shape) for v in compute.trainable_variables] == [
        tuple(v.shape) for v in model.trainable_variables
    ]
    assert {v.dtype for v in compute.trainable_variables} == {"float32"}
    assert compute.layers[1].compute_dtype == "bfloat16"
    packing = PackedWeights(model, compute)
    flat = tf.constant(packing.initial_value())
    images = tf.random.stateless_uniform((16, 28, 28, 1), seed=(1, 2))
    with tf.GradientTape() as tape:
        tape.watch(flat)
        mixed = packing.logits(flat, images, training=False)
        total = tf.reduce_sum(mixed)
    gradient = tape.gradient(total, flat)
    assert mixed.dtype == tf.float32 and gradient.dtype == tf.float32
    assert gradient.shape == (packing.size,)
    exact = PackedWeights(model).logits(flat, images, training=False)
    # bfloat16 keeps 8 bits of mantissa: the logits agree to about 1% of their spread.
    spread = float(tf.reduce_max(exact) - tf.reduce_min(exact))
    assert float(tf.reduce_max(tf.abs(mixed - exact))) < 0.03 * spread
    assert not np.allclose(mixed.numpy(), exact.numpy(), rtol=0, atol=1e-6)  # it did compute in bf16
