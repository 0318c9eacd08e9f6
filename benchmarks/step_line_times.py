"""Step lines' AvgTime against each epoch's wall time per batch, on real runs of the local
launcher (the launcher's recipe on ``--data_dir``, by default the bundled sample).

For each layout (workers x ps tasks, e.g. ``2x1``, ``4x0``) it runs ``python -m
trainer.local`` once, with a Step line every ``--log_interval`` batches (by default the
interval that gives ``--lines`` lines an epoch; the global batch is ``--batch_size`` with a
ps, ``--batch_size`` x (workers + 1) with ps 0), and prints, per epoch, the epoch's
milliseconds per global batch (global batch x 1000 / the Epoch line's examples/s), every
Step line's AvgTime and its ratio to that; per run its wall and CPU seconds (every process
of the run, sampled every 0.1 s with psutil) and the machine's load average before it. A
script that prints numbers, not a test: tests/trainer/test_step_line_times.py checks each
line against the wall time of its own span, which load on the machine moves alike.

    .venv/bin/python benchmarks/step_line_times.py
    .venv/bin/python benchmarks/step_line_times.py --layouts 4x1 --epochs 4 --log_interval 20
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tree_sampler import TreeSampler  # noqa: E402

from trainer import data as data_mod  # noqa: E402
from trainer.contract import progress  # noqa: E402


class CpuTime:
    """Samples the CPU seconds (user + system) of a process tree every 0.1 s; ``stop``
    returns their sum over every pid seen (a pid's last sample: up to 0.1 s of each
    process's end is missed)."""

    def __init__(self, root: psutil.Process) -> None:
        self.seen: dict[int, float] = {}
        self._sampler = TreeSampler(root, 0.1, self._sample)

    def _sample(self, proc: psutil.Process) -> None:
        times = proc.cpu_times()
        self.seen[proc.pid] = times.user + times.system

    def stop(self) -> float:
        self._sampler.stop()
        return sum(self.seen.values())


def epoch_ratios(parsed: progress.ParsedLog) -> list[tuple[int, float, list[float]]]:
    """Per Epoch line: (epoch, its ms per global batch, its Step lines' AvgTime in ms)."""
    rows = []
    for epoch in parsed.epochs:
        per_batch_ms = parsed.global_batch * 1000 / epoch["examples_per_s"]
        rows.append(
            (
                epoch["epoch"],
                per_batch_ms,
                [s["avg_ms"] for s in parsed.steps if s["epoch"] == epoch["epoch"]],
            )
        )
    return rows


def run_layout(workers: int, ps: int, flags: list[str]) -> tuple[str, float, float]:
    """One launcher run; returns (the chief's lines, wall seconds, CPU seconds). Its log
    directory is removed once it ends."""
    log_dir = tempfile.mkdtemp(prefix=f"step-times-{workers}x{ps}-")
    cmd = [
        sys.executable,
        "-m",
        "trainer.local",
        "--workers",
        str(workers),
        "--ps",
        str(ps),
        "--log_dir",
        log_dir,
        *flags,
    ]
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cpu = CpuTime(psutil.Process(proc.pid))
        output, _ = proc.communicate()
        wall, cpu_s = time.perf_counter() - start, cpu.stop()
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)  # the run's lines are in ``output``
    if proc.returncode:
        sys.stderr.write(output[-4000:])
        raise SystemExit(f"{workers} workers + {ps} ps failed with exit code {proc.returncode}")
    chief = "\n".join(line for line in output.splitlines() if line.startswith("[chief-0]"))
    return chief, wall, cpu_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=["2x1", "2x0", "4x1", "4x0"],
        help="workers x ps tasks (default %(default)s)",
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=64, help="the launcher's default")
    parser.add_argument(
        "--lines",
        type=int,
        default=6,
        help="Step lines an epoch, without --log_interval (default %(default)s)",
    )
    parser.add_argument(
        "--log_interval", type=int, default=0, help="batches between Step lines (default: from --lines)"
    )
    parser.add_argument("--data_dir", default=str(REPO / "trainer" / "data" / "mnist-10k"))
    args, extra = parser.parse_known_args(argv)
    examples = len(data_mod.load(args.data_dir).x_train)
    print(f"CPU: {cpu_model()}; {examples} training examples in {args.data_dir}", flush=True)
    for layout in args.layouts:
        workers, ps = (int(n) for n in layout.split("x"))
        batches = examples // (args.batch_size * (1 if ps else workers + 1))
        log_interval = args.log_interval or max(1, batches // args.lines)
        flags = [
            "--epochs",
            str(args.epochs),
            "--batch_size",
            str(args.batch_size),
            "--log_interval",
            str(log_interval),
            "--data_dir",
            args.data_dir,
            *extra,
        ]
        load = " ".join(f"{v:.2f}" for v in os.getloadavg())
        chief, wall, cpu_s = run_layout(workers, ps, flags)
        parsed = progress.parse_log(chief)
        print(
            f"\n{workers} workers + {ps} ps, --log_interval {log_interval}: {wall:.1f} s "
            f"wall, {cpu_s:.1f} CPU s (load before {load}); global batch "
            f"{parsed.global_batch}"
        )
        every = []
        for epoch, per_batch_ms, avg_ms in epoch_ratios(parsed):
            ratios = [a / per_batch_ms for a in avg_ms]
            every += ratios
            print(
                f"  epoch {epoch}: {per_batch_ms:.2f} ms/batch; AvgTime "
                f"{' '.join(f'{a:.2f}' for a in avg_ms)} ms; ratios "
                f"{' '.join(f'{r:.2f}' for r in ratios)}"
            )
        if every:
            print(f"  every Step line: {min(every):.2f}x to {max(every):.2f}x the epoch's")
    return 0


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next(
        (line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
        "unknown",
    )


if __name__ == "__main__":
    sys.exit(main())
