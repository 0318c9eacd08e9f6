"""``python -m trainer.report RUN_DIR [RUN_DIR ...]``: a PNG of runs' learning curves from
their own files, several runs overlaid in one picture.

Reads each chief's TensorBoard events (``RUN_DIR/train`` and ``RUN_DIR/validation``, the
per-epoch series of ``trainer.contract.progress.EPOCH_SERIES``) and ``result.json`` when the
run has finished, and draws cost and accuracy per epoch (train and test) and the same against
wall-clock minutes since each run started. A RUN_DIR without events of its own but with runs
in its subdirectories (a directory of runs, as the stack's volume has) stands for those runs.
Writes ``RUN_DIR/learning_curves.png`` for one run (or one directory of runs) unless
``--output`` says otherwise; several RUN_DIRs need ``--output``.
Exit codes: 0 written; 1 no per-epoch events under a RUN_DIR (nothing to draw); 2 usage.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from trainer.contract.progress import EPOCH_SERIES, TRAIN_SUBDIR, read_result

DEFAULT_NAME = "learning_curves.png"


@dataclass(frozen=True)
class Point:
    """One value of a series: the epoch (the event's step), its wall time (unix s), value."""

    epoch: int
    wall_time: float
    value: float


def read_series(run_dir: str | Path) -> dict[str, list[Point]]:
    """The per-epoch series of a run, keyed as EPOCH_SERIES (``train_cost``, ...), sorted by
    epoch. An epoch written twice (a chief restarted between its write and its checkpoint)
    keeps the later value. Keys without events are left out."""
    latest: dict[str, dict[int, Point]] = {}
    for subdir in sorted({subdir for subdir, _ in EPOCH_SERIES.values()}):
        by_tag = {tag: key for key, (where, tag) in EPOCH_SERIES.items() if where == subdir}
        for event in read_events(Path(run_dir) / subdir):
            for value in event.summary.value:
                key = by_tag.get(value.tag)
                if key is None:
                    continue
                point = Point(event.step, event.wall_time, _scalar_value(value))
                old = latest.setdefault(key, {}).get(event.step)
                if old is None or old.wall_time <= point.wall_time:
                    latest[key][event.step] = point
    return {key: [points[step] for step in sorted(points)] for key, points in latest.items()}


def started_at(run_dir: str | Path) -> float | None:
    """Wall time (unix s) of the run's first event: its first event file's header, written
    when the chief opened it, just before the first step."""
    for event in read_events(Path(run_dir) / TRAIN_SUBDIR):
        return event.wall_time
    return None


def read_events(events_dir: Path):
    """Every Event in the ``events.out.tfevents.*`` files of ``events_dir`` (TFRecord files:
    little-endian u64 length, u32 CRC, the record, u32 CRC), oldest file first. Read with
    TensorBoard's protobuf classes only: TensorBoard's own loaders import TensorFlow, which
    costs seconds. A record cut short (a file being written) ends that file."""
    from tensorboard.compat.proto import event_pb2

    for path in sorted(events_dir.glob("events.out.tfevents.*")):
        with open(path, "rb") as file:
            while True:
                header = file.read(12)
                if len(header) < 12:
                    break
                (length,) = struct.unpack("<Q", header[:8])
                data = file.read(length)
                if len(data) < length or len(file.read(4)) < 4:
                    break
                event = event_pb2.Event()
                event.ParseFromString(data)
                yield event


def _scalar_value(value) -> float:
    """A summary value's scalar: a float32 tensor (tf.summary.write) or a simple_value."""
    if value.HasField("tensor"):
        tensor = value.tensor
        if tensor.float_val:
            return float(tensor.float_val[0])
        if tensor.double_val:
            return float(tensor.double_val[0])
        if tensor.tensor_content:
            fmt = "<d" if len(tensor.tensor_content) == 8 else "<f"
            return float(struct.unpack(fmt, tensor.tensor_content[: struct.calcsize(fmt)])[0])
    return float(value.simple_value)


@dataclass(frozen=True)
class Run:
    """One run to draw: its label, its series (``read_series``), its start (unix s)."""

    label: str
    series: dict[str, list[Point]]
    start: float


def load_run(run_dir: Path, label: str | None = None) -> Run | None:
    """The run in ``run_dir`` (None when it has no per-epoch events), labelled ``label`` or
    its directory's name; its start is its first event, else its first point."""
    series = read_series(run_dir)
    if not series:
        return None
    start = started_at(run_dir)
    if start is None:
        start = min(p.wall_time for points in series.values() for p in points)
    return Run(label or run_dir.name, series, start)


def draw(runs: list[Run], output: str | Path, title: str) -> Path:
    """Write the 2x2 PNG: cost and accuracy per epoch (top), against minutes since each run's
    start (bottom); train dashed and test solid, one colour per run when several."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), dpi=100)
    panels = [
        ("train_cost", "test_cost", "cost (cross-entropy, nats)"),
        ("train_accuracy", "test_accuracy", "accuracy"),
    ]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for column, (train_key, test_key, ylabel) in enumerate(panels):
        for row, xlabel in enumerate(("epoch", "wall-clock minutes since the run started")):
            ax = axes[row][column]
            for index, run in enumerate(runs):
                prefix = f"{run.label} " if len(runs) > 1 else ""
                for key, split, style in ((train_key, "train", "--o"), (test_key, "test", "-s")):
                    points = run.series.get(key, [])
                    if not points:
                        continue
                    xs = (
                        [p.epoch for p in points]
                        if row == 0
                        else [(p.wall_time - run.start) / 60 for p in points]
                    )
                    ax.plot(
                        xs,
                        [p.value for p in points],
                        style,
                        markersize=3,
                        label=prefix + split,
                        color=colours[index % len(colours)],
                    )
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small" if len(runs) > 1 else None)
            if row == 0:
                ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(title)
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, format="png")
    plt.close(fig)
    return output


def title_of(run_dir: Path, series: dict[str, list[Point]]) -> str:
    """One run's title: the run and, once it has finished, its result."""
    result = read_result(run_dir)
    epochs = len(series.get("test_cost") or series.get("test_accuracy") or [])
    if result:
        return (
            f"{run_dir.name}: {result['model']}, {result['strategy']}, {result['epochs']} "
            f"epochs of {result['train_examples']} examples, test accuracy "
            f"{result['test_accuracy']:.4f}, {result['total_time_s']:.0f} s"
        )
    return f"{run_dir.name}: {epochs} epochs so far (no result.json yet)"


def run_dirs(given: Path) -> list[Path]:
    """``given`` when it is a run (it has ``train/``), else its subdirectories that are, by
    name (a directory of runs); empty when neither."""
    if (given / TRAIN_SUBDIR).is_dir():
        return [given]
    if not given.is_dir():
        return []
    return sorted(p for p in given.iterdir() if (p / TRAIN_SUBDIR).is_dir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.report",
        description="Draw runs' learning curves as one PNG (several runs overlaid).",
    )
    parser.add_argument(
        "run_dir",
        nargs="+",
        help="a run's --log_dir (holding train/, validation/ and result.json), or a directory of runs",
    )
    parser.add_argument(
        "-o",
        "--output",
        "--out",
        help=f"the PNG to write (default: RUN_DIR/{DEFAULT_NAME} for one RUN_DIR; required for several)",
    )
    args = parser.parse_args(argv)
    given = [Path(d) for d in args.run_dir]
    if len(given) > 1 and not args.output:
        parser.error("several RUN_DIRs: say where the picture goes with --output PNG")
    runs = []
    for directory in given:
        found = [run for run in (load_run(d) for d in run_dirs(directory)) if run]
        if not found:
            print(
                f"error: no per-epoch TensorBoard events in {directory / TRAIN_SUBDIR} nor "
                f"in runs below {directory}: give a run's --log_dir after at least one "
                "epoch, or a directory of such runs",
                file=sys.stderr,
            )
            return 1
        runs.extend(found)
    if len(runs) == 1:
        title = title_of(run_dirs(given[0])[0], runs[0].series)
    else:
        title = f"{len(runs)} runs: " + ", ".join(run.label for run in runs)
    output = draw(runs, args.output or given[0] / DEFAULT_NAME, title)
    for run in runs:
        last = {key: points[-1].value for key, points in run.series.items()}
        print(
            f"{output}: {run.label}: {len(run.series.get('train_cost', []))} epochs; last "
            "epoch: " + ", ".join(f"{key} {value:.4g}" for key, value in sorted(last.items()))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
