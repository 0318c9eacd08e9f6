"""The task's tf.distribute strategy, chosen by its cluster (TF_CONFIG), and the replicas one
synchronous step spans."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from trainer.contract.cluster_spec import MULTI_WORKER_MIRRORED, PARAMETER_SERVER, TaskConfig


@dataclass(frozen=True)
class Distribution:
    """How the task trains.

    Attributes:
        kind: the strategy kind of trainer.contract.cluster_spec (PARAMETER_SERVER,
            MULTI_WORKER_MIRRORED or SINGLE_PROCESS).
        strategy: the tf.distribute strategy.
        coordinator: the ClusterCoordinator with ParameterServerStrategy, else None.
        replicas: the synchronous replicas of one step, whose batches make the global
            batch: with MultiWorkerMirroredStrategy every task (CPU or one GPU each), else 1
            (a ps worker's batch is applied alone).
        workers: the worker tasks the coordinator schedules on with ParameterServerStrategy,
            else 1.
    """

    kind: str
    strategy: Any
    coordinator: Any
    replicas: int
    workers: int = 1

    def global_batch(self, batch_size: int) -> int:
        """The examples of one step, all replicas together, for ``--batch_size``."""
        return batch_size * self.replicas


def connect(task: TaskConfig) -> Distribution:
    """The strategy for ``task``'s cluster; with ps or workers, this connects to them."""
    kind = task.strategy_kind
    if kind == PARAMETER_SERVER:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        resolver.rpc_layer = "grpc"
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        return Distribution(kind, strategy, coordinator, 1, resolver.cluster_spec().num_tasks("worker"))
    if kind == MULTI_WORKER_MIRRORED:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return Distribution(kind, strategy, None, strategy.num_replicas_in_sync)
    return Distribution(kind, tf.distribute.get_strategy(), None, 1)
