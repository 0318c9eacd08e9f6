"""Helpers for tests that run the stack on the real local cluster: a stack of the project
against the cluster with a hostPath volume, its outputs on that volume, the task Jobs' ends,
TensorBoard through a port-forward and timestamps of kubectl's logs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from infra.settings import DEFAULT_REGISTRY
from tests.preview.engine import PulumiProject, Toolchain, find_toolchain, install_plugins
from trainer.contract.progress import parse_log

from .kube import REPO, Kube, job_condition

#: What a copy of the project holds for `pulumi up`: docker/ for the requirement files that the
#: setup Job installs on a stack without images of its own (infra/bundle.py).
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.dev.yaml", "infra", "trainer", "docker")
#: Task Jobs of a run of 1 chief, 2 workers and 1 ps.
TASKS = ("chief-0", "worker-0", "worker-1", "ps-0")
#: What every pod needs on the local cluster, whatever the test: no GPU, requests that fit one
#: 2-core node, a hostPath volume (this kernel has no NFS server or client), the images
#: tools/local-cluster preloads pulled IfNotPresent (no registry), and the API server where pods
#: reach it (tools/local-cluster's relay on its bridge: no kube-proxy routes the kubernetes
#: Service), for the run monitor. The images are the ones tools/local-cluster builds from
#: docker/ and preloads (imageRegistry: "your own images"; test_base_image_on_cluster.py runs
#: the base image instead). Structured keys, as Pulumi.dev.yaml holds them.
LOCAL_PODS = {
    "imageRegistry": DEFAULT_REGISTRY,
    "monitor.apiServer": "https://10.244.0.1:6443",
    "worker.gpuCount": "0",
    "worker.imagePullPolicy": "IfNotPresent",
    "ps.imagePullPolicy": "IfNotPresent",
    "worker.cpu": "100m",
    "worker.memory": "2Gi",
    "ps.cpu": "100m",
    "ps.memory": "2Gi",
    "persistence.volume.type": "hostPath",
}
#: A stack of the guide's layout on the local cluster: 1 ps (the guide's 2 would only share the
#: same cores), in a namespace of its own.
LOCAL_CLUSTER_CONFIG = LOCAL_PODS | {"ps.number": "1", "createNamespace": "true"}
#: The smallest run the stack makes: a chief and one worker (synchronous, no ps: ps.* are the
#: chief's), one epoch of the image's sample at batch 128 (about 80 steps).
TINY_RUN = LOCAL_PODS | {
    "worker.number": "1",
    "ps.number": "0",
    "hyperparams.epochs": "1",
    "hyperparams.batchsize": "128",
}


def engine_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Toolchain, Path]:
    """The Pulumi toolchain on PATH and a private PULUMI_HOME with its kubernetes provider
    installed; skips without the engine (fails with REQUIRE_PULUMI_ENGINE=1)."""
    toolchain = find_toolchain()
    if toolchain.missing and os.environ.get("REQUIRE_PULUMI_ENGINE") != "1":
        pytest.skip(f"Pulumi engine binaries not on PATH: {', '.join(toolchain.missing)}")
    assert toolchain.has("pulumi") and toolchain.has("pulumi-resource-kubernetes"), toolchain
    home = tmp_path_factory.mktemp("pulumi-home")
    install_plugins(toolchain, home, ["kubernetes"])
    return toolchain, home


#: The owner (uid, gid) of the volume of the tests that need one the pods can write: a user's
#: own directory, which the stack's pods write by running as its owner (``owner_config``), the
#: fix the staging Job's error names. Not the pods' default 10001:10001, so that the stack is
#: seen to follow pods.runAsUser and pods.runAsGroup, and a gid apart from the uid.
VOLUME_OWNER = (2000, 3000)


def pod_volume(prefix: str, owner: tuple[int, int] | None = None) -> Path:
    """A new empty directory under /var/tmp (name starting ``prefix``), mode 0755, for a hostPath
    volume; the caller removes it.

    Without ``owner`` it belongs to root, as a directory a fresh disk, an NFS server or the
    kubelet (hostPath DirectoryOrCreate) makes: pods (non-root, "restricted", so no chown;
    hostPath ignores fsGroup) cannot write it. With ``owner`` (uid, gid) it is that user's.
    Not under pytest's tmp dirs: those are mode 0700.
    """
    volume = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    volume.chmod(0o755)
    if owner is not None:
        os.chown(volume, *owner)
    return volume


def owner_config(owner: tuple[int, int] = VOLUME_OWNER) -> dict[str, str]:
    """The stack config that runs the pods as ``owner`` (pods.runAsUser, pods.runAsGroup)."""
    return {"pods.runAsUser": str(owner[0]), "pods.runAsGroup": str(owner[1])}


@contextmanager
def stack_on_cluster(
    local_cluster: Kube, tmp_path_factory: pytest.TempPathFactory, stack: str, config: dict[str, str]
) -> Iterator[tuple[PulumiProject, Path]]:
    """A stack ``stack`` of a copy of the project, in kubeconfig mode against ``local_cluster``,
    with ``config`` (``--path`` keys) and a fresh hostPath volume of VOLUME_OWNER, whom the pods
    run as (``owner_config``, unless ``config`` says otherwise); destroyed, and its volume
    removed, on exit.

    The stack's settings file is the project's ``Pulumi.<stack>.yaml`` when there is one
    (``dev``: the guide's example), else only the program's defaults apply.

    Yields:
        (the project, the volume's host directory).
    """
    toolchain, home = engine_home(tmp_path_factory)
    project = PulumiProject(
        REPO,
        tmp_path_factory.mktemp("e2e"),
        toolchain,
        include=PROJECT_FILES,
        pulumi_home=home,
        venv=REPO / ".venv",
    )
    project.init_stack(stack)
    volume = pod_volume("tf-mnist-e2e-volume-", VOLUME_OWNER)
    settings = {
        **owner_config(),
        **config,
        "kubeconfig": str(local_cluster.kubeconfig),
        "hostPath.path": str(volume),
    }
    for key, value in settings.items():
        project.set_config(key, value, path=True)
    try:
        yield project, volume
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False, timeout=600)
        shutil.rmtree(volume, ignore_errors=True)


def outputs(project: PulumiProject) -> dict:
    """The stack's outputs (``pulumi stack output --json``)."""
    return json.loads(project.pulumi("stack", "output", "--json").stdout)


def on_volume(project: PulumiProject, volume: Path, output: str) -> Path:
    """Where the stack output ``output`` (a path under the pods' mountPath /data) is on the host."""
    value = outputs(project)[output]
    assert value.startswith("/data/"), (output, value)
    return volume / value[len("/data/") :]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_states(directory: Path) -> dict[str, tuple[str, int]]:
    """Each file under ``directory`` (its path there): its SHA-256 and its mtime in nanoseconds."""
    return {
        str(p.relative_to(directory)): (sha256(p), p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def wait_for_tasks(
    kube: Kube, prefix: str, tasks: Sequence[str] = TASKS, timeout: float = 900
) -> dict[str, str]:
    """Each task Job's end (``Complete`` or ``Failed``) by name, once every one has ended."""
    names = [f"{prefix}-{t}" for t in tasks]

    def ends() -> dict[str, str] | None:
        found = {n: job_condition(kube, n) for n in names}
        return found if all(found.values()) else None

    return kube.wait_for(f"{names} to end", ends, timeout=timeout, every=2)


def live_object_kinds(project: PulumiProject, kube: Kube) -> set[str]:
    """The kinds of the Kubernetes objects in the stack's state, asserting that each one exists
    in the cluster with the uid the state holds."""
    state = json.loads(project.pulumi("stack", "export", "--show-secrets").stdout)
    objects = [
        r
        for r in state["deployment"]["resources"]
        if r["type"].startswith("kubernetes:") and not r["type"].startswith("pulumi:providers")
    ]
    kinds = set()
    for r in objects:
        meta = r["outputs"]["metadata"]
        kind = r["outputs"]["kind"]
        args = ["get", kind, meta["name"], "-o", "jsonpath={.metadata.uid}"]
        if meta.get("namespace"):
            args[1:1] = []
            args += ["-n", meta["namespace"]]
        live = kube.run(*args, check=False)
        assert live.returncode == 0 and live.stdout == meta["uid"], f"{kind} {meta['name']}: {live.stderr}"
        kinds.add(kind)
    return kinds


def jobs_by_name(kube: Kube) -> dict[str, dict]:
    """The namespace's Jobs by name."""
    return {j["metadata"]["name"]: j for j in kube.get("jobs")["items"]}


def completion_time(job: dict) -> float:
    """A completed Job's completionTime, in seconds since the epoch."""
    stamp = job["status"]["completionTime"]
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def chief_epochs(kube: Kube, prefix: str) -> set[int]:
    """The epochs whose progress lines the chief of ``prefix`` has logged (none before its pod logs)."""
    proc = kube.run("logs", f"job/{prefix}-chief-0", check=False)
    return {s["epoch"] for s in parse_log(proc.stdout).steps} if proc.returncode == 0 else set()


def port_forward(kube: Kube, target: str, port: int) -> tuple[subprocess.Popen, int]:
    """``kubectl port-forward TARGET 0:PORT``: the process (stop it by its pid) and the local port."""
    proc = subprocess.Popen(
        [
            str(kube.kubectl_bin),
            f"--kubeconfig={kube.kubeconfig}",
            "-n",
            kube.namespace,
            "port-forward",
            target,
            f"0:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"127\.0\.0\.1:(\d+)", line)
    if not found:
        proc.kill()
        raise AssertionError(f"port-forward said {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, int(found.group(1))


def rfc3339_s(stamp: str) -> float:
    """Seconds since the epoch of kubectl's RFC 3339 timestamp (nanoseconds, trailing zeros cut)."""
    base, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(base + "+00:00").timestamp() + float("0." + (fraction or "0"))


def stamped_logs(kube: Kube, what: str) -> list[tuple[float, str]]:
    """``kubectl logs --timestamps WHAT`` as (seconds since the epoch, line) pairs."""
    pairs = []
    for line in kube.logs(what, "--timestamps").splitlines():
        stamp, _, text = line.partition(" ")
        pairs.append((rfc3339_s(stamp), text))
    return pairs


def chief_epoch_figures(kube: Kube, prefix: str) -> str:
    """The chief of ``prefix`` in one line: its slowest batch, each epoch's training, and the
    checkpoint plus evaluation after each epoch but the first. An Epoch line follows the
    epoch's training (epoch_time_s), checkpoint and evaluation: the time between two such
    lines (kubectl's timestamps) less the training is the checkpoint plus evaluation."""
    at = [stamp for stamp, line in stamped_logs(kube, f"job/{prefix}-chief-0") if parse_log(line).epochs]
    chief = parse_log(kube.logs(f"job/{prefix}-chief-0"))
    after = [round(b - a - e["epoch_time_s"], 1) for a, b, e in zip(at, at[1:], chief.epochs[1:])]
    return (
        f"chief: batch {max(s['avg_ms'] for s in chief.steps):.0f} ms at most, "
        f"epochs {[round(e['epoch_time_s'], 1) for e in chief.epochs]} s, checkpoint + evaluation {after} s"
    )


def tensorboard_json(port: int, path: str, timeout: float = 5, **query: str) -> Any:
    """TensorBoard's JSON answer at ``path`` of its HTTP API (``/data/plugin/scalars/tags``) with
    ``query``, through a port-forward's local ``port``; raises what urlopen raises."""
    url = f"http://127.0.0.1:{port}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def infra_status(kube: Kube, *args: str) -> subprocess.CompletedProcess:
    """``python -m infra.status ARGS`` against ``kube``'s cluster and namespace (kubectl on PATH)."""
    return subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "python"),
            "-m",
            "infra.status",
            "--kubeconfig",
            str(kube.kubeconfig),
            "--namespace",
            kube.namespace,
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{kube.kubectl_bin.parent}:{os.environ['PATH']}"},
    )


def run_status(kube: Kube, prefix: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m infra.status --prefix PREFIX ARGS`` for one run (exit 0 finished, 1 failed, 3
    still going)."""
    return infra_status(kube, "--prefix", prefix, *args)


def _monitor_pods(kube: Kube, prefix: str, gone: set[str]) -> list[dict]:
    """The run monitor's pods of ``prefix`` that are Running or Succeeded, less those in ``gone`` (uids)."""
    return [
        p
        for p in kube.get("pods")["items"]
        if p["metadata"]["labels"].get("job-name") == f"{prefix}-monitor"
        and p["metadata"]["uid"] not in gone
        and p["status"]["phase"] in ("Running", "Succeeded")
    ]


def _monitor_pid(prefix: str) -> int | None:
    """The host pid of the run monitor process of ``prefix`` (the local cluster's containers are
    this host's processes; the monitor's environment holds MONITOR_PREFIX), None if none runs."""
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("MONITOR_PREFIX") == prefix and proc.name().startswith("python"):
                return proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return None


def _chief_pids(prefix: str) -> list[int]:
    """Host pids of every process of ``prefix``'s chief task: its TF_CONFIG names the task
    ``chief`` and the cluster spec's chief address starts with ``<prefix>-chief``."""
    found = []
    for proc in psutil.process_iter():
        try:
            tf_config = json.loads(proc.environ().get("TF_CONFIG") or "{}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ValueError):
            continue
        chief = (tf_config.get("cluster") or {}).get("chief") or [""]
        if (tf_config.get("task") or {}).get("type") == "chief" and chief[0].startswith(f"{prefix}-chief"):
            found.append(proc.pid)
    return found


@contextmanager
def paused_chief(kube: Kube, prefix: str) -> Iterator[list[int]]:
    """Hold ``prefix``'s run where it is: SIGSTOP every process of its chief once they run, and
    SIGCONT them on leaving. The chief drives the run, so nothing ends while it is stopped,
    however fast the machine; the other tasks only wait (their --peer_timeout, 600 s by default,
    must outlast the pause). Yields the stopped pids."""
    pids = kube.wait_for("the chief's processes", lambda: _chief_pids(prefix) or None, timeout=300, every=1)
    stopped = []
    try:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            except ProcessLookupError:
                pass
        yield stopped
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def kill_the_monitor(kube: Kube, prefix: str, times: int) -> list[str]:
    """End the run monitor's pod ``times`` times, each time once its replacement runs: by SIGKILL
    of its process from the host (exit 137, no chance to clean up) on even turns, by deleting
    the pod (SIGTERM, exit 143) on odd ones. Stops early once a monitor pod has Succeeded (the
    run is over). Returns how each kill was done, in order.

    Raises:
        AssertionError: no new monitor pod ran within 300 s, or on a SIGKILL turn the host
            showed no monitor process within 120 s (the pod's Python had not started).
    """
    gone: set[str] = set()
    done: list[str] = []
    for kill in range(times):
        try:
            pod = kube.wait_for(
                "a new monitor pod to run",
                lambda: _monitor_pods(kube, prefix, gone) or None,
                timeout=300,
                every=1,
            )[0]
        except AssertionError as err:
            raise AssertionError(
                f"{err} after {done}:\n"
                + kube.run("describe", "job", f"{prefix}-monitor", check=False).stdout
            ) from None
        if pod["status"]["phase"] == "Succeeded":
            break
        gone.add(pod["metadata"]["uid"])
        if kill % 2 == 0:
            pid = kube.wait_for("the monitor's process", lambda: _monitor_pid(prefix), timeout=120, every=0.5)
            os.kill(pid, signal.SIGKILL)
            done.append("SIGKILL")
        else:
            kube.run("delete", "pod", pod["metadata"]["name"], "--wait=false")
            done.append("delete")
    return done
