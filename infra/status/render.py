"""How ``infra.status`` shows a run: the text view (tasks, why they wait, the newest warnings,
the chief's progress) and the same facts as JSON (``-o json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from infra.status.collect import RunStatus
from infra.status.cost import cost_lines
from infra.trainer_status import ANNOTATION, position, time_left
from trainer.contract.progress import ParsedLog


def age(seconds: float | None) -> str:
    """kubectl's style: 45s, 12m, 3h, 2d."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def progress_line(progress: ParsedLog) -> str:
    """``epoch 3 of 10 done (epoch 4: batch 200 of 468), cost 0.1009, test accuracy 0.9690,
    3200 examples/s, about 2m left``, or what is known so far.

    The examples/s are the last Epoch line's; before one, the newest Step line's: its global
    batch (the Training line's "batches of N": --batch_size times the synchronous replicas;
    with a ps, one worker's batch) x 1000 / its AvgTime, the epoch's milliseconds per global
    batch so far. A log that begins at a resume point (a restarted chief's pod) has Step
    lines of epoch e and no Epoch line before them: e - 1 epochs are done.
    """
    if progress.done and progress.test_accuracy is not None:
        return (
            f"finished: test accuracy {progress.test_accuracy:.4f}, final cost "
            f"{progress.final_cost:.4f}, total time {progress.total_time_s:.0f}s"
        )
    if not progress.epochs and not progress.steps:
        return "no progress lines yet"
    total, done, in_epoch = position(progress)
    last = progress.epochs[-1] if progress.epochs else None
    step = progress.steps[-1] if progress.steps else None
    parts = [f"epoch {done} of {total if total else '?'} done"]
    if in_epoch:
        parts[0] += f" (epoch {in_epoch['epoch']}: batch {in_epoch['batch']} of {in_epoch['batches']})"
    if step and (in_epoch or not last):
        parts.append(f"cost {step['cost']:.4f}")
    elif last:
        parts.append(f"cost {last['train_cost']:.4f}")
    if last:
        parts.append(f"test accuracy {last['test_accuracy']:.4f}")
    rate = None
    if last and "examples_per_s" in last:
        rate = last["examples_per_s"]
    elif step and progress.global_batch and step["avg_ms"] > 0:
        rate = progress.global_batch * 1000 / step["avg_ms"]
    if rate:
        parts.append(f"{rate:.0f} examples/s")
    left = time_left(progress, total, done, in_epoch)
    if left is not None:
        parts.append(f"about {age(left)} left")
    return ", ".join(parts)


def trainer_status_line(status: RunStatus) -> str:
    """The trainer status in one line: ``42 %, about 3m left; test_accuracy 0.9800, loss
    0.0800 (annotation tf-mnist.io/trainer-status of Job mnist-chief-0, 2026-01-02T11:59:58Z)``,
    or ``(from the chief's log: no annotation yet)``; ``?`` for a value not known. The
    annotation is whatever the Job holds: a value of the wrong type reads as not known."""
    found = status.trainer_status or {}
    percent, left = found.get("progressPercentage"), found.get("estimatedRemainingSeconds")
    head = f"{percent if isinstance(percent, int) else '?'} %"
    if isinstance(left, (int, float)) and percent != 100:
        head += f", about {age(left)} left"
    listed = found.get("metrics")
    listed = listed if isinstance(listed, list) else []
    metrics = ", ".join(f"{m.get('name')} {m.get('value')}" for m in listed if isinstance(m, dict))
    chief = next((r.job for r in status.tasks if r.task.startswith("chief-")), f"{status.prefix}-chief-0")
    where = (
        f"annotation {ANNOTATION} of Job {chief}, {found.get('lastUpdatedTime') or '?'}"
        if status.trainer_status_source == "annotation"
        else "from the chief's log: no annotation yet"
    )
    return f"{head}{'; ' + metrics if metrics else ''} ({where})"


def render(status: RunStatus) -> str:
    """The view as text."""
    head = f"Run {status.prefix} (namespace {status.namespace}"
    head += f", run id {status.run_id})" if status.run_id else ")"
    lines = [f"{head}: {status.state.upper()}", ""]
    # The staging Job heads the table until it completes: before that no task Job exists.
    staging = [status.staging] if status.staging is not None and status.staging.state != "Complete" else []
    table = [("TASK", "JOB", "STATUS", "POD", "RESTARTS", "NODE", "AGE")]
    table += [
        (r.task, r.job, r.state, r.phase, str(r.restarts), r.node, age(r.age_s))
        for r in staging + status.tasks
    ]
    lines += _columns(table)
    why = [f"  {r.task}: {w}" for r in staging + status.tasks for w in r.why]
    why += [
        f"  {r.task}: ended by the run monitor: {r.ended_because}" for r in status.tasks if r.ended_because
    ]
    if why:
        lines += ["", "Why:", *why]
    unbound = {c: p for c, p in status.claims.items() if p != "Bound"}
    if unbound:
        lines += [
            "",
            *(f"Claim {c}: {p}, not Bound (the pods that mount it wait)" for c, p in unbound.items()),
        ]
    if status.warnings:
        lines += ["", "Warnings (newest first):"]
        lines += [
            "  " + line
            for line in _columns(
                [("AGE", "OBJECT", "REASON", "COUNT", "MESSAGE")]
                + [
                    (age(w.age_s), w.object, w.reason, str(w.count), _one_line(w.message))
                    for w in status.warnings
                ]
            )
        ]
    lines += ["", f"Chief:       {progress_line(status.progress)}"]
    if status.trainer_status is not None:
        lines.append(f"Progress:    {trainer_status_line(status)}")
    lines += cost_lines(status.cost)
    if status.monitor:
        lines.append(
            f"Monitor:     {status.monitor} (job {status.prefix}-monitor; kubectl --namespace "
            f"{status.namespace} logs job/{status.prefix}-monitor)"
        )
        lines += [f"             {why}" for why in status.monitor_why]
    if staging:
        lines.append(f"Staging:     kubectl --namespace {status.namespace} logs job/{staging[0].job}")
    if status.log_dir:
        lines.append(
            f"Logs:        {status.log_dir}/logs/<task>.log on the shared volume; "
            f"kubectl --namespace {status.namespace} logs job/{status.prefix}-chief-0"
        )
    lines.append(f"TensorBoard: {status.tensorboard}")
    lines += status.notes
    return "\n".join(lines)


def as_json(status: RunStatus) -> dict[str, Any]:
    """The same facts as ``render``, machine-readable (``-o json``): the RunStatus's fields,
    ``exitCode``, and ``progress`` as the parsed values plus the line the text view prints."""
    out = asdict(status)
    out["exit_code"] = status.exit_code
    out["progress"] = {"line": progress_line(status.progress), **asdict(status.progress)}
    return out


def _columns(table: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_runs(runs_dir: str, runs: list[dict], current: str | None) -> str:
    """The runs as a table, oldest first; ``*`` marks ``current`` (the stack's runDir)."""
    if not runs:
        return f"No runs in {runs_dir} yet."
    table = [("", "RUN", "STATE", "ACCURACY", "EPOCHS", "MODEL", "CHECKPOINTS", "EXPORT", "RUN ID")]
    for run in runs:
        accuracy = "-" if run["test_accuracy"] is None else f"{run['test_accuracy']:.4f}"
        mark = "*" if current and current.rstrip("/").endswith("/" + run["key"]) else ""
        table.append(
            (
                mark,
                run["key"],
                run["state"],
                accuracy,
                str(run["epochs"] or "-"),
                run["model"] or "-",
                str(run["checkpoints"]),
                "yes" if run["export"] else "no",
                run["run_id"] or "-",
            )
        )
    lines = [f"Runs in {runs_dir} (* = the stack's current configuration):", "", *_columns(table)]
    return "\n".join(lines)
