"""The chief's progress under Kubeflow Trainer v2's names, written on the chief's Job.

Kubeflow Trainer v2 reports a TrainJob's progress in ``status.trainerStatus``:
``progressPercentage`` (0-100), ``estimatedRemainingSeconds``, ``metrics`` (``[{"name": ...,
"value": ...}]``, each value a string) and ``lastUpdatedTime`` (RFC 3339). This stack runs
plain batch/v1 Jobs, so the run monitor (infra/run_monitor.py) writes the same object, as
JSON, in the annotation ``ANNOTATION`` of the run's chief Job (docs/design.md says why an
annotation): every poll it reads the tail of the chief pod's log (``TAIL_LINES``; the guide's
progress lines, trainer/contract/progress.py's parser) and writes the object when it changed;
once the chief's Job has completed it writes it a last time, at 100 %, before it exits.
``python -m infra.status`` shows it.

Standard library only: delivered beside the script in the monitor's ConfigMap
(infra/components/monitor.py), as infra/pod_progress.py is. The parser is handed in: the
monitor loads trainer/contract/progress.py from its ConfigMap too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.monitor_api import Calls
    from trainer.contract.progress import ParsedLog

#: The chief Job's annotation that holds the object, JSON.
ANNOTATION = "tf-mnist.io/trainer-status"
#: Lines of the chief's log read each poll (the API's ``tailLines``): the newest Step and Epoch
#: lines and, at the end, the closing lines. The chief prints one Step line every
#: --log_interval batches (100; the stack does not change it) and one Epoch line per epoch: an
#: MNIST epoch of 60,000 examples has at most 30,000 batches, 300 Step lines, so 500 lines
#: reach back past the last Epoch line unless other output crowds them out; then the metrics
#: lack that epoch's values until the next one, and the percentage and time left still follow
#: from the Step lines. The run's length comes from its Job (``--epochs``) when the tail no
#: longer holds the Training line.
TAIL_LINES = 500
#: The metrics, in order: the name written -> ParsedLog.logged's key (each value exactly as the
#: chief printed it: the newest Step, Epoch or closing line that has it).
METRICS = {
    "test_accuracy": "test_accuracy",
    "loss": "cost",
    "train_accuracy": "train_accuracy",
    "test_loss": "test_cost",
    "examples_per_second": "examples_per_s",
}
#: The most a run still going shows: 100 % means the chief is done (its ``done`` line, or its
#: Job complete), not that the last epoch's batches are (the evaluation and the export follow).
RUNNING_MAX = 99


def position(parsed: ParsedLog, epochs: int | None = None) -> tuple[int | None, int, dict | None]:
    """Where the run is: (its epochs, from the Training or an Epoch line, else ``epochs``, None
    when unknown; the epochs done; the newest Step line when it is of an epoch not done, else
    None). A log that begins at a resume point (a restarted chief's pod) has Step lines of
    epoch e and no Epoch line before them: e - 1 epochs are done."""
    total = parsed.epochs_total or (parsed.epochs[-1]["epochs"] if parsed.epochs else None) or epochs
    last = parsed.epochs[-1] if parsed.epochs else None
    step = parsed.steps[-1] if parsed.steps else None
    done = max(last["epoch"] if last else 0, step["epoch"] - 1 if step else 0)
    return total, done, step if step and step["epoch"] > done else None


def time_left(parsed: ParsedLog, total: int | None, done: int, in_epoch: dict | None) -> float | None:
    """Seconds of training left: the ``total - done`` epochs still to train at the mean
    epoch time of the Epoch lines, less the share of the epoch in progress done; before any
    Epoch line, at the newest Step line's AvgTime x the epoch's batches. Evaluation and
    checkpoints between epochs are not in the Epoch lines' times, so not in this."""
    if not total:
        return None
    if parsed.epochs:
        per_epoch = sum(e["epoch_time_s"] for e in parsed.epochs) / len(parsed.epochs)
    elif in_epoch:
        per_epoch = in_epoch["avg_ms"] / 1000 * in_epoch["batches"]
    else:
        return None
    share = in_epoch["batch"] / in_epoch["batches"] if in_epoch else 0.0
    return max(0.0, (total - done - share) * per_epoch)


def rfc3339(now: float) -> str:
    """``now`` (seconds since the epoch) as ``2026-01-02T12:00:00Z``."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def trainer_status(
    parsed: ParsedLog,
    now: float,
    *,
    epochs: int | None = None,
    finished: bool = False,
    before: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The object for ``parsed`` (the chief's log, or its tail), None before any progress line.

    Args:
        now: seconds since the epoch (``lastUpdatedTime``).
        epochs: the run's epochs (its Job's ``--epochs``), when the log does not say.
        finished: the chief's Job completed: 100 %, 0 s left, the metrics of the log, or
            without any (a log that cannot be read) ``before``'s.
        before: the object written last (``read``), or None.

    Returns:
        ``{"progressPercentage": int 0-100 or None when the run's epochs are unknown,
        "estimatedRemainingSeconds": int or None before one epoch's pace is known,
        "metrics": [{"name": METRICS' name, "value": the text the chief printed}],
        "lastUpdatedTime": rfc3339(now)}``. Short of the end, the percentage is the epochs done
        plus the share of batches of the epoch in progress, rounded down, at most RUNNING_MAX.
    """
    metrics = [
        {"name": name, "value": parsed.logged[key]} for name, key in METRICS.items() if key in parsed.logged
    ]
    percent: int | None
    left: int | None
    if finished or parsed.done:
        percent, left = 100, 0
        metrics = metrics or [dict(m) for m in (before or {}).get("metrics") or []]
    elif not (parsed.steps or parsed.epochs or parsed.epochs_total):
        return None
    else:
        total, done, in_epoch = position(parsed, epochs)
        share = in_epoch["batch"] / in_epoch["batches"] if in_epoch else 0.0
        percent = min(RUNNING_MAX, math.floor(100 * (done + share) / total)) if total else None
        seconds = time_left(parsed, total, done, in_epoch)
        left = None if seconds is None else round(seconds)
    return {
        "progressPercentage": percent,
        "estimatedRemainingSeconds": left,
        "metrics": metrics,
        "lastUpdatedTime": rfc3339(now),
    }


def read(job: Mapping) -> dict[str, Any] | None:
    """The object in ``job``'s ANNOTATION, None without one or when it holds no JSON object."""
    text = (job.get("metadata", {}).get("annotations") or {}).get(ANNOTATION)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def changed(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether ``new`` says something ``old`` did not: any key but ``lastUpdatedTime``."""
    if old is None:
        return True
    return {k: v for k, v in new.items() if k != "lastUpdatedTime"} != {
        k: v for k, v in old.items() if k != "lastUpdatedTime"
    }


def job_epochs(job: Mapping) -> int | None:
    """The ``--epochs`` in the Job's first container's args, or None."""
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    args = containers[0].get("args") or []
    found = args[args.index("--epochs") + 1] if "--epochs" in args[:-1] else None
    return int(found) if found is not None and str(found).isdigit() else None


def chief_pod(job: Mapping, pods: Sequence[Mapping]) -> Mapping | None:
    """The newest pod of ``job`` whose container has started (phase not Pending: a pod that
    waits has no log yet), None without one."""
    name = job["metadata"]["name"]
    started = [
        p
        for p in pods
        if (p.get("metadata", {}).get("labels") or {}).get("job-name") == name
        and p.get("status", {}).get("phase") not in (None, "Pending")
    ]
    return max(started, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)


def _complete(job: Mapping) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


class Reporter:
    """Writes the chief's progress on its Job, one ``poll`` at a time.

    Args:
        api: the monitor's API calls (``pod_log``, ``annotate_job``).
        namespace: the run's namespace.
        parse: trainer/contract/progress.py's ``parse_log``.
        log: the monitor's log function; a note is logged once until it changes.
    """

    def __init__(
        self,
        api: Calls,
        namespace: str,
        parse: Callable[[str], ParsedLog],
        log: Callable[[str], None],
        tail_lines: int = TAIL_LINES,
    ) -> None:
        self.api, self.namespace, self.parse, self.log, self.tail_lines = (
            api,
            namespace,
            parse,
            log,
            tail_lines,
        )
        self.last_note = ""

    def _note(self, note: str) -> None:
        if note != self.last_note:
            self.log(note)
            self.last_note = note

    def poll(self, chief: Mapping | None, pods: Sequence[Mapping], now: float) -> None:
        """Write the object on ``chief`` (the run's chief Job as listed; None: none yet) when it
        changed. While the run goes a failure (a log that cannot be read, a refused patch) is
        logged and the object left as it was: progress never stops the watch.

        Raises:
            Exception: what writing the final object (the chief's Job complete) raised: the
                monitor's poll fails and is tried again, so it exits only once it is written.
        """
        if chief is None:
            return
        finished = _complete(chief)
        try:
            status = self._status(chief, pods, now, finished)
            if status is not None and changed(status, read(chief)):
                name = chief["metadata"]["name"]
                text = json.dumps(status, separators=(",", ":"))
                self.api.annotate_job(self.namespace, name, {ANNOTATION: text})
                if finished:  # the run's writes are in the annotation: one log line a poll is noise
                    self._note(f"final trainer status of Job {name}: {text}")
        except Exception as err:  # noqa: BLE001 - progress is a report: it must not stop the watch
            if finished:
                raise
            self._note(f"cannot report the chief's progress ({err}): left as it was")

    def _status(self, chief: Mapping, pods: Sequence[Mapping], now: float, finished: bool) -> dict | None:
        """The object from the newest chief pod's log tail; None to write nothing. A log that
        cannot be read at the end leaves the metrics written before (``trainer_status``)."""
        pod, text = chief_pod(chief, pods), None
        if pod is not None:
            containers = pod.get("spec", {}).get("containers") or [{}]
            try:
                text = self.api.pod_log(
                    self.namespace, pod["metadata"]["name"], self.tail_lines, containers[0].get("name")
                )
            except Exception as err:  # noqa: BLE001 - an unreadable log is noted, never fatal
                self._note(f"cannot read the log of the chief's pod {pod['metadata']['name']}: {err}")
        if text is None and not finished:
            return None
        before = read(chief)
        return trainer_status(
            self.parse(text or ""), now, epochs=job_epochs(chief), finished=finished, before=before
        )
