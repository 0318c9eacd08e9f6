"""``python -m infra.status``: how far a stack's training run is, in one command (like
``arena get``).

Prints one row per task (Job, its state, the pod's phase, restarts, node, age), the chief's
latest progress (epoch of total, cost, test accuracy, examples/s, an estimate of the time
left) parsed from its log, and where the logs and TensorBoard are. ``--watch`` refreshes
until the run ends.

Where the run is: ``--kubeconfig``, ``--namespace`` and ``--prefix`` (the stack's namePrefix),
each defaulting to the current stack's outputs (``pulumi stack output --json
--show-secrets``, run in the project directory). The cluster is read with ``kubectl`` from
PATH (``--kubectl`` to name another).

``--runs`` lists instead every run of the stack on the shared volume (one directory per
training configuration; infra/settings/runs.py) with its state, test accuracy and epochs, read
through the TensorBoard pod (``kubectl exec``; infra/runs_scan.py) or, with ``--volume DIR``,
from a local directory that holds the volume's files (a hostPath, a mounted NFS export).

Exit status: 0 the run finished (the chief's Job completed), 1 it failed (a task Job
failed), 3 it is still going (pending or running), 4 the run could not be read (no kubectl,
the API server refused, no task Jobs of that prefix); 2 is argparse's bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, Protocol

from trainer.contract.progress import ParsedLog, parse_log

EXIT_FINISHED, EXIT_FAILED, EXIT_RUNNING, EXIT_UNREADABLE = 0, 1, 3, 4
PROJECT_DIR = Path(__file__).resolve().parents[1]
INSTANCE_LABEL = "app.kubernetes.io/instance"
TASK_TYPE_LABEL = "tf-replica-type"
TASK_INDEX_LABEL = "tf-replica-index"
TASK_ORDER = {"chief": 0, "worker": 1, "ps": 2}


class StatusError(RuntimeError):
    """The run cannot be read: the message says what and how to fix it."""


class Cluster(Protocol):
    """What the status view reads from Kubernetes (kubectl, or recorded objects in tests)."""

    def get(self, kinds: str, selector: str) -> list[dict]:
        """The objects of ``kinds`` (e.g. "jobs,pods") matching the label ``selector``."""

    def logs(self, pod: str) -> str:
        """The whole log of ``pod``'s container ("" when it has none yet)."""


class Kubectl:
    """``kubectl --kubeconfig K --namespace NS ...``."""

    def __init__(self, kubeconfig: Optional[str], namespace: str, kubectl: str = "kubectl",
                 timeout_s: float = 30.0) -> None:
        path = shutil.which(kubectl)
        if path is None:
            raise StatusError(f"{kubectl} not found on PATH: install kubectl or pass --kubectl")
        self.base = [path, *(["--kubeconfig", kubeconfig] if kubeconfig else []),
                     "--namespace", namespace]
        self.timeout_s = timeout_s

    def _run(self, *args: str) -> str:
        try:
            proc = subprocess.run([*self.base, *args], capture_output=True, text=True,
                                  timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise StatusError(f"kubectl {' '.join(args)}: no answer in {self.timeout_s:g}s")
        if proc.returncode != 0:
            raise StatusError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def get(self, kinds: str, selector: str) -> list[dict]:
        return json.loads(self._run("get", kinds, "--selector", selector, "--output",
                                    "json"))["items"]

    def logs(self, pod: str) -> str:
        try:
            return self._run("logs", pod)
        except StatusError:  # a pod still pulling its image, or gone
            return ""

    def exec(self, target: str, argv: list[str]) -> str:
        """``kubectl exec TARGET -- ARGV...``: its standard output."""
        return self._run("exec", target, "--", *argv)


@dataclass
class TaskRow:
    """One task: its Job and newest pod."""

    task: str
    job: str
    state: str  # Complete, Failed, Running, Pending
    phase: str  # the newest pod's phase, or "-"
    restarts: int
    node: str
    age_s: Optional[float]


@dataclass
class RunStatus:
    """Everything the view prints."""

    prefix: str
    namespace: str
    state: str  # Finished, Failed, Running, Pending
    tasks: list[TaskRow]
    progress: ParsedLog
    log_dir: Optional[str]
    chief_pod: Optional[str]
    tensorboard: str
    run_id: Optional[str] = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"Finished": EXIT_FINISHED, "Failed": EXIT_FAILED}.get(self.state, EXIT_RUNNING)


def _time(stamp: Optional[str]) -> Optional[datetime]:
    if not stamp:
        return None
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def _condition(obj: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in obj.get("status", {}).get("conditions") or [])


def job_state(job: dict) -> str:
    """Complete, Failed, Running (a pod active) or Pending."""
    if _condition(job, "Complete"):
        return "Complete"
    if _condition(job, "Failed"):
        return "Failed"
    if job.get("status", {}).get("active"):
        return "Running"
    return "Pending"


def collect(cluster: Cluster, prefix: str, namespace: str, now: datetime,
            tensorboard_url: Optional[str] = None, run_id: Optional[str] = None) -> RunStatus:
    """Read the run of ``prefix`` through ``cluster``.

    Raises:
        StatusError: no task Job carries the prefix's instance label.
    """
    objects = cluster.get("jobs,pods", f"{INSTANCE_LABEL}={prefix}")
    jobs = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Job"
            and TASK_TYPE_LABEL in o["metadata"].get("labels", {})}
    if not jobs:
        raise StatusError(f"no task Jobs labelled {INSTANCE_LABEL}={prefix} in namespace "
                          f"{namespace}: check --prefix, --namespace and --kubeconfig (or "
                          "whether `pulumi up` has run)")
    pods: dict[str, list[dict]] = {}
    for obj in objects:
        if obj.get("kind") == "Pod":
            owner = obj["metadata"].get("labels", {}).get("job-name")
            pods.setdefault(owner, []).append(obj)
    rows, chief_pod, log_dir = [], None, None
    for name, job in jobs.items():
        labels = job["metadata"]["labels"]
        task = f"{labels[TASK_TYPE_LABEL]}-{labels.get(TASK_INDEX_LABEL, '0')}"
        mine = sorted(pods.get(name, []),
                      key=lambda p: p["metadata"].get("creationTimestamp") or "")
        newest = mine[-1] if mine else None
        restarts = int(job.get("status", {}).get("failed") or 0) + sum(
            int(c.get("restartCount") or 0) for p in mine
            for c in p.get("status", {}).get("containerStatuses") or [])
        started = _time(job.get("status", {}).get("startTime")
                        or job["metadata"].get("creationTimestamp"))
        rows.append(TaskRow(
            task=task, job=name, state=job_state(job),
            phase=newest["status"].get("phase", "-") if newest else "-", restarts=restarts,
            node=(newest or {}).get("spec", {}).get("nodeName") or "-",
            age_s=(now - started).total_seconds() if started else None))
        if labels[TASK_TYPE_LABEL] == "chief":
            chief_pod = newest["metadata"]["name"] if newest else None
            args = (job["spec"]["template"]["spec"]["containers"][0].get("args") or [])
            if "--log_dir" in args[:-1]:
                log_dir = args[args.index("--log_dir") + 1]
            if run_id is None and "--run_id" in args[:-1]:
                run_id = args[args.index("--run_id") + 1]
    rows.sort(key=lambda r: (TASK_ORDER.get(r.task.split("-")[0], 9),
                             int(r.task.rsplit("-", 1)[1])))
    chief = next((r for r in rows if r.task.startswith("chief-")), None)
    if any(r.state == "Failed" for r in rows):
        state = "Failed"
    elif chief is not None and chief.state == "Complete":
        state = "Finished"
    elif any(r.state == "Running" for r in rows):
        state = "Running"
    else:
        state = "Pending"
    progress = parse_log(cluster.logs(chief_pod)) if chief_pod else ParsedLog(steps=[])
    if tensorboard_url:
        tensorboard = tensorboard_url
    else:
        tensorboard = (f"kubectl --namespace {namespace} port-forward "
                       f"service/{prefix}-tensorboard 6006:80, then http://127.0.0.1:6006/")
    return RunStatus(prefix=prefix, namespace=namespace, state=state, tasks=rows,
                     progress=progress, log_dir=log_dir, chief_pod=chief_pod,
                     tensorboard=tensorboard, run_id=run_id)


def age(seconds: Optional[float]) -> str:
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
    3200 examples/s, about 2m left``, or what is known so far."""
    if progress.done and progress.test_accuracy is not None:
        return (f"finished: test accuracy {progress.test_accuracy:.4f}, final cost "
                f"{progress.final_cost:.4f}, total time {progress.total_time_s:.0f}s")
    total = progress.epochs_total or (progress.epochs[-1]["epochs"] if progress.epochs else None)
    if not progress.epochs and not progress.steps:
        return "no progress lines yet"
    last = progress.epochs[-1] if progress.epochs else None
    done = last["epoch"] if last else 0
    parts = [f"epoch {done} of {total if total else '?'} done"]
    step = progress.steps[-1] if progress.steps else None
    in_epoch = step if step and step["epoch"] > done else None
    if in_epoch:
        parts[0] += f" (epoch {in_epoch['epoch']}: batch {in_epoch['batch']} of " \
                    f"{in_epoch['batches']})"
    if in_epoch or not last:
        parts.append(f"cost {step['cost']:.4f}")
    else:
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


def time_left(progress: ParsedLog, total: Optional[int], done: int,
              in_epoch: Optional[dict]) -> Optional[float]:
    """Seconds left: the remaining epochs at the mean epoch time so far, less the part of
    the current epoch already done; from the Step lines' AvgTime before the first epoch."""
    if not total:
        return None
    if progress.epochs:
        per_epoch = sum(e["epoch_time_s"] for e in progress.epochs) / len(progress.epochs)
    elif in_epoch:
        per_epoch = in_epoch["avg_ms"] / 1000 * in_epoch["batches"]
    else:
        return None
    share = in_epoch["batch"] / in_epoch["batches"] if in_epoch else 0.0
    return max(0.0, (total - done - share) * per_epoch)


def render(status: RunStatus) -> str:
    """The view as text."""
    head = f"Run {status.prefix} (namespace {status.namespace}"
    head += f", run id {status.run_id})" if status.run_id else ")"
    lines = [f"{head}: {status.state.upper()}", ""]
    table = [("TASK", "JOB", "STATUS", "POD", "RESTARTS", "NODE", "AGE")]
    table += [(r.task, r.job, r.state, r.phase, str(r.restarts), r.node, age(r.age_s))
              for r in status.tasks]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
              for row in table]
    lines += ["", f"Chief:       {progress_line(status.progress)}"]
    if status.log_dir:
        lines.append(f"Logs:        {status.log_dir}/logs/<task>.log on the shared volume; "
                     f"kubectl --namespace {status.namespace} logs job/{status.prefix}-chief-0")
    lines.append(f"TensorBoard: {status.tensorboard}")
    lines += status.notes
    return "\n".join(lines)


def read_runs(runs_dir: str, prefix: str, cluster: Optional[Kubectl], volume: Optional[str]) -> list[dict]:
    """The runs under ``runs_dir`` (``runs_scan.scan``): from ``volume``, the local directory
    that holds the volume's files (``runs_dir`` is ``<mountPath>/runs/<name>`` there, so
    ``<volume>/runs/<name>``), else through ``cluster`` in the ``<prefix>-tensorboard`` pod.

    Raises:
        StatusError: the pod cannot run the scan, or it printed no JSON.
    """
    from infra import runs_scan

    if volume is not None:
        return runs_scan.scan(str(Path(volume, *Path(runs_dir).parts[-2:])))
    assert cluster is not None
    text = cluster.exec(f"deployment/{prefix}-tensorboard",
                        ["python", "-c", Path(runs_scan.__file__).read_text(), runs_dir])
    try:
        return json.loads(text)
    except ValueError:
        raise StatusError(f"the scan of {runs_dir} in {prefix}-tensorboard printed no JSON: {text[:200]!r}") from None


def render_runs(runs_dir: str, runs: list[dict], current: Optional[str]) -> str:
    """The runs as a table, oldest first; ``*`` marks ``current`` (the stack's runDir)."""
    if not runs:
        return f"No runs in {runs_dir} yet."
    table = [("", "RUN", "STATE", "ACCURACY", "EPOCHS", "MODEL", "CHECKPOINTS", "EXPORT", "RUN ID")]
    for run in runs:
        accuracy = "-" if run["test_accuracy"] is None else f"{run['test_accuracy']:.4f}"
        mark = "*" if current and current.rstrip("/").endswith("/" + run["key"]) else ""
        table.append((mark, run["key"], run["state"], accuracy, str(run["epochs"] or "-"), run["model"] or "-",
                      str(run["checkpoints"]), "yes" if run["export"] else "no", run["run_id"] or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [f"Runs in {runs_dir} (* = the stack's current configuration):", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines)


def stack_outputs(cwd: Path = PROJECT_DIR) -> dict:
    """``pulumi stack output --json --show-secrets`` of the current stack."""
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise StatusError("pulumi not found on PATH: pass --kubeconfig, --namespace and "
                          "--prefix, or run where the Pulumi CLI is")
    proc = subprocess.run([pulumi, "stack", "output", "--json", "--show-secrets"], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise StatusError(f"pulumi stack output: {proc.stderr.strip()} (or pass --kubeconfig, "
                          "--namespace and --prefix)")
    return json.loads(proc.stdout or "{}")


def resolve(args: argparse.Namespace,
            outputs: Callable[[], dict] = stack_outputs) -> tuple[Optional[str], str, str,
                                                                 Optional[str], Optional[str]]:
    """(kubeconfig path or None, namespace, prefix, TensorBoard URL, run id) from the flags,
    the missing ones from the stack's outputs. A kubeconfig output holding the file's content
    (the stack created the cluster) is written to a private temporary file."""
    kubeconfig, namespace, prefix = args.kubeconfig, args.namespace, args.prefix
    url = run_id = None
    if kubeconfig is None or namespace is None or prefix is None:
        out = outputs()
        namespace = namespace or out.get("namespace")
        if prefix is None and out.get("jobNames"):
            prefix = out["jobNames"][0].rsplit("-", 2)[0]  # <prefix>-chief-0
        url, run_id = out.get("tensorboardUrl"), out.get("runId")
        if kubeconfig is None and out.get("kubeconfig"):
            kubeconfig = str(out["kubeconfig"])
            if "\n" in kubeconfig or kubeconfig.lstrip().startswith(("apiVersion", "{")):
                fd, path = tempfile.mkstemp(prefix="tf-mnist-kubeconfig-", suffix=".yaml")
                with os.fdopen(fd, "w") as file:
                    file.write(kubeconfig)
                kubeconfig = path
    if not namespace or not prefix:
        raise StatusError("no namespace or prefix: pass --namespace and --prefix (the stack's "
                          "namespace and namePrefix)")
    return kubeconfig, namespace, prefix, url, run_id


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.status",
        description="Show a stack's training run: its tasks, the chief's progress, logs and "
                    "TensorBoard. Exit status: 0 finished, 1 failed, 3 still going, 4 "
                    "unreadable.")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the stack's output)")
    parser.add_argument("--namespace", help="namespace (default: the stack's output)")
    parser.add_argument("--prefix", help="the stack's namePrefix, e.g. mnist (default: from "
                                         "the stack's jobNames output)")
    parser.add_argument("--watch", action="store_true", help="refresh until the run ends")
    parser.add_argument("--interval", type=float, default=5.0,
                        help="seconds between refreshes with --watch (default 5)")
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="with --watch, give up after this many seconds (exit 3); "
                             "0 (the default) waits for the end")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl binary")
    parser.add_argument("--runs", action="store_true",
                        help="list every run of the stack on the volume (state, test accuracy, "
                             "epochs) instead of the current run's tasks")
    parser.add_argument("--runs_dir", help="with --runs: the stack's runs directory (default: "
                                           "the stack's runsDir output)")
    parser.add_argument("--volume", help="with --runs: read the runs from this local directory "
                                         "holding the volume's files instead of through the "
                                         "TensorBoard pod")
    return parser


def main(argv: Optional[list[str]] = None, cluster: Optional[Cluster] = None,
         outputs: Callable[[], dict] = stack_outputs,
         clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
         sleep: Callable[[float], None] = time.sleep) -> int:
    args = build_parser().parse_args(argv)
    if args.runs:
        return _main_runs(args, outputs)
    try:
        kubeconfig, namespace, prefix, url, run_id = resolve(args, outputs)
        cluster = cluster or Kubectl(kubeconfig, namespace, args.kubectl)
        started = time.monotonic()
        while True:
            status = collect(cluster, prefix, namespace, clock(), url, run_id)
            if args.watch and sys.stdout.isatty():
                print("\033[H\033[2J", end="")
            print(render(status), flush=True)
            if not args.watch or status.exit_code != EXIT_RUNNING:
                return status.exit_code
            if args.timeout and time.monotonic() - started > args.timeout:
                return EXIT_RUNNING
            sleep(args.interval)
            print(flush=True)
    except StatusError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    except KeyboardInterrupt:
        return EXIT_RUNNING


def _main_runs(args: argparse.Namespace, outputs: Callable[[], dict]) -> int:
    """``--runs``: print the runs table; 0 once read, 4 when unreadable."""
    try:
        from_cluster = args.volume is None
        wanted = args.runs_dir is None or (from_cluster and None in (args.kubeconfig, args.namespace, args.prefix))
        out = outputs() if wanted else {}
        runs_dir = args.runs_dir or out.get("runsDir")
        if not runs_dir:
            raise StatusError("no runs directory: pass --runs_dir (the stack's runsDir output)")
        cluster, prefix = None, args.prefix or ""
        if from_cluster:
            kubeconfig, namespace, prefix, _, _ = resolve(args, lambda: out)
            cluster = Kubectl(kubeconfig, namespace, args.kubectl)
        print(render_runs(runs_dir, read_runs(runs_dir, prefix, cluster, args.volume), out.get("runDir")))
        return 0
    except StatusError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_UNREADABLE

if __name__ == "__main__":
    sys.exit(main())
