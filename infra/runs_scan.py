"""The runs of one stack on the shared volume, read from the files the trainer leaves there.

Standard library only: ``python -m infra.status --runs`` runs this file's source in the
stack's TensorBoard pod (``kubectl exec ... python -c SOURCE RUNS_DIR``), which mounts the
volume and has Python but not this repository; ``--volume`` reads a local copy the same way.

A run directory is ``<runs dir>/<key>`` (infra/runs.py). Its state, from the files:
``finished`` (``result.json``, written by the chief at the end), ``running`` (a chief
heartbeat younger than ``HEARTBEAT_FRESH_S``), else ``stopped`` (checkpoints but no live
chief: interrupted, failed, or waiting for pods) or ``empty``.
"""

from __future__ import annotations

import json
import os
import sys
import time

#: A heartbeat older than this is no live chief: the chief rewrites it every 5 s, and NFS
#: attribute caching can show a writer's mtime up to 60 s late.
HEARTBEAT_FRESH_S = 90.0


def _run_id(path: str) -> str | None:
    """The ``run_id=`` line of a heartbeat or done marker, None when there is no such file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    return next((line[len("run_id=") :] for line in lines if line.startswith("run_id=")), "")


def scan_run(path: str, now: float) -> dict:
    """One run directory as a dict: key, state, run_id (of the marker last written),
    test_accuracy and epochs (from result.json; None before the end), checkpoints (how
    many ``ckpt-N.index`` files), export (whether ``export/`` exists) and mtime (seconds)."""
    cluster = os.path.join(path, "cluster")
    result = None
    try:
        with open(os.path.join(path, "result.json"), encoding="utf-8") as file:
            result = json.load(file)
    except (OSError, ValueError):
        pass
    try:
        heartbeat_age = now - os.stat(os.path.join(cluster, "heartbeat")).st_mtime
    except OSError:
        heartbeat_age = None
    checkpoints = 0
    for _root, _dirs, files in os.walk(path):
        checkpoints += sum(1 for f in files if f.startswith("ckpt-") and f.endswith(".index"))
    if result is not None:
        state = "finished"
    elif heartbeat_age is not None and heartbeat_age < HEARTBEAT_FRESH_S:
        state = "running"
    elif checkpoints or heartbeat_age is not None:
        state = "stopped"
    else:
        state = "empty"
    run_id = _run_id(os.path.join(cluster, "done")) or _run_id(os.path.join(cluster, "heartbeat"))
    return {
        "key": os.path.basename(path),
        "state": state,
        "run_id": run_id or None,
        "test_accuracy": (result or {}).get("test_accuracy"),
        "epochs": (result or {}).get("epochs"),
        "model": (result or {}).get("model"),
        "checkpoints": checkpoints,
        "export": os.path.isdir(os.path.join(path, "export")),
        "mtime": os.stat(path).st_mtime,
    }


def scan(runs_dir: str, now: float | None = None) -> list[dict]:
    """Every run directory under ``runs_dir`` (``scan_run``), oldest first; [] when it does
    not exist yet."""
    now = time.time() if now is None else now
    try:
        names = sorted(os.listdir(runs_dir))
    except FileNotFoundError:
        return []
    runs = [
        scan_run(os.path.join(runs_dir, n), now)
        for n in names
        if not n.startswith(".") and os.path.isdir(os.path.join(runs_dir, n))
    ]
    return sorted(runs, key=lambda r: r["mtime"])


if __name__ == "__main__":
    print(json.dumps(scan(sys.argv[1])))
