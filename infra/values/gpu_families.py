"""What the stack knows of Alibaba Cloud's NVIDIA GPU instance families: the GPU, the system
disk categories an instance takes, and the last NVIDIA driver branch for that GPU; and what a
GPU node pool is made of by default (instance types, driver, OS image) and at most (GPUs).

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
#: The system disk categories a node pool may ask for.
SYSTEM_DISK_CATEGORIES = (ULTRA, SSD, ESSD)

#: The GPU pool's instance types, tried in order for each node (ACK node pools: "it will try to
#: purchase from the first specification until it is created successfully"). Every one has one
#: GPU (so gpuPool.gpusPerInstance 1 holds whichever comes), takes the ultra disk
#: (gpuPool.systemDiskCategory cloud_efficiency; gn7i and newer take ESSD only, GN5 no ESSD) and
#: runs the pinned driver branch R550 (GPU_DRIVER_VERSION). GN5 (P100) stays first because the
#: guide names it and measured its numbers on it; it is an outdated family that is often sold out
#: or no longer offered in a zone, and then the pool takes the next type instead of failing after
#: the network, cluster, CPU pool and NAS exist: T4 (gn6i: 4 vCPU and 15 GiB hold a worker's
#: 2 CPU and 8 GiB), then a larger T4, then V100 (gn6v). Put a current type first to prefer it.
DEFAULT_GPU_INSTANCE_TYPES = (
    "ecs.gn5-c4g1.xlarge",
    "ecs.gn6i-c4g1.xlarge",
    "ecs.gn6i-c8g1.2xlarge",
    "ecs.gn6v-c8g1.2xlarge",
)
#: The NVIDIA driver of new GPU nodes, pinned with ACK's node pool label
#: ``ack.aliyun.com/nvidia-driver-version``: without it ACK installs its current default, which
#: ACK changes over time and which could one day be a branch after R580, the last to support
#: GN5's P100 (and gn6v's V100). R550 is the branch ACK recommends (its fixes for XID 119/120/31 errors), drives P100, V100, T4 and A10,
#: and, a CUDA 12.4 driver, runs the GPU image's CUDA 12.9 wheels through CUDA 12's minor-version
#: compatibility (docker/trainer-gpu.Dockerfile); 550.163.01 is the newest 550 release in ACK's list
#: of supported driver versions (ACK installs its default for any version not listed).
GPU_DRIVER_VERSION = "550.163.01"
#: Node OS images a GPU pool may use: ACK's own Linux images, on which it installs the driver
#: that the driver label names.
GPU_IMAGE_TYPES = ("AliyunLinux3", "AliyunLinux3ContainerOptimized", "ContainerOS", "Ubuntu")
#: The most GPUs of one pod (worker.gpuCount) and of one GPU node (gpuPool.gpusPerInstance): a
#: pod's GPUs come from one node, and no Alibaba Cloud GPU instance type has more than 8 (the
#: largest types of gn5, gn6v, gn6e, gn7 and gn7e, such as ecs.gn5-c8g1.14xlarge with 8 P100 and
#: ecs.gn6v-c10g1.20xlarge with 8 V100; gn6i and gn7i have at most 4), so a larger request
#: would stay Pending on every node (the policy pack holds every container to it too). To go
#: further (a cluster of 16-GPU nodes), raise it.
MAX_GPUS_PER_INSTANCE = 8


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
