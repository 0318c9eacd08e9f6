"""Trainer benchmark: same model, data, epochs and batch size, measured in one run.

(a) one process, plain Keras ``model.fit``; (b) ``python -m trainer.local`` with 2 workers
+ 1 ps (ParameterServerStrategy); (c) the same with ps 0 (MultiWorkerMirroredStrategy,
chief + 2 workers). Prints a table: training examples/s (training loop only), wall time
of the whole run (process start to exit), test accuracy, and peak resident memory per
process (sampled every 0.2 s with psutil). A script that prints numbers, not a test.

    .venv/bin/python benchmarks/trainer_benchmark.py                      # mnist-10k sample
    .venv/bin/python benchmarks/trainer_benchmark.py \\
        --data_dir /usr/share/datasets/fashion-mnist                       # full Fashion-MNIST
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.flags import BUNDLED_DATA_DIR  # noqa: E402


class PeakMemory:
    """Samples the RSS of a process tree; peaks per labelled pid."""

    def __init__(self, root: psutil.Process, label_of) -> None:
        self.root, self.label_of, self.peaks = root, label_of, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                procs = []
            for proc in procs:
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                label = self.label_of(proc.pid)
                if label:
                    self.peaks[label] = max(self.peaks.get(label, 0), rss)
            time.sleep(0.2)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def plain_fit(args: argparse.Namespace) -> None:
    """(a), run in a child process: plain Keras fit; prints one JSON line."""
    import keras
    import numpy as np

    from trainer.data import load
    from trainer.model import build_model

    keras.utils.set_random_seed(args.seed)
    ds = load(args.data_dir)
    x = ds.x_train.astype(np.float32)[..., None] / 255.0
    xt = ds.x_test.astype(np.float32)[..., None] / 255.0
    model = build_model(args.model)
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=args.steps_per_execution)
    steps = len(x) // args.batch_size
    start = time.perf_counter()
    model.fit(x[: steps * args.batch_size], ds.y_train[: steps * args.batch_size],
              batch_size=args.batch_size, epochs=args.epochs, shuffle=True, verbose=0)
    train_s = time.perf_counter() - start
    _, accuracy = model.evaluate(xt, ds.y_test, batch_size=1000, verbose=0)
    print(json.dumps({"examples_per_s": steps * args.batch_size * args.epochs / train_s,
                      "test_accuracy": float(accuracy)}), flush=True)


def trainer_flags(args: argparse.Namespace) -> list[str]:
    return ["--data_dir", args.data_dir, "--epochs", str(args.epochs),
            "--batch_size", str(args.batch_size), "--learning_rate", str(args.learning_rate),
            "--model", args.model, "--seed", str(args.seed),
            "--steps_per_execution", str(args.steps_per_execution), "--log_interval", "100000"]


def run_plain(args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--_plain_fit", *trainer_flags(args)[:-2]]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    mem = PeakMemory(psutil.Process(proc.pid), lambda pid: "process")
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    peaks = mem.stop()
    if proc.returncode:
        raise SystemExit(f"plain fit failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    return {**result, "wall_s": wall, "peaks": peaks}


def run_launcher(args: argparse.Namespace, ps: int) -> dict:
    log_dir = Path(tempfile.mkdtemp(prefix=f"bench-ps{ps}-"))
    cmd = [sys.executable, "-m", "trainer.local", "--workers", "2", "--ps", str(ps),
           "--log_dir", str(log_dir), *trainer_flags(args)]
    names: dict[int, str] = {}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    mem = PeakMemory(psutil.Process(proc.pid),
                     lambda pid: "launcher" if pid == proc.pid else names.get(pid))
    output = []
    for line in proc.stdout:
        output.append(line)
        match = re.search(r"\[local\] started (\S+) \(pid (\d+)\)", line)
        if match:
            names[int(match[2])] = match[1]
    proc.wait()
    wall = time.perf_counter() - start
    peaks = mem.stop()
    if proc.returncode:
        sys.stderr.write("".join(output[-40:]))
        raise SystemExit(f"launcher (ps {ps}) failed with exit code {proc.returncode}")
    result = json.loads((log_dir / "result.json").read_text())
    return {"examples_per_s": result["examples_per_s"], "test_accuracy": result["test_accuracy"],
            "wall_s": wall, "peaks": peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", default=str(BUNDLED_DATA_DIR))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.001)
    parser.add_argument("--model", default="convnet")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--steps_per_execution", type=int, default=50)
    parser.add_argument("--_plain_fit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._plain_fit:
        plain_fit(args)
        return
    print(f"data {args.data_dir}; model {args.model}; {args.epochs} epochs; batch "
          f"{args.batch_size} per replica; Adam lr {args.learning_rate}; "
          f"{args.steps_per_execution} steps per execution; {os.cpu_count()} CPUs", flush=True)
    rows = [("(a) one process, Keras model.fit", run_plain(args))]
    print("(a) done", flush=True)
    rows.append(("(b) local: 2 workers + 1 ps", run_launcher(args, ps=1)))
    print("(b) done", flush=True)
    rows.append(("(c) local: 2 workers, ps 0", run_launcher(args, ps=0)))
    base = rows[0][1]["examples_per_s"]
    print()
    print(f"| run | examples/s | vs (a) | wall time | test accuracy | peak memory per process (MiB) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, r in rows:
        mem = ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(r["peaks"].items()))
        print(f"| {name} | {r['examples_per_s']:.0f} | {r['examples_per_s'] / base:.2f}x | "
              f"{r['wall_s']:.1f} s | {r['test_accuracy']:.4f} | {mem} |")


if __name__ == "__main__":
    main()
