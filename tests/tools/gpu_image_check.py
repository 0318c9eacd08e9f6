"""Runs inside the GPU trainer image (tests/tools/test_gpu_image.py passes this file's text to
``python -c``) and prints one JSON object of facts on its last line; the test asserts them.
Standard library, TensorFlow and what the image holds only; no GPU and no driver needed.

Facts: the process's uid and gid, the NVIDIA_* environment, TensorFlow's version, whether it
is built with CUDA, its build info (CUDA version, compute capabilities), the GPUs it lists,
each CUDA/cuDNN library of the nvidia wheels (path, whether ctypes loads it, the error if
not), the versions the loaded libraries report (cudaRuntimeGetVersion, cudnnGetVersion,
cublasGetProperty), the SASS architectures in cuDNN's kernel libraries (``sm_NN`` machine code
in their ``.nv_fatbin`` ELF sections), and ``python -m trainer --help``'s exit status.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

#: (wheel directory under nvidia/, soname), in an order where each library's dependencies of
#: the same set load first (RTLD_GLOBAL makes them visible to the next ones).
LIBRARIES = (
    ("cuda_runtime", "libcudart.so.12"),
    ("nvjitlink", "libnvJitLink.so.12"),
    ("cublas", "libcublasLt.so.12"),
    ("cublas", "libcublas.so.12"),
    ("cusparse", "libcusparse.so.12"),
    ("cusolver", "libcusolver.so.11"),
    ("cufft", "libcufft.so.11"),
    ("curand", "libcurand.so.10"),
    ("nccl", "libnccl.so.2"),
    ("cudnn", "libcudnn_graph.so.9"),
    ("cudnn", "libcudnn.so.9"),
    ("cudnn", "libcudnn_ops.so.9"),
    ("cudnn", "libcudnn_cnn.so.9"),
)
#: cuDNN's libraries whose kernels TensorFlow's convolutions and pooling run.
SASS_LIBRARIES = ("libcudnn_ops.so.9", "libcudnn_cnn.so.9")
FATBIN_MAGIC = 0xBA55ED50
FATBIN_ELF = 2


def fatbin_sass(path: Path) -> list[str]:
    """The ``sm_NN`` architectures of the machine code (ELF entries, not PTX) in the
    ``.nv_fatbin`` sections of the ELF shared library ``path``, sorted.

    Layout (CUDA's fat binary container): a 16-byte header (u32 magic 0xBA55ED50, u16
    version, u16 header size, u64 payload size), then entries of u16 kind (1 PTX, 2 ELF),
    u16 version, u32 header size, u32 padded payload size, ..., u32 SM version at offset 28.
    """
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    found: set[str] = set()
    for header in headers:
        name = data[names + header[0] : data.index(b"\0", names + header[0])]
        if name != b".nv_fatbin":
            continue
        pos, end = header[4], header[4] + header[5]
        while pos + 16 <= end:
            magic, _, header_size, size = struct.unpack_from("<IHHQ", data, pos)
            if magic != FATBIN_MAGIC:
                pos += 8  # containers are 8-byte aligned within the section
                continue
            entry, entries_end = pos + header_size, pos + header_size + size
            while entry < entries_end:
                kind, _, entry_header, padded = struct.unpack_from("<HHII", data, entry)
                (sm,) = struct.unpack_from("<I", data, entry + 28)
                if kind == FATBIN_ELF:
                    found.add(f"sm_{sm}")
                entry += entry_header + padded
            pos = entries_end
    return sorted(found, key=lambda arch: int(arch[3:]))


def load_libraries() -> tuple[dict[str, dict], dict[str, ctypes.CDLL]]:
    """Each library of LIBRARIES: its path, whether it exists and loads, the error if not."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec else []
    facts: dict[str, dict] = {}
    loaded: dict[str, ctypes.CDLL] = {}
    for directory, soname in LIBRARIES:
        path = next(
            (
                Path(root) / directory / "lib" / soname
                for root in roots
                if (Path(root) / directory / "lib" / soname).exists()
            ),
            None,
        )
        fact: dict = {"path": str(path) if path else None, "loaded": False, "error": None}
        if path is None:
            fact["error"] = f"not found under {roots}"
        else:
            try:
                loaded[soname] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                fact["loaded"] = True
            except OSError as err:
                fact["error"] = str(err)
        facts[soname] = fact
    return facts, loaded


def library_versions(loaded: dict[str, ctypes.CDLL]) -> dict[str, int | None]:
    """The versions the libraries report without a GPU: CUDA runtime (1000 * major + 10 *
    minor), cuDNN (10000 * major + 100 * minor + patch), cuBLAS's major version."""
    out: dict[str, int | None] = {"cudart": None, "cudnn": None, "cublas_major": None}
    if "libcudart.so.12" in loaded:
        value = ctypes.c_int(0)
        if loaded["libcudart.so.12"].cudaRuntimeGetVersion(ctypes.byref(value)) == 0:
            out["cudart"] = value.value
    if "libcudnn.so.9" in loaded:
        get = loaded["libcudnn.so.9"].cudnnGetVersion
        get.restype = ctypes.c_size_t
        out["cudnn"] = int(get())
    if "libcublas.so.12" in loaded:
        value = ctypes.c_int(0)
        if loaded["libcublas.so.12"].cublasGetProperty(0, ctypes.byref(value)) == 0:  # MAJOR_VERSION
            out["cublas_major"] = value.value
    return out


def main() -> None:
    facts: dict = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "env": {k: os.environ.get(k) for k in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")},
    }
    facts["libraries"], loaded = load_libraries()
    facts["versions"] = library_versions(loaded)
    facts["sass"] = {
        name: fatbin_sass(Path(facts["libraries"][name]["path"]))
        for name in SASS_LIBRARIES
        if facts["libraries"][name]["path"]
    }
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    facts["tensorflow"] = {
        "version": tf.__version__,
        "built_with_cuda": tf.test.is_built_with_cuda(),
        "cuda_version": info.get("cuda_version"),
        "cudnn_version": info.get("cudnn_version"),
        "compute_capabilities": list(info.get("cuda_compute_capabilities", [])),
    }
    facts["gpus"] = [device.name for device in tf.config.list_physical_devices("GPU")]
    help_run = subprocess.run(
        [sys.executable, "-m", "trainer", "--help"], capture_output=True, text=True, cwd="/app", timeout=300
    )
    facts["trainer_help"] = {
        "rc": help_run.returncode,
        "stdout_head": help_run.stdout[:200],
        "stderr_tail": help_run.stderr[-2000:],
    }
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
