"""The guide's progress lines (printed by the chief), their parser, and the JSON result.

The lines keep the TF1 guide's exact format so that users' habits and log scrapers keep
working, e.g. ``Step: 124607,  Epoch: 24,  Batch: 1600 of 2750,  Cost: 0.8027,  AvgTime: 6.79ms``
then ``Test-Accuracy: 0.89``, ``Total Time: 1664.68s``, ``Final Cost: 0.5333``, ``done``.

Standard library only: the run monitor's ConfigMap delivers this file beside its script, which
parses the chief's log with it (infra/trainer_status.py, infra/components/monitor.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESULT_FILE = "result.json"
#: The chief's TensorBoard events under --log_dir, laid out as Keras' TensorBoard callback
#: does: one TensorBoard run per split, the same tags in each, so that train and test curves
#: overlay in one chart, and so do several runs under one ``tensorboard --logdir`` (their
#: runs are then ``<run>/train`` and ``<run>/validation``).
TRAIN_SUBDIR = "train"
VALIDATION_SUBDIR = "validation"
TENSORBOARD_SUBDIRS = (TRAIN_SUBDIR, VALIDATION_SUBDIR)
#: The per-epoch series (step = the 1-based epoch): key -> (subdirectory, scalar tag).
#: Costs are mean cross-entropy in nats, accuracies fractions, examples/s of training time;
#: "test" is the whole test set after the epoch, TensorBoard's "validation" run.
EPOCH_SERIES: dict[str, tuple[str, str]] = {
    "train_cost": (TRAIN_SUBDIR, "epoch_loss"),
    "train_accuracy": (TRAIN_SUBDIR, "epoch_accuracy"),
    "test_cost": (VALIDATION_SUBDIR, "epoch_loss"),
    "test_accuracy": (VALIDATION_SUBDIR, "epoch_accuracy"),
    "learning_rate": (TRAIN_SUBDIR, "epoch_learning_rate"),
    "examples_per_s": (TRAIN_SUBDIR, "epoch_examples_per_s"),
}
#: The cost of every progress line (step = the global step), as in the guide's Step lines.
BATCH_COST: tuple[str, str] = (TRAIN_SUBDIR, "batch_loss")
#: What each series shows (TensorBoard's tooltip on a chart), keyed as EPOCH_SERIES plus
#: "batch_cost".
SERIES_DESCRIPTIONS = {
    "train_cost": "Mean cross-entropy (nats) of the epoch's training batches",
    "test_cost": "Mean cross-entropy (nats) on the test set after the epoch",
    "train_accuracy": "Fraction of the epoch's training examples predicted right",
    "test_accuracy": "Fraction of the test set predicted right after the epoch",
    "learning_rate": "The optimizer's learning rate at the end of the epoch",
    "examples_per_s": "Training examples per second of the epoch's wall time",
    "batch_cost": "Cost of the latest batches at each progress line (x: global step)",
}
#: The model the chief exports at the end of a run (trainer/training/export.py), under
#: --log_dir: ``export/<version>/`` holds a SavedModel (saved_model.pb, variables/) and
#: ``model.keras``; the version is the number of epochs in its weights. ``export/`` is what
#: TF Serving's --model_base_path names (it serves the highest version).
EXPORT_SUBDIR = "export"
KERAS_MODEL_FILE = "model.keras"

_STEP = re.compile(
    r"^Step: (?P<step>\d+),  Epoch: (?P<epoch>\d+),  Batch: (?P<batch>\d+) of (?P<batches>\d+),"
    r"  Cost: (?P<cost>[-+0-9.eEnaif]+),  AvgTime: (?P<avg_ms>[0-9.]+)ms$"
)
_EPOCH = re.compile(
    r"^Epoch (?P<epoch>\d+) of (?P<epochs>\d+) done: cost (?P<train_cost>[-+0-9.eEnaif]+), "
    r"train accuracy (?P<train_accuracy>[0-9.]+), test accuracy (?P<test_accuracy>[0-9.]+)"
    r"(?:, test cost (?P<test_cost>[-+0-9.eEnaif]+))?, (?P<epoch_time_s>[0-9.]+)s"
    r"(?:, (?P<examples_per_s>[0-9.]+) examples/s)?;"
)
_TRAINING = re.compile(
    r"^Training .* (?P<epochs>\d+) epochs of (?P<batches>\d+) batches of "
    r"(?P<global_batch>\d+)"
)
_FINAL = {
    "test_accuracy": re.compile(r"^Test-Accuracy: (?P<v>[0-9.]+)$"),
    "total_time_s": re.compile(r"^Total Time: (?P<v>[0-9.]+)s$"),
    "final_cost": re.compile(r"^Final Cost: (?P<v>[-+0-9.eEnaif]+)$"),
}

#: ParsedLog.logged's key of a value whose parsed name differs, and the Epoch line's values it keeps.
_LOGGED = {"train_cost": "cost", "final_cost": "cost", "test_accuracy": "test_accuracy"}
_LOGGED_EPOCH = ("train_cost", "train_accuracy", "test_accuracy", "test_cost", "examples_per_s")


def step_line(step: int, epoch: int, batch: int, batches: int, cost: float, avg_ms: float) -> str:
    """``Step: <global step>,  Epoch: <e>,  Batch: <b> of <n>,  Cost: <c>,  AvgTime: <ms>ms``.

    Args:
        step: global step (optimizer updates so far, all workers together).
        epoch: 1-based epoch; batch: 1-based batch within it; batches: batches per epoch.
        cost: mean training loss (cross-entropy, nats) of the latest steps.
        avg_ms: mean wall time per global batch since the epoch's start, milliseconds
            (trainer.training.pace.EpochPace, which says how batches still running count);
            global batch x 1000 / avg_ms is the epoch's examples per second so far.
    """
    return (
        f"Step: {step},  Epoch: {epoch},  Batch: {batch} of {batches},  "
        f"Cost: {cost:.4f},  AvgTime: {avg_ms:.2f}ms"
    )


def epoch_line(epoch: int, epochs: int, values: dict, epoch_time_s: float, checkpoint: str) -> str:
    """``Epoch <e> of <n> done: cost <c>, train accuracy <a>, test accuracy <a>, test cost
    <c>, <s>s, <n> examples/s; checkpoint <path>`` (``values`` keyed as EPOCH_SERIES)."""
    return (
        f"Epoch {epoch} of {epochs} done: cost {values['train_cost']:.4f}, "
        f"train accuracy {values['train_accuracy']:.4f}, test accuracy "
        f"{values['test_accuracy']:.4f}, test cost {values['test_cost']:.4f}, "
        f"{epoch_time_s:.1f}s, {values['examples_per_s']:.0f} examples/s; "
        f"checkpoint {checkpoint}"
    )


def final_lines(test_accuracy: float, total_time_s: float, final_cost: float) -> list[str]:
    """The guide's closing lines: accuracy (fraction), wall time (s), last cost, ``done``."""
    return [
        f"Test-Accuracy: {test_accuracy:.4f}",
        f"Total Time: {total_time_s:.2f}s",
        f"Final Cost: {final_cost:.4f}",
        "done",
    ]


@dataclass
class ParsedLog:
    """What ``parse_log`` found: Step lines as dicts, the final values, whether ``done``."""

    steps: list[dict]
    #: "Epoch ... done" lines: epoch, epochs, train_cost, train_accuracy, test_accuracy,
    #: epoch_time_s, and (when printed) test_cost, examples_per_s.
    epochs: list[dict] = field(default_factory=list)
    #: From the "Training ..." line: epochs, batches per epoch, global batch; else None.
    epochs_total: int | None = None
    global_batch: int | None = None
    test_accuracy: float | None = None
    total_time_s: float | None = None
    final_cost: float | None = None
    done: bool = False
    #: The newest text of each value exactly as the chief printed it, in log order: "cost"
    #: (a Step line's Cost, an Epoch line's cost, the Final Cost), "test_accuracy" (an Epoch
    #: line's, the Test-Accuracy line's), "train_accuracy", "test_cost", "examples_per_s" (an
    #: Epoch line's). What a report quotes must not be rounded again (infra/trainer_status.py).
    logged: dict[str, str] = field(default_factory=dict)


def parse_log(text: str) -> ParsedLog:
    """Parse the guide's lines from log text; other lines (and task prefixes such as
    ``[chief-0] ``) are ignored."""
    parsed = ParsedLog(steps=[])
    for raw in text.splitlines():
        line = re.sub(r"^\[[a-z]+-\d+\] ", "", raw).strip()
        match = _STEP.match(line)
        if match:
            d = match.groupdict()
            parsed.steps.append(
                {
                    "step": int(d["step"]),
                    "epoch": int(d["epoch"]),
                    "batch": int(d["batch"]),
                    "batches": int(d["batches"]),
                    "cost": float(d["cost"]),
                    "avg_ms": float(d["avg_ms"]),
                }
            )
            parsed.logged["cost"] = d["cost"]
            continue
        match = _EPOCH.match(line)
        if match:
            found = {k: v for k, v in match.groupdict().items() if v is not None}
            parsed.epochs.append(
                {k: (int(v) if k in ("epoch", "epochs") else float(v)) for k, v in found.items()}
            )
            parsed.logged.update({_LOGGED.get(k, k): v for k, v in found.items() if k in _LOGGED_EPOCH})
            continue
        match = _TRAINING.match(line)
        if match:
            parsed.epochs_total = int(match["epochs"])
            parsed.global_batch = int(match["global_batch"])
            continue
        for key, pattern in _FINAL.items():
            match = pattern.match(line)
            if match:
                setattr(parsed, key, float(match["v"]))
                if key in _LOGGED:
                    parsed.logged[_LOGGED[key]] = match["v"]
        if line == "done":
            parsed.done = True
    return parsed


@dataclass
class Result:
    """The run's result, written as ``<log_dir>/result.json``.

    Units: accuracy a fraction, cost mean cross-entropy in nats, times in seconds,
    examples_per_s training examples per second of training wall time; total_time_s spans
    restarts (it includes earlier interrupted processes), train_time_s and examples_per_s
    cover only the epochs trained by the last process (from ``resumed_from_epoch``).
    """

    test_accuracy: float
    final_cost: float
    total_time_s: float
    train_time_s: float
    epochs: int
    resumed_from_epoch: int
    examples_per_s: float
    train_examples: int
    batch_size: int
    strategy: str
    model: str
    global_step: int
    #: Seconds the last process spent building its first step function and its evaluation
    #: function before its first epoch (tracing; with a ps, every worker's first call of
    #: it): not in train_time_s.
    build_time_s: float = 0.0
    #: The exported model, relative to --log_dir (``export/<epochs>`` and
    #: ``export/<epochs>/model.keras``); empty when there is none.
    saved_model: str = ""
    keras_model: str = ""
    #: The export's record: each file of ``saved_model`` (path relative to it) -> the SHA-256
    #: of its bytes, as the chief that wrote the export digested them; empty when that chief
    #: did not write it (trainer/training/export.py). ``python -m trainer.evaluate`` loads the
    #: export only when its files are exactly these.
    saved_model_files: dict[str, str] = field(default_factory=dict)


def write_result(log_dir: str | Path, result: Result) -> Path:
    """Write result.json atomically (temporary name, then rename); return its path.

    Raises:
        OSError: it cannot be written (the temporary file is removed).
    """
    path = Path(log_dir) / RESULT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{RESULT_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(result), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full volume: no partial file left behind
        raise
    return path


def read_result(log_dir: str | Path) -> dict | None:
    """The result.json dict, or None when there is none."""
    path = Path(log_dir) / RESULT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())
