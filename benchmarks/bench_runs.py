"""The runs the trainer benchmark times (benchmarks/trainer_benchmark.py): one process of
``python -m trainer``, the local launcher, plain Keras ``model.fit``; each returns its
examples/s (training loop only), test accuracy, wall time (process start to exit), the
time of each epoch's test accuracy, and the peak resident memory per process (sampled
every 0.2 s with psutil).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from tree_sampler import TreeSampler

from trainer.contract import recipe

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.99
#: The trainer flags every run passes on (``trainer_flags``) and the benchmark's command line
#: takes, with the trainer's defaults (trainer_benchmark.build_parser): every row of the
#: recipe's table, and the steps per tf.function call.
RECIPE_FLAGS = (*(row.dest for row in recipe.HYPERPARAMETERS), "steps_per_execution")
_EPOCH = re.compile(r"^\[chief-0\] Epoch (\d+) of \d+ done: .* test accuracy ([0-9.]+),")


class PeakMemory:
    """Samples the RSS of a process tree every 0.2 s; peaks per labelled pid."""

    def __init__(self, root: psutil.Process, label_of) -> None:
        self.label_of, self.peaks = label_of, {}
        self._sampler = TreeSampler(root, 0.2, self._sample)

    def _sample(self, proc: psutil.Process) -> None:
        rss = proc.memory_info().rss
        label = self.label_of(proc.pid)
        if label:
            self.peaks[label] = max(self.peaks.get(label, 0), rss)

    def stop(self) -> dict[str, int]:
        self._sampler.stop()
        return self.peaks


def plain_fit(args: argparse.Namespace) -> None:
    """Run in a child process: plain Keras fit, one epoch at a time with a test
    evaluation after each; prints one JSON line per epoch and one at the end."""
    import keras
    import numpy as np

    from trainer.data import load
    from trainer.model import build_model
    from trainer.training.schedule import learning_rate_schedule

    keras.utils.set_random_seed(args.seed)
    ds = load(args.data_dir)
    x = ds.x_train.astype(np.float32)[..., None] / 255.0
    xt = ds.x_test.astype(np.float32)[..., None] / 255.0
    steps = len(x) // args.batch_size
    # One-hot labels: Keras' label smoothing is an option of the categorical loss only.
    y = keras.utils.to_categorical(ds.y_train[: steps * args.batch_size], 10)
    yt = keras.utils.to_categorical(ds.y_test, 10)
    model = build_model(args.model, args.dropout)
    # Keras' own optimizers: the trainer's FusedAdam updates one packed vector only.
    # One process: the rate is --learning_rate itself (no synchronous replicas to scale for).
    rate = learning_rate_schedule(args, steps * args.epochs, args.learning_rate)
    decay = args.weight_decay or None
    optimizer = (
        keras.optimizers.SGD(learning_rate=rate, weight_decay=decay)
        if args.optimizer == "sgd"
        else keras.optimizers.Adam(learning_rate=rate, weight_decay=decay)
    )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=args.label_smoothing),
        metrics=["categorical_accuracy"],
        steps_per_execution=args.steps_per_execution,
    )
    train_s, accuracy = 0.0, 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        model.fit(
            x[: steps * args.batch_size], y, batch_size=args.batch_size, epochs=1, shuffle=True, verbose=0
        )
        train_s += time.perf_counter() - start
        _, accuracy = model.evaluate(xt, yt, batch_size=1000, verbose=0)
        print(
            json.dumps({"epoch": epoch + 1, "test_accuracy": float(accuracy), "at": time.time()}), flush=True
        )
    print(
        json.dumps(
            {
                "examples_per_s": steps * args.batch_size * args.epochs / train_s,
                "epoch_s": train_s / args.epochs,
                "test_accuracy": float(accuracy),
            }
        ),
        flush=True,
    )


def trainer_flags(r: argparse.Namespace) -> list[str]:
    """``--data_dir`` and every RECIPE_FLAGS flag of ``r``, as trainer arguments."""
    return [
        "--data_dir",
        r.data_dir,
        *[arg for name in RECIPE_FLAGS for arg in (f"--{name}", str(getattr(r, name)))],
    ]


def run_plain(r: argparse.Namespace, script: str) -> dict:
    """Plain Keras fit in a child process (``script --_plain_fit``, which calls plain_fit)."""
    cmd = [sys.executable, script, "--_plain_fit", *trainer_flags(r)]
    start, start_wall = time.perf_counter(), time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    mem = PeakMemory(psutil.Process(proc.pid), lambda pid: "process")
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    peaks = mem.stop()
    if proc.returncode:
        raise SystemExit(f"plain fit failed with exit code {proc.returncode}")
    records = [json.loads(line) for line in out.strip().splitlines() if line.startswith("{")]
    epochs = [(e["at"] - start_wall, e["test_accuracy"]) for e in records if "epoch" in e]
    return {**records[-1], "wall_s": wall, "peaks": peaks, "epochs": epochs}


def run_trainer(
    cmd: list[str], log_dir: Path, what: str, label_of, on_line=None, env: dict | None = None
) -> tuple[dict, list[str]]:
    """Run ``cmd`` (a trainer writing ``log_dir``/result.json) to its end, sampling memory
    with ``label_of(pid, root_pid)`` and timing each epoch line; returns (the row's
    numbers, the output lines). Exits naming ``what`` when the run fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    mem = PeakMemory(psutil.Process(proc.pid), lambda pid: label_of(pid, proc.pid))
    output, epochs = [], []
    for line in proc.stdout:
        output.append(line)
        if on_line:
            on_line(line)
        match = _EPOCH.match(line if line.startswith("[") else "[chief-0] " + line)
        if match:
            epochs.append((time.perf_counter() - start, float(match[2])))
    proc.wait()
    wall = time.perf_counter() - start
    peaks = mem.stop()
    try:
        if proc.returncode:
            sys.stderr.write("".join(output[-40:]))
            raise SystemExit(f"{what} failed with exit code {proc.returncode}")
        result = json.loads((log_dir / "result.json").read_text())
    finally:  # the run's checkpoints and export: the row is all the benchmark keeps
        shutil.rmtree(log_dir, ignore_errors=True)
    train_s, build_s = result["train_time_s"], result.get("build_time_s", 0.0)
    return (
        {
            "examples_per_s": result["examples_per_s"],
            "test_accuracy": result["test_accuracy"],
            # The same examples over the epochs' time and the functions' building before them.
            "examples_per_s_built": result["examples_per_s"] * train_s / (train_s + build_s),
            "build_s": build_s,
            "epoch_s": train_s / max(1, result["epochs"]),
            "wall_s": wall,
            "peaks": peaks,
            "epochs": epochs,
        },
        output,
    )


def run_single_trainer(r: argparse.Namespace, env: dict | None = None) -> dict:
    """``python -m trainer`` as one process (no TF_CONFIG: the default strategy), in
    ``env`` (default: this environment)."""
    log_dir = Path(tempfile.mkdtemp(prefix="bench-single-"))
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--log_dir",
        str(log_dir),
        *trainer_flags(r),
        "--log_interval",
        "100000",
    ]
    row, _ = run_trainer(
        cmd,
        log_dir,
        "python -m trainer",
        lambda pid, root: "process",
        env=env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    return row


def run_launcher(r: argparse.Namespace, ps: int, env: dict | None = None) -> dict:
    """``python -m trainer.local`` with 2 workers and ``ps`` ps tasks, in ``env``."""
    log_dir = Path(tempfile.mkdtemp(prefix=f"bench-ps{ps}-"))
    cmd = [
        sys.executable,
        "-m",
        "trainer.local",
        "--workers",
        "2",
        "--ps",
        str(ps),
        "--log_dir",
        str(log_dir),
        *trainer_flags(r),
        "--log_interval",
        "100000",
    ]
    names: dict[int, str] = {}

    def note_pid(line: str) -> None:
        match = re.search(r"\[local\] started (\S+) \(pid (\d+)\)", line)
        if match:
            names[int(match[2])] = match[1]

    row, output = run_trainer(
        cmd,
        log_dir,
        f"launcher (ps {ps})",
        lambda pid, root: "launcher" if pid == root else names.get(pid),
        on_line=note_pid,
        env=env,
    )
    after_done = output[next(i for i, text in enumerate(output) if text.strip() == "[chief-0] done") :]
    noisy = [text for text in after_done if re.search(r"\] [EW]\d{4} |error|warning", text, re.I)]
    return {**row, "noisy_end": len(noisy)}
