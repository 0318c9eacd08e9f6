"""``python -m infra.status``: how far a stack's training run is, in one command (like
``arena get``).

Prints one row per task (Job, its state, the pod's phase, restarts, node, age); why a task
does not run (a container's waiting reason with its image, the scheduler's message, a claim
not bound, a failed exit, the run monitor's reason for ending it); the newest Warning events
of the run's objects; the chief's latest progress (epoch of total, cost, test accuracy,
examples/s, an estimate of the time left) parsed from its log; the run monitor's state; an
estimate of the run's cost at list prices (infra/status/cost.py); and where the logs and
TensorBoard are. ``-o json`` prints the same facts as one JSON object.
``--watch`` refreshes until the run ends (with ``-o json``, one object per line).

Where the run is: ``--kubeconfig``, ``--namespace`` and ``--prefix`` (the stack's namePrefix),
each defaulting to the current stack's outputs (``pulumi stack output --json
--show-secrets``, run in the project directory). The cluster is read with ``kubectl`` from
PATH (``--kubectl`` to name another).

``--runs`` lists instead every run of the stack on the shared volume (one directory per
training configuration; infra/runs.py) with its state, test accuracy and epochs, read
through the TensorBoard pod (``kubectl exec``; infra/runs_scan.py) or, with ``--volume DIR``,
from a local directory that holds the volume's files (a hostPath, a mounted NFS export).

Before the task Jobs exist (they wait for the data staging Job), the view shows the staging Job
instead: STAGING PENDING (its pod not running yet, with the scheduler's or the kubelet's reason),
STAGING RUNNING, or STAGING FAILED (with the stager's error or the Job's deadline, and the warnings
of its pods).

Exit status: 0 the run finished (every task Job completed), 1 it failed (a task Job
failed, or the staging Job failed: the run cannot start), 3 it is still going (staging pending
or running, pending, running, or finishing: the chief's Job completed and a
ps or worker has yet to end), 4 the run could not be read (no kubectl,
the API server refused, no task or staging Jobs of that prefix); 2 is argparse's bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from infra.status.collect import EXIT_RUNNING, EXIT_UNREADABLE, collect
from infra.status.kubectl import Cluster, Kubectl, StatusError
from infra.status.render import as_json, render, render_runs
from trainer.contract.printable import printable

PROJECT_DIR = Path(__file__).resolve().parents[2]


def read_runs(runs_dir: str, prefix: str, cluster: Kubectl | None, volume: str | None) -> list[dict]:
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
    text = cluster.exec(
        f"deployment/{prefix}-tensorboard", ["python", "-c", Path(runs_scan.__file__).read_text(), runs_dir]
    )
    try:
        return json.loads(text)
    except ValueError:
        raise StatusError(
            f"the scan of {runs_dir} in {prefix}-tensorboard printed no JSON: {text[:200]!r}"
        ) from None


def stack_outputs(cwd: Path = PROJECT_DIR) -> dict:
    """``pulumi stack output --json --show-secrets`` of the current stack."""
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise StatusError(
            "pulumi not found on PATH: pass --kubeconfig, --namespace and "
            "--prefix, or run where the Pulumi CLI is"
        )
    proc = subprocess.run(
        [pulumi, "stack", "output", "--json", "--show-secrets"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise StatusError(
            f"pulumi stack output: {proc.stderr.strip()} (or pass --kubeconfig, --namespace and --prefix)"
        )
    return json.loads(proc.stdout or "{}")


def resolve(
    args: argparse.Namespace, outputs: Callable[[], dict] = stack_outputs
) -> tuple[str | None, str, str, str | None, str | None]:
    """(kubeconfig or None, namespace, prefix, TensorBoard URL, run id) from the flags, the
    missing ones from the stack's outputs. The kubeconfig is a path, or the file's content where
    the stack created the cluster: ``kubeconfig_file`` gives kubectl a file either way."""
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
    if not namespace or not prefix:
        raise StatusError(
            "no namespace or prefix: pass --namespace and --prefix (the stack's namespace and namePrefix)"
        )
    return kubeconfig, namespace, prefix, url, run_id


@contextlib.contextmanager
def kubeconfig_file(kubeconfig: str | None) -> Iterator[str | None]:
    """A path kubectl can read for ``kubeconfig`` while the block runs: a path (or None) as it
    is; a kubeconfig's content (YAML or JSON: it spans lines or starts with ``apiVersion`` or
    ``{``) in a file only this user can read (0600, in a 0700 temporary directory), removed with
    its directory when the block ends, however it ends. The content holds the cluster's
    credential, so no copy of it outlives the command."""
    if kubeconfig is None or not ("\n" in kubeconfig or kubeconfig.lstrip().startswith(("apiVersion", "{"))):
        yield kubeconfig
        return
    with tempfile.TemporaryDirectory(prefix="tf-mnist-status-") as directory:
        path = os.path.join(directory, "kubeconfig.yaml")
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(kubeconfig)
        yield path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.status",
        description="Show a stack's training run: its tasks, the chief's progress, logs and "
        "TensorBoard, and why a task waits. Exit status: 0 finished, 1 failed (staging included), 3 still "
        "going (staging included), 4 "
        "unreadable.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the stack's output)")
    parser.add_argument("--namespace", help="namespace (default: the stack's output)")
    parser.add_argument(
        "--prefix", help="the stack's namePrefix, e.g. mnist (default: from the stack's jobNames output)"
    )
    parser.add_argument("--watch", action="store_true", help="refresh until the run ends")
    parser.add_argument(
        "--interval", type=float, default=5.0, help="seconds between refreshes with --watch (default 5)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="with --watch, give up after this many seconds (exit 3); 0 (the default) waits for the end",
    )
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl binary")
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (the default) or json: the same facts, machine-readable",
    )
    parser.add_argument(
        "--runs",
        action="store_true",
        help="list every run of the stack on the volume (state, test accuracy, "
        "epochs) instead of the current run's tasks",
    )
    parser.add_argument(
        "--runs_dir", help="with --runs: the stack's runs directory (default: the stack's runsDir output)"
    )
    parser.add_argument(
        "--volume",
        help="with --runs: read the runs from this local directory "
        "holding the volume's files instead of through the "
        "TensorBoard pod",
    )
    return parser


def main(
    argv: list[str] | None = None,
    cluster: Cluster | None = None,
    outputs: Callable[[], dict] = stack_outputs,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    args = build_parser().parse_args(argv)
    if args.runs:
        return _main_runs(args, outputs)
    read: list[dict] = []  # the stack's outputs, once resolve asked for them

    def remembered() -> dict:
        read.append(outputs())
        return read[-1]

    try:
        kubeconfig, namespace, prefix, url, run_id = resolve(args, remembered)
        with kubeconfig_file(kubeconfig) as kubeconfig_path:
            return _show(
                args,
                cluster or Kubectl(kubeconfig_path, namespace, args.kubectl),
                prefix,
                namespace,
                url,
                run_id,
                clock,
                sleep,
                # The prices `pulumi up` looked up (infra/instance_prices.py), for the cost.
                prices=read[0].get("prices") if read else None,
                outputs_read=bool(read),
            )
    except StatusError as err:
        print(f"error: {printable(str(err))}", file=sys.stderr)
        return EXIT_UNREADABLE
    except KeyboardInterrupt:
        return EXIT_RUNNING


def _show(
    args: argparse.Namespace,
    cluster: Cluster,
    prefix: str,
    namespace: str,
    url: str | None,
    run_id: str | None,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
    prices: dict | None = None,
    outputs_read: bool = False,
) -> int:
    """Prints the run's status once, or with ``--watch`` until it ends; returns the exit code.
    ``prices``: the stack output ``prices``, ``outputs_read``: whether the outputs were read
    (infra/status/cost.py ``prices_of``)."""
    started = time.monotonic()
    while True:
        status = collect(cluster, prefix, namespace, clock(), url, run_id, prices, outputs_read)
        if args.output == "json":
            print(json.dumps(as_json(status), sort_keys=True), flush=True)
        else:
            if args.watch and sys.stdout.isatty():
                print("\033[H\033[2J", end="")
            # What the cluster reported (pod messages, events, log lines) as text, not control codes.
            print(printable(render(status)), flush=True)
        if not args.watch or status.exit_code != EXIT_RUNNING:
            return status.exit_code
        if args.timeout and time.monotonic() - started > args.timeout:
            return EXIT_RUNNING
        sleep(args.interval)
        if args.output == "text":
            print(flush=True)


def _main_runs(args: argparse.Namespace, outputs: Callable[[], dict]) -> int:
    """``--runs``: print the runs table; 0 once read, 4 when unreadable."""
    try:
        from_cluster = args.volume is None
        wanted = args.runs_dir is None or (
            from_cluster and None in (args.kubeconfig, args.namespace, args.prefix)
        )
        out = outputs() if wanted else {}
        runs_dir = args.runs_dir or out.get("runsDir")
        if not runs_dir:
            raise StatusError("no runs directory: pass --runs_dir (the stack's runsDir output)")
        cluster, prefix = None, args.prefix or ""
        with contextlib.ExitStack() as scratch:
            if from_cluster:
                kubeconfig, namespace, prefix, _, _ = resolve(args, lambda: out)
                cluster = Kubectl(scratch.enter_context(kubeconfig_file(kubeconfig)), namespace, args.kubectl)
            print(
                printable(
                    render_runs(
                        runs_dir, read_runs(runs_dir, prefix, cluster, args.volume), out.get("runDir")
                    )
                )
            )
        return 0
    except StatusError as err:
        print(f"error: {printable(str(err))}", file=sys.stderr)
        return EXIT_UNREADABLE
