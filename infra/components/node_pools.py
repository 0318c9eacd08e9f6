"""NodePools: the CPU node pool and the GPU node pool of an ACK cluster, created in turn."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from infra.components.tags import cloud_tags
from infra.settings.cloud import CpuPool, GpuPool
from infra.settings.cloud import NodePools as NodePoolsSection

#: Taint on GPU nodes so only pods that tolerate it (GPU workers) land there.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"
#: Node label naming the pool a node belongs to.
POOL_LABEL = "tf-mnist/pool"
#: ACK's node pool label that pins the NVIDIA driver ACK installs on a new GPU node (ACK:
#: "Specify an NVIDIA driver version for nodes by adding a label"; nodes already in the pool
#: keep theirs, and a version ACK does not support gets ACK's default).
DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"


def gpu_nodes(pool: GpuPool, gpu_pods: int, gpus_per_pod: int) -> int:
    """The GPU pool's nodes (its most, while it autoscales): gpuPool.size, else as many as
    ``gpu_pods`` pods of ``gpus_per_pod`` GPUs need, gpuPool.gpusPerInstance a node, at least 1."""
    if pool.size is not None:
        return pool.size
    return max(1, math.ceil(gpu_pods * gpus_per_pod / pool.gpus_per_instance))


@dataclass
class NodePoolsArgs:
    """The node pools of a cluster the stack manages (cpuPool.*, gpuPool.*, nodePools.keyName).

    Attributes:
        cluster_id: the ACK cluster.
        vswitch_id: the node vSwitch.
        cpu_pool: the CPU pool's keys (instance types tried in order, size, disk).
        gpu_pool: the GPU pool's keys; None = no GPU pool (no GPU workers).
        gpu_nodes: GPU nodes (the most, with ``gpu_pool.autoscaling``): ``gpu_nodes``.
        node_pools: what both pools share (the ECS key pair for node login, if any).
    """

    cluster_id: pulumi.Input[str]
    vswitch_id: pulumi.Input[str]
    cpu_pool: CpuPool
    gpu_pool: GpuPool | None
    gpu_nodes: int
    node_pools: NodePoolsSection


class NodePools(pulumi.ComponentResource):
    """Node pools of the training run.

    Children: ``cpu`` (ps, chief, TensorBoard, staging and CPU workers) and, when
    ``args.gpu_pool`` is not None, ``gpu`` (GPU workers: tainted, labelled with its pool and the
    pinned driver, of ``gpuPool.instanceTypes`` in order, autoscaled from 0 unless
    ``gpuPool.autoscaling`` is off). Both pools are tagged with the stack. ACK refuses to create
    two pools of one cluster at once ("cannot operate cluster where state is scaling"), so the
    GPU pool depends on the CPU pool.

    With ``gpuPool.autoscaling`` also ``autoscaler`` (alicloud.cs.AutoscalingConfig): a pool's
    scaling_config only marks it scalable; ACK scales it (from 0 too) only once the
    cluster's autoscaler is configured, which this resource does (cluster-autoscaler, scale
    up from zero, GPU nodes released when idle).

    Outputs:
        ready: the last pool's id (Kubernetes objects may depend on it).
    """

    cpu: alicloud.cs.NodePool
    gpu: alicloud.cs.NodePool | None
    autoscaler: alicloud.cs.AutoscalingConfig | None

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:NodePools", name, None, opts)
        self.cpu = alicloud.cs.NodePool(
            f"{name}-cpu",
            node_pool_name=f"{name}-cpu",
            cluster_id=args.cluster_id,
            vswitch_ids=[args.vswitch_id],
            instance_types=list(args.cpu_pool.instance_types),
            desired_size=str(args.cpu_pool.size),
            system_disk_category=args.cpu_pool.system_disk_category,
            system_disk_size=args.cpu_pool.system_disk_size,
            labels=[alicloud.cs.NodePoolLabelArgs(key=POOL_LABEL, value="cpu")],
            key_name=args.node_pools.key_name,
            install_cloud_monitor=False,
            tags=cloud_tags(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.gpu = None
        self.autoscaler = None
        if (gpu := args.gpu_pool) is not None:
            sizing: dict = (
                # Autoscaling from 0: idle GPU nodes are released and cost nothing.
                {
                    "scaling_config": alicloud.cs.NodePoolScalingConfigArgs(
                        enable=True, min_size=0, max_size=args.gpu_nodes, type="gpu"
                    )
                }
                if gpu.autoscaling
                else {"desired_size": str(args.gpu_nodes)}
            )
            self.gpu = alicloud.cs.NodePool(
                f"{name}-gpu",
                node_pool_name=f"{name}-gpu",
                cluster_id=args.cluster_id,
                vswitch_ids=[args.vswitch_id],
                instance_types=list(gpu.instance_types),
                system_disk_category=gpu.system_disk_category,
                system_disk_size=gpu.system_disk_size,
                image_type=gpu.image_type,
                labels=_gpu_labels(gpu.driver_version),
                taints=[
                    alicloud.cs.NodePoolTaintArgs(
                        key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT
                    )
                ],
                key_name=args.node_pools.key_name,
                install_cloud_monitor=False,
                tags=cloud_tags(),
                **sizing,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cpu]),
            )
            if gpu.autoscaling:
                self.autoscaler = _autoscaler(name, args.cluster_id, parent=self, after=self.gpu)
        self.ready = (self.gpu or self.cpu).id
        self.register_outputs({"ready": self.ready})


def _gpu_labels(driver_version: str | None) -> list[alicloud.cs.NodePoolLabelArgs]:
    """The GPU pool's node labels: its pool, and the driver ACK installs (when pinned)."""
    labels = [alicloud.cs.NodePoolLabelArgs(key=POOL_LABEL, value="gpu")]
    if driver_version is not None:
        labels.append(alicloud.cs.NodePoolLabelArgs(key=DRIVER_LABEL, value=driver_version))
    return labels


def _autoscaler(
    name: str, cluster_id: pulumi.Input[str], *, parent: pulumi.Resource, after: alicloud.cs.NodePool
) -> alicloud.cs.AutoscalingConfig:
    """The cluster's autoscaler, configured after the pools (ACK refuses a cluster change while
    a pool is scaling)."""
    return alicloud.cs.AutoscalingConfig(
        f"{name}-autoscaler",
        cluster_id=cluster_id,
        scaler_type="cluster-autoscaler",
        # The GPU pool's minimum is 0: without this no node ever comes up for a pending GPU pod.
        scale_up_from_zero=True,
        scale_down_enabled=True,
        # A GPU node is released when its GPUs are idle (the training pods have finished).
        gpu_utilization_threshold="0.5",
        expander="least-waste",
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[after]),
    )
