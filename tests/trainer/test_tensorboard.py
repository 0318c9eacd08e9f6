"""One short real run through ``python -m trainer.local --tensorboard`` (chief + 1 worker +
1 ps, 2 epochs of the shipped mnist-10k sample), shared by the assertions: the real
TensorBoard it starts, a real headless Chromium on TensorBoard's scalars page, the per-task
log files, ``python -m trainer.report`` on the run's files, and stopping the launcher.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import pytest

from trainer import report
from trainer.contract import progress

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EPOCHS = 2


class LiveRun:
    """The launcher, still running (TensorBoard serving after the run)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainer.local",
                "--tensorboard",
                "--workers",
                "1",
                "--ps",
                "1",
                "--epochs",
                str(EPOCHS),
                "--log_interval",
                "20",
                "--peer_timeout",
                "120",
                "--log_dir",
                str(log_dir),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.serving = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if "[local] TensorBoard serving" in line:
                self.serving.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    @property
    def url(self) -> str:
        return re.search(r"\[local\] TensorBoard (http://127\.0\.0\.1:\d+/)", self.output)[1]

    def get_json(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())


def as_printed(value: float):
    """A value the chief printed with 4 decimals: the event holds the float32 it was rounded from
    (round() of that float32 can land on the other side of a tie, e.g. 0.96675 -> 0.9668)."""
    return pytest.approx(value, abs=5e-5 + 1e-6)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    live = LiveRun(tmp_path_factory.mktemp("tb") / "run")
    try:
        assert live.serving.wait(420), f"no 'TensorBoard serving' line:\n{live.output[-3000:]}"
        yield live
    finally:
        if live.proc.poll() is None:
            live.proc.kill()
            live.proc.wait()


def scalars(run: LiveRun, series: tuple[str, str], points: int = EPOCHS) -> list:
    """TensorBoard's [wall time, step, value] of ``series`` (TensorBoard run, tag), once it
    has read ``points`` of them (it rereads the log directory every few seconds, so it gets
    there however loaded the machine is)."""
    subdir, tag = series
    query = urllib.parse.urlencode({"run": subdir, "tag": tag})
    while True:
        try:
            got = run.get_json(f"data/plugin/scalars/scalars?{query}")
        except urllib.error.HTTPError:  # 400 before TensorBoard has seen the tag
            got = []
        if len(got) >= points:
            return got
        time.sleep(1)


def chief_epochs(run: LiveRun) -> list[dict]:
    return progress.parse_log(
        "\n".join(line for line in run.output.splitlines() if line.startswith("[chief-0]"))
    ).epochs


def test_url_printed_before_training_and_serving_after_it(run):
    out = run.output
    url_at = out.index(f"[local] TensorBoard {run.url}")
    assert url_at < out.index("[local] started chief-0") < out.index("[chief-0] Training")
    assert out.index("[local] every task exited 0") < out.index("[local] TensorBoard serving")
    assert run.proc.poll() is None  # still serving once training has ended
    assert run.get_json("data/logdir")["logdir"] == str(run.log_dir)


def test_scalars_api_returns_the_chiefs_per_epoch_series_matching_result_json(run):
    result = json.loads((run.log_dir / "result.json").read_text())
    scalars(run, progress.EPOCH_SERIES["examples_per_s"])  # the last epoch's last tag
    scalars(run, progress.EPOCH_SERIES["test_accuracy"])
    # Keras' layout: the chief's train and validation runs, the same tags in both
    assert sorted(run.get_json("data/runs")) == ["train", "validation"]
    tags = run.get_json("data/plugin/scalars/tags")
    assert set(tags["train"]) == {
        "epoch_loss",
        "epoch_accuracy",
        "epoch_learning_rate",
        "epoch_examples_per_s",
        "batch_loss",
    }
    assert set(tags["validation"]) == {"epoch_loss", "epoch_accuracy"}
    series = {}
    for key, where in progress.EPOCH_SERIES.items():
        series[key] = scalars(run, where)  # [wall time, step, value]
        assert [step for _, step, _ in series[key]] == list(range(1, EPOCHS + 1)), where
    # the last epoch is the result; float32 in the events
    assert series["test_accuracy"][-1][2] == pytest.approx(result["test_accuracy"], abs=1e-6)
    assert series["train_cost"][-1][2] == pytest.approx(result["final_cost"], rel=1e-5)
    assert len(series["train_cost"]) == result["epochs"]
    # every epoch as the chief printed it
    for printed, acc, cost, test_cost, rate in zip(
        chief_epochs(run),
        series["test_accuracy"],
        series["train_cost"],
        series["test_cost"],
        series["examples_per_s"],
    ):
        assert acc[2] == as_printed(printed["test_accuracy"])
        assert cost[2] == as_printed(printed["train_cost"])
        assert test_cost[2] == as_printed(printed["test_cost"])
        assert abs(rate[2] - printed["examples_per_s"]) <= 0.5
    # warm-up then cosine decay to 0 at the end of the run
    rates = [v for _, _, v in series["learning_rate"]]
    assert rates[0] > 0 and rates[-1] == pytest.approx(0.0, abs=1e-9)


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium")
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        # Debian's package, as the project's browser tests need it (no browser download).
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "chromium"], env=env, capture_output=True, timeout=900)
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("no chromium (apt-get install chromium)")
    return path


def headless(
    chromium: str, profile: Path, *args: str, size: str = "1400,1100", budget_ms: int = 20_000
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--window-size={size}",
            f"--virtual-time-budget={budget_ms}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_browser_renders_the_tags_on_the_scalars_page(run, chromium, tmp_path):
    scalars(run, progress.EPOCH_SERIES["examples_per_s"])
    # TensorBoard 2.21's scalars view is the Time Series dashboard (its default; the legacy
    # SCALARS tab draws inside shadow roots, which --dump-dom does not show).
    page = run.url + "?darkMode=false#timeseries"
    tags = {tag for _, tag in [*progress.EPOCH_SERIES.values(), progress.BATCH_COST]}
    # Tall: TensorBoard renders only the cards in view. It draws the group titles first and
    # the cards a moment later; on a loaded machine the virtual-time budget can run out in
    # between, so a page without cards is loaded again (3 tries, each with a longer budget).
    for attempt, budget_ms in enumerate((20_000, 40_000, 80_000), 1):
        dom = headless(
            chromium,
            tmp_path / f"profile-dom-{attempt}",
            "--dump-dom",
            page,
            size="1400,3200",
            budget_ms=budget_ms,
        )
        assert dom.returncode == 0, dom.stderr[-2000:]
        if re.search(r'class="tag"[^>]*title="', dom.stdout):
            break
    for tag in tags:
        # Tags without a "/" each get their own group, titled with the tag (TensorBoard
        # groups by the prefix before the first "/")...
        assert re.search(rf'class="group-title"[^>]*title="{re.escape(tag)}"', dom.stdout), (
            f"{tag} not rendered"
        )
    # ... and the groups it opens show their cards (class "tag", titled with the tag); it
    # opens the first few only.
    cards = set(re.findall(r'class="tag"[^>]*title="([^"]+)"', dom.stdout))
    assert {"batch_loss", "epoch_accuracy"} <= cards <= tags, cards
    shot = tmp_path / "tensorboard-scalars.png"
    taken = headless(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", page)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    width, height = png_size(shot.read_bytes())
    assert (width, height) == (1400, 1100)
    print(f"screenshot: {shot}")


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, checking its signature and the IHDR chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    body = data[16 : 16 + 13]
    assert struct.unpack(">I", data[29:33])[0] == zlib.crc32(kind + body)
    return struct.unpack(">II", body[:8])


def test_every_task_wrote_its_log_file_on_the_volume(run):
    logs = run.log_dir / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["chief-0.log", "ps-0.log", "worker-0.log"]
    for task in ("chief-0", "ps-0", "worker-0"):
        text = (logs / f"{task}.log").read_text()
        assert text.startswith(f"==== {task} started ")
        # every line the launcher showed for the task is in its file
        shown = [out[len(f"[{task}] ") :] for out in run.output.splitlines() if out.startswith(f"[{task}] ")]
        assert shown and all(line in text for line in shown), task
    chief = (logs / "chief-0.log").read_text()
    assert f"Epoch {EPOCHS} of {EPOCHS} done" in chief and chief.rstrip().endswith("done")
    # nothing of the logs among the checkpoints or the events
    assert not list((run.log_dir / "checkpoints").glob("*.log"))
    for subdir in progress.TENSORBOARD_SUBDIRS:
        assert all(p.name.startswith("events.out.tfevents") for p in (run.log_dir / subdir).iterdir())


def test_report_draws_a_png_of_the_runs_curves(run, tmp_path):
    out = tmp_path / "curves.png"
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.report", str(run.log_dir), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{out}: {run.log_dir.name}: {EPOCHS} epochs")
    assert png_size(out.read_bytes()) == (1100, 750)
    series = report.read_series(run.log_dir)
    printed = chief_epochs(run)
    for key in ("train_cost", "test_cost", "train_accuracy", "test_accuracy"):
        assert [p.epoch for p in series[key]] == list(range(1, EPOCHS + 1))
        assert [p.value for p in series[key]] == [as_printed(e[key]) for e in printed], key
    start = report.started_at(run.log_dir)
    assert start < series["test_accuracy"][0].wall_time


def test_report_without_events_exits_1(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.report", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "no per-epoch TensorBoard events" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_ctrl_c_stops_the_launcher_and_tensorboard(run):
    port = int(run.url.rsplit(":", 1)[1].strip("/"))
    run.proc.send_signal(signal.SIGINT)
    assert run.proc.wait(300) == 0  # the run's own exit code; 300 s for a loaded machine
    # The launcher's last lines are read by another thread: wait until it has read the line (or
    # the end of the output), not for a pause that a loaded machine outlasts.
    stopped, deadline = "[local] interrupted: stopping TensorBoard", time.monotonic() + 300
    while stopped not in run.output and run.reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(OSError):
        urllib.request.urlopen(run.url, timeout=2)
    assert stopped in run.output
    del port
