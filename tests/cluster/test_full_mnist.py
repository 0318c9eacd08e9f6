"""The whole MNIST on the real local cluster at the program's defaults: staged over HTTP,
trained in pods to 0.99, a second run beside it, its export read without the trainer, and the
other two kinds of data.source.

The stack (its own, ``full``, with no settings file: only the program's defaults and what the
local cluster needs, ``LOCAL_CLUSTER_CONFIG``) stages ../shared/data/mnist-full, which this
module serves over HTTP from the node (``python -m http.server`` on the node's address, the
host side of the pod bridge, which pods reach), as an HTTP base URL data source. It trains the
default recipe with 2 workers and 1 ps to Test-Accuracy >= 0.99 in the chief's log and
result.json, and prints the wall time from `pulumi up` to the chief's ``done`` beside the
launcher's on the same staged files (the pods' overhead). Then on the live stack: a changed
learning rate is a second run in a new directory (the first run's files unchanged), which
TensorBoard's HTTP API and `infra.status --runs` list beside the first; the first run's export,
copied off the volume, gives result.json's accuracy in a Python process that cannot import the
trainer; and a URL list and a directory on the volume (the 10,000-digit sample, 1 epoch) each
stage into their own directory and make their own run.

Opt-in, like every test of the whole MNIST: it runs with TF_MNIST_FULL_E2E=1 and
../shared/data/mnist-full present (about 5 minutes on an idle 2-core machine, 14 under load;
scripts/test.sh does not set it, to keep a cold CI run inside its hour), and is otherwise
skipped with the reason. Tests run in file order and share one stack.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.settings import KEYS_BY_NAME
from tests.preview.engine import PulumiProject
from tests.trainer.trainer_test_helpers import FULL_MNIST, full_mnist_or_skip
from trainer import data
from trainer.contract.progress import parse_log
from trainer.data import ALL_IDX_FILES

from .kube import REPO, Kube, job_pods
from .stack import (
    LOCAL_CLUSTER_CONFIG,
    TASKS,
    VOLUME_OWNER,
    file_states,
    infra_status,
    on_volume,
    outputs,
    port_forward,
    rfc3339_s,
    sha256,
    stack_on_cluster,
    stamped_logs,
    tensorboard_json,
    wait_for_tasks,
)

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TF_MNIST_FULL_E2E") != "1",
        reason="the full-MNIST e2e on the local cluster is opt-in: TF_MNIST_FULL_E2E=1",
    ),
]

SAMPLE = REPO / "trainer" / "data" / "mnist-10k"
NAMESPACE = "tf-mnist-full"
PREFIX = "mnist"
STACK = "full"
#: The program's default epochs: the run docs/local-cluster.md's full-MNIST output shows.
EPOCHS = KEYS_BY_NAME["hyperparams.epochs"].default
#: The second run's learning rate (the default's 0.004 less a quarter) and its one epoch, to
#: keep the module short; the epochs are not part of the run key, the rate is.
SECOND_RATE, SHORT_EPOCHS = "0.003", "1"
#: What one run must reach. The recipe's 0.99 is the benchmark's target over 25 seeds
#: (benchmarks/trainer_benchmark.py), not one run's: the workers are asynchronous, so no seed
#: fixes the result, and 25-seed benchmarks measured a lowest run of 0.9892 (bfloat16) with a
#: standard deviation of about 0.0006; 0.985, about 10 of them below the means, fails only a
#: recipe that trains worse (tests/trainer/test_full_mnist.py says the same of the launcher).
TARGET = 0.985
#: Where the launcher comparison leaves its measurement for the benchmark's local-cluster row
#: (benchmarks/trainer_benchmark.py: DEFAULT_CLUSTER_RESULT): TF_MNIST_CLUSTER_RESULT, else
#: runs/benchmarks/local-cluster.json in the checkout (runs/ is not committed).
CLUSTER_RESULT = Path(
    os.environ.get("TF_MNIST_CLUSTER_RESULT") or REPO / "runs" / "benchmarks" / "local-cluster.json"
)

#: Run directories (host paths) and results, by run name, as the tests make them.
runs: dict[str, Path] = {}
#: Data directories (host paths) by data source, as the tests stage them.
data_dirs: dict[str, Path] = {}
results: dict[str, dict] = {}
timings: dict[str, float] = {}


@pytest.fixture(scope="module")
def full_mnist() -> Path:
    return full_mnist_or_skip()


class FileServer:
    """``python -m http.server`` on the node's address: ``/full/`` is mnist-full, ``/sample/``
    the bundled sample; its request log (one line a request) is kept in a file."""

    def __init__(self, address: str, root: Path) -> None:
        (root / "www").mkdir()
        (root / "www" / "full").symlink_to(FULL_MNIST)
        (root / "www" / "sample").symlink_to(SAMPLE)
        self.log_path = root / "requests.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "http.server",
                "--bind",
                address,
                "--directory",
                str(root / "www"),
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "Serving HTTP on ADDRESS port PORT (...) ..."
        words = line.split()
        if "port" not in words:
            self.stop()
            raise AssertionError(f"http.server said {line!r}: {self.log_path.read_text()}")
        self.url = f"http://{address}:{words[words.index('port') + 1]}"

    def requests(self, path_prefix: str) -> list[str]:
        """The request lines logged for paths under ``path_prefix`` (client, path, status)."""
        return [line for line in self.log_path.read_text().splitlines() if f'"GET {path_prefix}' in line]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="module")
def server(
    local_cluster: Kube, full_mnist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FileServer]:
    # The node's InternalIP is the host side of the pod bridge (tools/local-cluster/README.md).
    address = local_cluster.run(
        "get", "nodes", "-o", 'jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}'
    ).stdout
    assert address.count(".") == 3, address
    files = FileServer(address, tmp_path_factory.mktemp("http"))
    try:
        yield files
    finally:
        files.stop()


@pytest.fixture(scope="module")
def stack(
    local_cluster: Kube, server: FileServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PulumiProject, Path]]:
    config = {**LOCAL_CLUSTER_CONFIG, "namespace": NAMESPACE, "data.source": f"{server.url}/full/"}
    with stack_on_cluster(local_cluster, tmp_path_factory, STACK, config) as made:
        yield made


@pytest.fixture(scope="module")
def kube(local_cluster: Kube) -> Kube:
    return Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)


def _up_and_train(project: PulumiProject, volume: Path, kube: Kube, name: str) -> tuple[float, Path]:
    """`pulumi up`, then every task Job Complete: (when `up` started, epoch s; the run dir)."""
    started = time.time()
    project.pulumi("up", "--yes", "--skip-preview", timeout=900)
    timings[f"{name}_up_s"] = time.time() - started
    run_dir = on_volume(project, volume, "runDir")
    assert run_dir not in runs.values(), f"{name} reuses the run directory {run_dir} of {runs}"
    assert run_dir.parent == volume / "runs" / f"{STACK}-{NAMESPACE}-{PREFIX}", run_dir
    runs[name] = run_dir
    assert wait_for_tasks(kube, PREFIX) == {f"{PREFIX}-{t}": "Complete" for t in TASKS}
    results[name] = json.loads((run_dir / "result.json").read_text())
    return started, run_dir


def _staged(project: PulumiProject, volume: Path, source: str, like: Path) -> Path:
    """The data directory of the stack's current ``source`` (a name), holding exactly the IDX
    files of ``like`` (the same decompressed bytes): the one of an earlier test with the same
    source, else one no other source used."""
    data_dir = on_volume(project, volume, "dataDir")
    assert data_dir.parent == volume / "mnist", data_dir
    if source in data_dirs:
        assert data_dir == data_dirs[source], (source, data_dir, data_dirs)
    assert data_dir not in {d for name, d in data_dirs.items() if name != source}, (
        source,
        data_dir,
        data_dirs,
    )
    data_dirs[source] = data_dir
    staged = sorted(p.name for p in data_dir.iterdir() if not p.name.startswith("."))
    assert staged == sorted(ALL_IDX_FILES), staged
    for name in staged:
        assert data.content_sha256(data_dir / name) == data.content_sha256(like / name), (
            f"{name} differs from {like}"
        )
    return data_dir


def test_full_mnist_over_http_trains_to_0_99_at_the_program_defaults(
    stack, kube: Kube, server: FileServer
) -> None:
    project, volume = stack
    started, run_dir = _up_and_train(project, volume, kube, "first")
    data_dir = _staged(project, volume, "http", FULL_MNIST)
    # The staging pod, not this process, fetched each file from the node.
    fetched = server.requests("/full/")
    assert sorted(line.split('"GET /full/')[1].split()[0] for line in fetched) == sorted(ALL_IDX_FILES), (
        fetched
    )
    assert all(line.startswith("10.244.") and '" 200 ' in line for line in fetched), fetched
    chief = f"job/{PREFIX}-chief-0"
    log = parse_log(kube.logs(chief))
    assert log.done and log.test_accuracy is not None and log.test_accuracy >= TARGET, log
    result = results["first"]
    assert (
        result["test_accuracy"] >= TARGET and f"{result['test_accuracy']:.4f}" == f"{log.test_accuracy:.4f}"
    )
    # The program's defaults: the recipe's epochs and model, all 60,000 training digits.
    assert (result["epochs"], result["model"], result["train_examples"]) == (
        EPOCHS,
        KEYS_BY_NAME["hyperparams.model"].default,
        60000,
    ), result
    # Where the time from `pulumi up` to the chief's done goes: up itself (staging, TensorBoard),
    # the chief's container start, its first line (TensorFlow imported), training, the end.
    stamped = stamped_logs(kube, chief)
    done_at = next(at for at, line in stamped if line == "done")
    training_at = next(at for at, line in stamped if line.startswith("Training "))
    (pod,) = job_pods(kube, f"{PREFIX}-chief-0")
    container_at = rfc3339_s(pod["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"])
    timings["first_wall_s"] = done_at - started
    timings.update(
        container_start_s=container_at - started,
        first_line_s=stamped[0][0] - started,
        training_began_s=training_at - started,
    )
    last_lines = "\n".join(line for _, line in stamped[-5:])
    print(
        f"\nfull MNIST in pods (2 workers + 1 ps, the program's defaults), seconds after `pulumi up` began: "
        f"up returned {timings['first_up_s']:.1f}, chief container started {container_at - started:.1f}, "
        f"first line {stamped[0][0] - started:.1f}, training began {training_at - started:.1f}, done "
        f"{done_at - started:.1f} (training {result['train_time_s']:.1f} s, test accuracy "
        f"{result['test_accuracy']:.4f}); data {data_dir}\nthe chief's last lines:\n{last_lines}"
    )


def test_the_launcher_on_the_same_files_for_the_pods_overhead(stack, tmp_path: Path) -> None:
    # The same recipe (the launcher's defaults are the program's) and layout on this machine:
    # the difference to the pods' time is what pods, staging and the API server add.
    project, volume = stack
    data_dir = on_volume(project, volume, "dataDir")
    started = time.time()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainer.local",
            "--data_dir",
            str(data_dir),
            "--log_dir",
            str(tmp_path / "run"),
            "--workers",
            "2",
            "--ps",
            "1",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines, done_at = [], None
    for line in proc.stdout:
        lines.append(line)
        if done_at is None and line.strip() == "[chief-0] done":
            done_at = time.time()
    assert proc.wait(timeout=600) == 0 and done_at is not None, "".join(lines[-40:])
    log = parse_log("".join(lines))
    assert log.test_accuracy is not None and log.test_accuracy >= TARGET, "".join(lines[-20:])
    launcher_s = done_at - started
    print(
        f"\nlauncher on the same files: launch to the chief's done {launcher_s:.1f} s (test accuracy "
        f"{log.test_accuracy:.4f}); pods {timings['first_wall_s']:.1f} s from pulumi up: overhead "
        f"{timings['first_wall_s'] - launcher_s:.1f} s"
    )
    # The benchmark's local-cluster row (benchmarks/trainer_benchmark.py --cluster_result) reads
    # this file; the test asserts no time.
    CLUSTER_RESULT.parent.mkdir(parents=True, exist_ok=True)
    CLUSTER_RESULT.write_text(
        json.dumps(
            {
                "up_to_done_s": round(timings["first_wall_s"], 1),
                "test_accuracy": results["first"]["test_accuracy"],
                "pulumi_up_s": round(timings["first_up_s"], 1),
                "chief_container_started_s": round(timings["container_start_s"], 1),
                "chief_first_line_s": round(timings["first_line_s"], 1),
                "training_began_s": round(timings["training_began_s"], 1),
                "training_s": round(results["first"]["train_time_s"], 1),
                "launcher_s": round(launcher_s, 1),
                "launcher_test_accuracy": log.test_accuracy,
                "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            },
            indent=1,
        )
        + "\n"
    )


def _series(port: int, run: str, points: int) -> list | None:
    """TensorBoard's epoch_accuracy series of ``run`` ([wall time, step, value] each) once it
    holds ``points`` points (it reloads event files every few seconds), else None."""
    found = tensorboard_json(port, "/data/plugin/scalars/scalars", timeout=10, run=run, tag="epoch_accuracy")
    return found if len(found) == points else None


def test_a_changed_learning_rate_is_a_second_run_that_tensorboard_and_status_list(stack, kube: Kube) -> None:
    project, volume = stack
    first = runs["first"]
    before = file_states(first)
    assert {"result.json", "cluster/done"} <= before.keys() and any(k.startswith("export/") for k in before)
    project.set_config("hyperparams.learningrate", SECOND_RATE, path=True)
    project.set_config("hyperparams.epochs", SHORT_EPOCHS, path=True)
    _, second = _up_and_train(project, volume, kube, "second")
    _staged(project, volume, "http", FULL_MNIST)
    assert results["second"]["epochs"] == int(SHORT_EPOCHS), results["second"]
    assert file_states(first) == before, "the first run's files changed"
    # TensorBoard (one over runsDir): both runs, each as <run>/train and <run>/validation.
    name = f"{PREFIX}-tensorboard"
    proc, port = port_forward(kube, f"service/{name}", kube.get("service", name)["spec"]["ports"][0]["port"])
    try:
        wanted = {f"{d.name}/{split}" for d in (first, second) for split in ("train", "validation")}
        listed = kube.wait_for(
            "TensorBoard to list both runs' train and validation",
            lambda: wanted <= set(tensorboard_json(port, "/data/runs", timeout=10)),
            timeout=120,
            every=2,
        )
        assert listed
        # A run is listed once its event file is found; its scalars' tags come when TensorBoard
        # has read the file, which can be a reload later.
        scalars = {"epoch_loss", "epoch_accuracy"}

        def every_run_read() -> dict | None:
            found = tensorboard_json(port, "/data/plugin/scalars/tags", timeout=10)
            return found if all(scalars <= set(found.get(run, {})) for run in wanted) else None

        kube.wait_for(
            "TensorBoard to read epoch_loss and epoch_accuracy of every run",
            every_run_read,
            timeout=180,
            every=2,
        )
        for run_dir, epochs, result in ((first, EPOCHS, results["first"]), (second, 1, results["second"])):
            series = kube.wait_for(
                f"{run_dir.name}'s {epochs} validation points",
                lambda: _series(port, f"{run_dir.name}/validation", epochs),
                timeout=180,
                every=2,
            )
            assert [step for _, step, _ in series] == list(range(1, epochs + 1)), series
            assert abs(series[-1][2] - result["test_accuracy"]) < 1e-4, (series, result)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    status = infra_status(kube, "--runs", "--prefix", PREFIX, "--runs_dir", outputs(project)["runsDir"])
    assert status.returncode == 0, status.stdout + status.stderr
    rows = {
        cells[0]: cells[1:]
        for cells in (line.lstrip("* ").split() for line in status.stdout.splitlines())
        if cells and cells[0] in (first.name, second.name)
    }
    for run_name, run_dir in (("first", first), ("second", second)):
        assert rows[run_dir.name][:2] == ["finished", f"{results[run_name]['test_accuracy']:.4f}"], (
            status.stdout
        )
    print(f"\n{status.stdout}")


def test_the_export_gives_result_json_accuracy_in_a_process_without_the_trainer(
    stack, tmp_path: Path
) -> None:
    # The export and its record (result.json) copied off the volume, and trainer/evaluate.py
    # copied alone into an empty directory, run there in isolated mode (-I: no PYTHONPATH, no
    # script or working directory on sys.path): the process has no way to import the trainer,
    # and -X importtime, which names every module imported, shows it did not.
    project, volume = stack
    export = tmp_path / "run" / "export"
    shutil.copytree(runs["first"] / "export", export)
    shutil.copy2(runs["first"] / "result.json", tmp_path / "run" / "result.json")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(REPO / "trainer" / "evaluate.py", alone / "evaluate.py")
    data_dir = on_volume(project, volume, "dataDir")
    proc = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "python"),
            "-I",
            "-X",
            "importtime",
            str(alone / "evaluate.py"),
            str(export),
            "--data_dir",
            str(data_dir),
        ],
        cwd=alone,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    imported = {
        line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert "tensorflow" in imported and "numpy" in imported, sorted(imported)[:20]
    assert not [m for m in imported if m == "trainer" or m.startswith("trainer.")], sorted(imported)
    accuracy = results["first"]["test_accuracy"]
    assert f"Test-Accuracy: {accuracy:.4f}" in proc.stdout.splitlines(), proc.stdout
    assert f"Correct: {round(accuracy * 10000)} of 10000 test examples ({accuracy!r})" in proc.stdout, (
        proc.stdout
    )


def test_a_url_list_stages_into_its_own_directory_and_makes_a_new_run(
    stack, kube: Kube, server: FileServer
) -> None:
    project, volume = stack
    project.pulumi("config", "rm", "--path", "data.source")
    for i, name in enumerate(ALL_IDX_FILES):
        project.set_config(f"data.source[{i}]", f"{server.url}/sample/{name}", path=True)
    _up_and_train(project, volume, kube, "url-list")
    staged = _staged(project, volume, "url-list", SAMPLE)
    assert {name: sha256(staged / name) for name in ALL_IDX_FILES} == {
        name: sha256(SAMPLE / name) for name in ALL_IDX_FILES
    }
    fetched = server.requests("/sample/")
    assert len(fetched) == len(ALL_IDX_FILES) and all('" 200 ' in line for line in fetched), fetched
    result = results["url-list"]
    assert (result["epochs"], result["train_examples"]) == (1, 8000) and result["test_accuracy"] >= 0.9, (
        result
    )


def test_a_directory_on_the_volume_stages_into_its_own_directory_and_makes_a_new_run(
    stack, kube: Kube
) -> None:
    project, volume = stack
    incoming = volume / "incoming" / "mnist-10k"
    shutil.copytree(SAMPLE, incoming, ignore=shutil.ignore_patterns("README.md"))
    for path in (incoming.parent, incoming, *incoming.iterdir()):
        shutil.chown(path, *VOLUME_OWNER)
    project.pulumi("config", "rm", "--path", "data.source")
    project.set_config("data.source", "/data/incoming/mnist-10k", path=True)
    _up_and_train(project, volume, kube, "volume-dir")
    _staged(project, volume, "volume-dir", SAMPLE)
    result = results["volume-dir"]
    assert (result["epochs"], result["train_examples"]) == (1, 8000) and result["test_accuracy"] >= 0.9, (
        result
    )
