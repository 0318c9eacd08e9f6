"""Run as a script by test_local_steps.py: a StepRunner over a real ParameterServerStrategy
(2 workers and 1 ps as gRPC servers in this process, this process the coordinator), through
``prepare``, the warm-up's first chunk and then one chunk of rounds; prints one JSON line of
what it saw.

A script, not test code: TensorFlow servers cannot be stopped, so the process that starts
them must end (``os._exit``) when it is done.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def main(log_dir: str) -> None:
    import numpy as np
    import tensorflow as tf

    from trainer import data as data_mod
    from trainer import flags
    from trainer.contract.cluster_spec import PARAMETER_SERVER, TaskConfig
    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training.checkpoints import TrainState
    from trainer.training.distribution import Distribution
    from trainer.training.steps import StepRunner

    spec = {
        "chief": [f"localhost:{_free_port()}"],
        "ps": [f"localhost:{_free_port()}"],
        "worker": [f"localhost:{_free_port()}" for _ in range(2)],
    }
    cluster = tf.train.ClusterSpec(spec)
    for job in ("ps", "worker"):
        for index in range(len(spec[job])):
            # All of them share this process: with its default inter-op threads (one per
            # core) two workers' functions waiting on the ps can leave none for the ps' own
            # part (a hang that a cluster of one process per task cannot have).
            tf.distribute.Server(
                cluster,
                job_name=job,
                task_index=index,
                protocol="grpc",
                config=tf.compat.v1.ConfigProto(inter_op_parallelism_threads=16),
                start=True,
            )
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, rpc_layer="grpc", task_type="chief", task_id=0
    )
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    dist = Distribution(PARAMETER_SERVER, strategy, tf.distribute.coordinator.ClusterCoordinator(strategy), 1)

    args = flags.build_parser().parse_args(
        [
            "--local_steps",
            "5",
            "--steps_per_execution",
            "10",
            "--model",
            "mlp",
            "--lr_schedule",
            "warmup_cosine",
            "--log_dir",
            log_dir,
        ]
    )
    packing = PackedWeights(build_model("mlp", 0.0))
    total_steps = 100
    state = TrainState(
        strategy,
        packing.initial_value(),
        args,
        total_steps,
        TaskConfig({}),
        0.0,
        learning_rate=args.learning_rate,
    )
    runner = StepRunner(args, dist, state, packing, data_mod.load(args.data_dir), total_steps)
    seen = {"local_from": runner.local_from}
    before = state.weights.numpy().copy()

    runner.prepare(0)
    runner.join()
    seen["every_step_traced_by_prepare"] = runner.every_step.experimental_get_tracing_count()
    seen["rounds_traced_by_prepare"] = runner.local_steps.experimental_get_tracing_count()
    seen["global_step_after_prepare"] = int(state.global_step.numpy())
    seen["optimizer_steps_after_prepare"] = int(state.optimizer.iterations.numpy())
    seen["weights_moved_by_prepare"] = float(np.abs(state.weights.numpy() - before).max())

    runner.run(10, at_step=0)()
    runner.join()
    seen["global_step_after_warm_up"] = int(state.global_step.numpy())
    seen["optimizer_steps_after_warm_up"] = int(state.optimizer.iterations.numpy())
    before = state.weights.numpy().copy()

    runner.run(10, at_step=runner.local_from)()
    runner.join()
    seen["every_step_traced_after_steps"] = runner.every_step.experimental_get_tracing_count()
    seen["rounds_traced_after_steps"] = runner.local_steps.experimental_get_tracing_count()
    seen["global_step_after_rounds"] = int(state.global_step.numpy())
    seen["weights_moved_by_rounds"] = float(np.abs(state.weights.numpy() - before).max())
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # the in-process servers' threads would keep a normal exit waiting
