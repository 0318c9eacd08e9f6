"""What the rules know of Alibaba Cloud's NVIDIA GPU instance families: the GPU, the system
disk categories an instance takes, and the last NVIDIA driver branch for that GPU.

Sources: Alibaba Cloud's ECS reference of GPU-accelerated compute-optimized families (the
storage line of gn6i, gn6v, gn6e: ESSD, standard SSD and ultra disk; of gn7, gn7e, gn7i: ESSD
only); GN5, an outdated family missing from that page, takes standard SSD and ultra disk only
(Alibaba Cloud's ECS reference of retired instance families). R580 is the last NVIDIA driver branch that supports Pascal
(P100) and Volta (V100); CUDA 13 drops both. A family not listed here passes every rule:
ACK decides at `pulumi up`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ECS system disk categories: ultra disk, standard SSD, ESSD.
ULTRA, SSD, ESSD = "cloud_efficiency", "cloud_ssd", "cloud_essd"
#: The system disk categories a GPU node pool may ask for.
GPU_SYSTEM_DISK_CATEGORIES = (ULTRA, SSD, ESSD)


@dataclass(frozen=True)
class GpuFamily:
    """One instance family.

    Attributes:
        gpu: the NVIDIA GPU, e.g. "P100".
        system_disks: the system disk categories its instances take.
        last_driver_branch: the last NVIDIA driver branch that supports the GPU (580 for
            Pascal and Volta); None while NVIDIA has announced no end.
    """

    gpu: str
    system_disks: tuple[str, ...]
    last_driver_branch: int | None = None


GPU_FAMILIES: dict[str, GpuFamily] = {
    "gn5": GpuFamily("P100", (ULTRA, SSD), 580),
    "gn6i": GpuFamily("T4", (ULTRA, SSD, ESSD)),
    "gn6v": GpuFamily("V100", (ULTRA, SSD, ESSD), 580),
    "gn6e": GpuFamily("V100 32 GB", (ULTRA, SSD, ESSD), 580),
    "gn7i": GpuFamily("A10", (ESSD,)),
    "gn7": GpuFamily("A100", (ESSD,)),
    "gn7e": GpuFamily("A100 80 GB", (ESSD,)),
}


def family_of(instance_type: str) -> str:
    """The family of an ECS instance type: ``gn6i`` for ``ecs.gn6i-c4g1.xlarge``."""
    return instance_type.split(".")[1].split("-")[0]


def known_families(instance_types: tuple[str, ...]) -> dict[str, GpuFamily]:
    """The families of ``instance_types`` that GPU_FAMILIES knows, by instance type, in order."""
    return {t: GPU_FAMILIES[family_of(t)] for t in instance_types if family_of(t) in GPU_FAMILIES}
