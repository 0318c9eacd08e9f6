"""Benchmark: time to run the whole Pulumi program under the mock engine, by worker count.

Prints one table row per worker.number (default 2, 32, 256): resources registered, the
median wall time of several runs, and time per resource (growth should be close to linear).

    .venv/bin/python benchmarks/infra_benchmark.py [--workers 2 32 256] [--repeat 3]

The mock engine (pulumi.runtime.set_mocks) answers every registration in-process, so this
measures the program and the Pulumi Python SDK, not a provider or the cloud.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "mock-engine")]

import program_mocks as me  # noqa: E402  (the same program run the infra tests use)


def measure(workers: int, repeat: int) -> tuple[int, float]:
    """Median seconds of ``repeat`` runs at ``workers`` workers, and the resources registered."""
    config = me.engine_form(me.with_cli_defaults(me.stack_config("dev")))
    worker = json.loads(config["tf-mnist:worker"])
    worker["number"] = workers
    config["tf-mnist:worker"] = json.dumps(worker)
    times, count = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        run = me.run_program(config)
        times.append(time.perf_counter() - start)
        if run.error is not None:
            raise SystemExit(f"worker.number {workers}: {run.error}")
        count = len(run.registrations)
    return count, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 32, 256])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)  # the open-TensorBoard warning, once per run
    measure(2, 1)  # warm-up: imports of the Pulumi SDKs
    print(f"{'worker.number':>13} | {'resources':>9} | {'median s':>8} | {'ms/resource':>11}")
    print(f"{'-' * 13}-+-{'-' * 9}-+-{'-' * 8}-+-{'-' * 11}")
    for workers in args.workers:
        count, seconds = measure(workers, args.repeat)
        print(f"{workers:>13} | {count:>9} | {seconds:>8.2f} | {1000 * seconds / count:>11.2f}")


if __name__ == "__main__":
    main()
