"""``python -m trainer.report RUN_DIR``: a PNG of a run's learning curves from its own files.

Reads the chief's TensorBoard events (``RUN_DIR/train``, the per-epoch series of
``trainer.contract.progress.EPOCH_TAGS``) and ``result.json`` when the run has finished, and draws
cost and accuracy per epoch (train and test) and the same against wall-clock minutes since
the run started. Writes ``RUN_DIR/learning_curves.png`` unless ``--output`` says otherwise.
Exit codes: 0 written; 1 no per-epoch events under RUN_DIR (nothing to draw).
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from trainer.contract.progress import EPOCH_TAGS, TENSORBOARD_SUBDIR, read_result

DEFAULT_NAME = "learning_curves.png"


@dataclass(frozen=True)
class Point:
    """One value of a series: the epoch (the event's step), its wall time (unix s), value."""

    epoch: int
    wall_time: float
    value: float


def read_series(run_dir: str | Path) -> dict[str, list[Point]]:
    """The per-epoch series of a run, keyed as EPOCH_TAGS (``train_cost``, ...), sorted by
    epoch. An epoch written twice (a chief restarted between its write and its checkpoint)
    keeps the later value. Keys without events are left out."""
    by_tag = {tag: key for key, tag in EPOCH_TAGS.items()}
    latest: dict[str, dict[int, Point]] = {}
    for event in read_events(Path(run_dir) / TENSORBOARD_SUBDIR):
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
    for event in read_events(Path(run_dir) / TENSORBOARD_SUBDIR):
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
            return float(struct.unpack(fmt, tensor.tensor_content[:struct.calcsize(fmt)])[0])
    return float(value.simple_value)


def draw(series: dict[str, list[Point]], output: str | Path, title: str,
         start: float | None = None) -> Path:
    """Write the 2x2 PNG: cost and accuracy per epoch (top), against minutes since
    ``start`` (unix s; default: the first point) (bottom)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    if start is None:
        start = min(p.wall_time for points in series.values() for p in points)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), dpi=100)
    panels = [("train_cost", "test_cost", "cost (cross-entropy, nats)"),
              ("train_accuracy", "test_accuracy", "accuracy")]
    for column, (train_key, test_key, ylabel) in enumerate(panels):
        for row, xlabel in enumerate(("epoch", "wall-clock minutes since the run started")):
            ax = axes[row][column]
            for key, label, style in ((train_key, "train", "-o"), (test_key, "test", "-s")):
                points = series.get(key, [])
                if not points:
                    continue
                xs = ([p.epoch for p in points] if row == 0
                      else [(p.wall_time - start) / 60 for p in points])
                ax.plot(xs, [p.value for p in points], style, markersize=3, label=label)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend()
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
    """The figure's title: the run and, once it has finished, its result."""
    result = read_result(run_dir)
    epochs = len(series.get("test_cost") or series.get("test_accuracy") or [])
    if result:
        return (f"{run_dir.name}: {result['model']}, {result['strategy']}, {result['epochs']} "
                f"epochs of {result['train_examples']} examples, test accuracy "
                f"{result['test_accuracy']:.4f}, {result['total_time_s']:.0f} s")
    return f"{run_dir.name}: {epochs} epochs so far (no result.json yet)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.report",
                                     description="Draw a run's learning curves as a PNG.")
    parser.add_argument("run_dir", help="the run's --log_dir (holding train/ and result.json)")
    parser.add_argument("-o", "--output",
                        help=f"the PNG to write (default: RUN_DIR/{DEFAULT_NAME})")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    series = read_series(run_dir)
    if not series:
        print(f"error: no per-epoch TensorBoard events in {run_dir / TENSORBOARD_SUBDIR}: give "
              "a run's --log_dir after at least one epoch", file=sys.stderr)
        return 1
    output = draw(series, args.output or run_dir / DEFAULT_NAME, title_of(run_dir, series),
                  started_at(run_dir))
    last = {key: points[-1].value for key, points in series.items()}
    print(f"{output}: {len(series.get('train_cost', []))} epochs; last epoch: "
          + ", ".join(f"{key} {value:.4g}" for key, value in sorted(last.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
