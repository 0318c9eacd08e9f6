"""Where one training step's time goes, per task: a table from a ``TRAINER_PROFILE`` run.

Run a trainer with ``TRAINER_PROFILE=DIR`` (trainer/profiling.py; every task profiles the
same third of the first epoch), then ``.venv/bin/python benchmarks/profile_table.py DIR``.
For each task: the CPU milliseconds its process spent per batch (``time.process_time`` over
the window, all threads; the servers' windows are scaled to the chief's batches), and how
the profiler's traced time divides among:

- model: the forward and backward arithmetic (convolutions, matrix products, ...);
- optimizer: the Adam or SGD update of the weights (ops under the optimizer's name scope,
  and variable assignments);
- transfers: tensors sent to or received from another task (``_Send``/``_Recv``: the
  weights read from the ps, the gradient pushed to it);
- input: the tf.data pipeline's threads (shuffle, batch, gather, cast);
- runtime: the rest: TensorFlow's executor and eager runtime, gRPC bookkeeping.

Left out: the own time of the events that wrap a whole function call (the caller's
``KernelAndDeviceFunc::Run``, ``EagerExecute`` and the like), which is time spent waiting
for the function's ops on other threads, not work.

Traced time is each event's own time (its duration less that of the events inside it, on
the same thread), so nothing is counted twice; it is wall time on busy threads, which on a
loaded machine includes waiting for a core: read the shares, not the milliseconds.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

CATEGORIES = ("model", "optimizer", "transfers", "input", "runtime")
_TRANSFER_OPS = ("_Send", "_Recv", "_HostSend", "_HostRecv", "_RecvTensor")
#: Events whose own time is a thread waiting for a function's ops (see the docstring).
_WAITING = (
    "KernelAndDeviceFunc::Run",
    "EagerExecute",
    "EagerKernelExecute",
    "EagerLocalExecute",
    "TFE_Py_",
    "EagerService:",
    "RunWithBorrowedArgs",
)


def category(thread: str, name: str) -> str:
    """The category (one of CATEGORIES, or "waiting") of a trace event ``name`` on thread
    ``thread``."""
    if name.startswith(_WAITING) or thread == "python":
        return "waiting"
    if thread.startswith("tf_data"):
        return "input"
    if ":" not in name or "::" in name:  # not an op ("node:OpType"): the runtime's own
        return "runtime"
    node, op = name.rsplit(":", 1)
    if op in _TRANSFER_OPS:
        return "transfers"
    if "/adam/" in node or "/sgd/" in node or op.startswith(("Assign", "ResourceApply")):
        return "optimizer"
    return "model"


def self_times(xspace_path: Path, by_op: bool = False) -> collections.Counter:
    """Picoseconds of each category's own time in one ``*.xplane.pb`` (the host plane); with
    ``by_op``, of each op type's instead (``Conv2DBackpropFilter``, ...; the runtime's own
    events under "(runtime)", waiting and input left out)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    def key(thread: str, name: str) -> str:
        cat = category(thread, name)
        if not by_op or cat in ("waiting", "input"):
            return cat
        return name.rsplit(":", 1)[1] if cat != "runtime" else "(runtime)"

    space = xplane_pb2.XSpace()
    space.ParseFromString(xspace_path.read_bytes())
    totals: collections.Counter = collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = plane.event_metadata
        for line in plane.lines:
            events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
            stack: list[list] = []  # [end, category, own time] of the open events
            for event in events:
                while stack and event.offset_ps >= stack[-1][0]:
                    _close(stack, totals)
                if stack:
                    stack[-1][2] -= event.duration_ps
                stack.append(
                    [
                        event.offset_ps + event.duration_ps,
                        key(line.name, names[event.metadata_id].name),
                        event.duration_ps,
                    ]
                )
            while stack:
                _close(stack, totals)
    return totals


def _close(stack: list, totals: collections.Counter) -> None:
    _, cat, own = stack.pop()
    totals[cat] += max(0, own)


def read_profile(directory: Path) -> list[dict]:
    """One row per task that wrote a window under ``directory``: task, cpu_ms_per_batch,
    batches, and each category's share of the task's traced time (fractions)."""
    windows = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}
    chief = windows.get("chief-0")
    if not chief or not chief.get("batches"):
        raise SystemExit(
            f"{directory}: no chief-0.json with the window's batches; run the "
            "trainer with TRAINER_PROFILE set to this directory"
        )
    per_batch_s = chief["wall_s"] / chief["batches"]
    rows = []
    for task, window in windows.items():
        traces = sorted((directory / task).glob("plugins/profile/*/*.xplane.pb"))
        totals = self_times(traces[-1]) if traces else collections.Counter()
        traced = sum(totals[c] for c in CATEGORIES) or 1
        rows.append(
            {
                "task": task,
                "batches": chief["batches"],
                "cpu_ms_per_batch": 1000 * window["cpu_s"] / window["wall_s"] * per_batch_s,
                "wall_ms_per_batch": 1000 * per_batch_s,
                **{c: totals[c] / traced for c in CATEGORIES},
            }
        )
    return rows


def op_table(directory: Path, top: int) -> str:
    """Each task's ``top`` op types by own time per batch (ms of traced time on busy threads)
    and their share of the task's traced op time: which kernels a batch's time goes to."""
    rows = read_profile(directory)
    lines = ["| task | op | ms per batch | share |", "|---|---|---:|---:|"]
    for row in rows:
        traces = sorted((directory / row["task"]).glob("plugins/profile/*/*.xplane.pb"))
        if not traces:
            continue
        ops = self_times(traces[-1], by_op=True)
        for cat in ("waiting", "input"):
            ops.pop(cat, None)
        traced = sum(ops.values()) or 1
        for op, ps in ops.most_common(top):
            ms = ps / 1e9 / row["batches"]
            lines.append(f"| {row['task']} | {op} | {ms:.2f} | {100 * ps / traced:.0f}% |")
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """The rows as a Markdown table, with a total of the CPU column."""
    lines = [
        "| task | CPU ms per batch | " + " | ".join(CATEGORIES) + " |",
        "|---|---:|" + "---:|" * len(CATEGORIES),
    ]
    for row in rows:
        lines.append(
            f"| {row['task']} | {row['cpu_ms_per_batch']:.1f} | "
            + " | ".join(f"{100 * row[c]:.0f}%" for c in CATEGORIES)
            + " |"
        )
    total = sum(row["cpu_ms_per_batch"] for row in rows)
    wall = rows[0]["wall_ms_per_batch"] if rows else 0.0
    lines.append(
        f"| all tasks | {total:.1f} (wall {wall:.1f} ms per batch, "
        f"{rows[0]['batches'] if rows else 0} batches) |" + " |" * len(CATEGORIES)
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile_dir", type=Path, help="the TRAINER_PROFILE directory of a run")
    parser.add_argument(
        "--ops", type=int, default=0, metavar="N", help="also each task's N costliest op types"
    )
    args = parser.parse_args(argv)
    print(format_table(read_profile(args.profile_dir)))
    if args.ops:
        print()
        print(op_table(args.profile_dir, args.ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
