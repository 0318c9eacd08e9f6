"""One short real run (``python -m trainer.local``, chief + 1 worker + 1 ps, 1 epoch of the
shipped mnist-10k sample), shared by the assertions: the model it exports, read back by
``python -m trainer.evaluate`` in processes that import no trainer module; the run again on
the same --log_dir (finished: the export stays); its TensorBoard events in train/ and
validation/; ``trainer.report`` and one TensorBoard over two runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trainer.contract import progress
from trainer.flags import BUNDLED_DATA_DIR

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def launch(log_dir: Path) -> str:
    """Run the launcher to the end on ``log_dir``; return its output (asserting exit 0)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.local",
            "--workers",
            "1",
            "--ps",
            "1",
            "--epochs",
            "1",
            "--log_interval",
            "50",
            "--peer_timeout",
            "120",
            "--log_dir",
            str(log_dir),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    log_dir = tmp_path_factory.mktemp("runs") / "run-a"
    return log_dir, launch(log_dir)


#: Runs ``python -m trainer.evaluate`` as ``-m`` does, then prints the trainer modules
#: the process imported (``trainer`` itself, the package ``-m`` imports first, holds only
#: a docstring).
WRAPPER = """
import json, runpy, sys
sys.argv = ["trainer.evaluate", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("trainer.evaluate", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    code = exit.code
print("TRAINER_MODULES " + json.dumps(sorted(
    m for m in sys.modules if m == "trainer" or m.startswith("trainer."))))
sys.exit(code)
"""


def _accuracy_lines(stdout: str) -> tuple[float, int, int]:
    lines = stdout.splitlines()
    assert lines[0].startswith("Test-Accuracy: "), stdout
    words = lines[1].split()  # Correct: <n> of <m> test examples (<fraction>) by <dir>
    correct, total = int(words[1]), int(words[3])
    assert lines[0] == f"Test-Accuracy: {correct / total:.4f}"
    assert words[6] == f"({correct / total!r})"
    return correct / total, correct, total


def test_result_json_names_the_export_and_the_chief_says_where(run):
    log_dir, output = run
    result = progress.read_result(log_dir)
    assert (result["saved_model"], result["keras_model"]) == ("export/1", "export/1/model.keras")
    assert (log_dir / "export" / "1" / "saved_model.pb").is_file()
    assert (log_dir / "export" / "1" / "model.keras").is_file()
    files = result["saved_model_files"]
    assert {"saved_model.pb", "model.keras", "variables/variables.index"} <= files.keys(), files
    assert f"[chief-0] Exported model: SavedModel {log_dir / 'export' / '1'} " in output
    assert f" (sha256 {_chief_digest(output)} of its {len(files)} files; " in output


def _chief_digest(output: str) -> str:
    """The tree digest in the chief's "Exported model" line."""
    line = next(line for line in output.splitlines() if line.startswith("[chief-0] Exported model: "))
    return line.split(" (sha256 ", 1)[1].split()[0]


def test_result_json_times_the_build_apart_from_the_epochs(run):
    """The first step function and the evaluation's are built before the first epoch's clock:
    examples_per_s is the epochs' examples over the epochs' time alone, and the build's
    seconds are part of the run's total."""
    log_dir, _ = run
    result = progress.read_result(log_dir)
    assert 0 < result["build_time_s"] < result["total_time_s"] - result["train_time_s"]
    assert result["examples_per_s"] * result["train_time_s"] == pytest.approx(
        result["global_step"] * result["batch_size"]
    )


def test_evaluate_prints_result_json_s_accuracy_without_importing_the_trainer(run):
    log_dir, _ = run
    result = progress.read_result(log_dir)
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(log_dir / "export"), "--data_dir", str(BUNDLED_DATA_DIR)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy, correct, total = _accuracy_lines(proc.stdout)
    assert total == 2000  # the sample's test set
    assert accuracy == result["test_accuracy"], (proc.stdout, result)
    assert proc.stdout.splitlines()[2].startswith(
        f"Verified: {len(result['saved_model_files'])} files of {log_dir / 'export' / '1'} by "
        f"{log_dir / 'result.json'}, sha256 "
    ), proc.stdout
    imported = json.loads(proc.stdout.splitlines()[-1].removeprefix("TRAINER_MODULES "))
    # The package's own __init__ runs first: it only picks TensorFlow's kernels (cpu_kernels).
    assert set(imported) <= {"trainer", "trainer.cpu_kernels", "trainer.evaluate"}, imported
    print(f"result.json {result['test_accuracy']!r}; evaluate {accuracy!r} ({correct} of {total})")


def test_a_copy_of_evaluate_outside_the_repository_checks_a_copied_export_by_the_chief_s_digest(
    run, tmp_path
):
    """The version directory alone, copied off its run (no result.json beside it), checked
    against the digest of the chief's "Exported model" line, by a copy of evaluate.py."""
    log_dir, output = run
    script = shutil.copy(REPO / "trainer" / "evaluate.py", tmp_path / "evaluate_copy.py")
    copy = shutil.copytree(log_dir / "export" / "1", tmp_path / "model")
    command = [sys.executable, "-I", str(script), str(copy), "--data_dir", str(BUNDLED_DATA_DIR)]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"refused: {copy}: not in a run's export directory" in refused.stderr
    proc = subprocess.run(
        [*command, "--sha256", _chief_digest(output)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _accuracy_lines(proc.stdout)[0] == progress.read_result(log_dir)["test_accuracy"]
    assert proc.stdout.splitlines()[2].endswith(f"by --sha256 {_chief_digest(output)}"), proc.stdout


def test_a_planted_version_is_not_loaded_and_a_changed_file_is_refused(run, tmp_path):
    """On a copy of the run: a higher version planted beside the export is never picked (the
    run's record names export/1) and, named, is refused; a changed weight file is refused with
    its name and the digest the record expects, before TensorFlow is imported."""
    log_dir, _ = run
    copy = tmp_path / "run"
    shutil.copytree(log_dir / "export", copy / "export")
    shutil.copy(log_dir / "result.json", copy / "result.json")
    planted = shutil.copytree(copy / "export" / "1", copy / "export" / "2")

    def evaluate(target: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "trainer.evaluate", str(target), "--data_dir", str(BUNDLED_DATA_DIR)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )

    picked = evaluate(copy / "export")
    assert picked.returncode == 0, picked.stderr[-3000:]
    assert picked.stdout.splitlines()[1].endswith(f" by {copy / 'export' / '1'}"), picked.stdout
    named = evaluate(planted)
    assert named.returncode == 3, named.stdout + named.stderr
    assert f"refused: {planted}: not the run's export: {copy / 'result.json'} names export/1" in named.stderr
    data = next((copy / "export" / "1" / "variables").glob("variables.data-*"))
    expected = progress.read_result(log_dir)["saved_model_files"][f"variables/{data.name}"]
    data.write_bytes(bytes(len(data.read_bytes())))
    changed = evaluate(copy)
    assert changed.returncode == 3, changed.stdout + changed.stderr
    assert changed.stderr.startswith(f"refused: {data}: sha256 "), changed.stderr
    assert f"but {copy / 'result.json'} records {expected}: changed since" in changed.stderr
    assert "Test-Accuracy" not in changed.stdout


def test_events_are_in_train_and_validation_with_keras_tags(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    log_dir, output = run
    result = progress.read_result(log_dir)
    tags = {}
    values = {}
    for subdir in ("train", "validation"):
        events = EventAccumulator(str(log_dir / subdir))
        events.Reload()
        tags[subdir] = set(events.Tags()["tensors"])
        for tag in tags[subdir]:
            values[subdir, tag] = [
                (e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)
            ]
    assert tags == {
        "train": {
            "epoch_loss",
            "epoch_accuracy",
            "epoch_learning_rate",
            "epoch_examples_per_s",
            "batch_loss",
        },
        "validation": {"epoch_loss", "epoch_accuracy"},
    }
    assert [step for step, _ in values["validation", "epoch_accuracy"]] == [1]
    assert values["validation", "epoch_accuracy"][0][1] == pytest.approx(
        result["test_accuracy"], abs=1e-6
    )  # float32 in the event
    assert values["train", "epoch_loss"][0][1] == pytest.approx(result["final_cost"], rel=1e-5)
    epoch = progress.parse_log(
        "\n".join(line for line in output.splitlines() if line.startswith("[chief-0]"))
    ).epochs[0]
    assert values["validation", "epoch_loss"][0][1] == pytest.approx(epoch["test_cost"], abs=5e-5 + 1e-6)
    assert values["train", "epoch_accuracy"][0][1] == pytest.approx(epoch["train_accuracy"], abs=5e-5 + 1e-6)
    # one batch_loss per Step line
    assert len(values["train", "batch_loss"]) == len(progress.parse_log(output).steps)


def test_the_finished_run_again_keeps_its_export_and_result(run):
    log_dir, _ = run
    pb = log_dir / "export" / "1" / "saved_model.pb"
    before = (pb.stat().st_ino, pb.stat().st_mtime_ns, (log_dir / "result.json").read_text())
    output = launch(log_dir)
    assert "[chief-0] Run already finished: checkpoint " in output
    assert f"[chief-0] Exported model: SavedModel {log_dir / 'export' / '1'} " in output
    assert (pb.stat().st_ino, pb.stat().st_mtime_ns, (log_dir / "result.json").read_text()) == before
    assert sorted(p.name for p in (log_dir / "export").iterdir()) == ["1"]


def test_a_finished_run_without_its_export_exports_it_and_names_it(run):
    log_dir, _ = run
    result = progress.read_result(log_dir)
    shutil.rmtree(log_dir / "export")
    older = {k: v for k, v in result.items() if k not in ("saved_model", "keras_model", "saved_model_files")}
    (log_dir / "result.json").write_text(json.dumps(older))  # as an earlier trainer wrote it
    output = launch(log_dir)
    assert "[chief-0] Run already finished: checkpoint " in output
    assert (log_dir / "export" / "1" / "saved_model.pb").is_file()
    again = progress.read_result(log_dir)
    # The same weights: the same result, now with the digests of the files this chief wrote.
    assert {k: v for k, v in again.items() if k != "saved_model_files"} == {
        k: v for k, v in result.items() if k != "saved_model_files"
    }
    from trainer.training.export import file_digests

    assert again["saved_model_files"] == file_digests(log_dir / "export" / "1")


def test_report_and_tensorboard_over_a_directory_of_two_runs(run, tmp_path):
    from trainer.board import TensorBoardServer

    log_dir, _ = run
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("run-a", "run-b"):  # the second: a copy, as a run of the same recipe would be
        shutil.copytree(log_dir, runs / name, ignore=shutil.ignore_patterns("export", "logs"))
    picture = tmp_path / "both.png"
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.report", str(runs), "--out", str(picture)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split(": ")[1] for line in proc.stdout.splitlines()] == ["run-a", "run-b"]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    expected_runs = ["run-a/train", "run-a/validation", "run-b/train", "run-b/validation"]
    board = TensorBoardServer(runs)
    try:
        board.start()
        # TensorBoard answers before it has read the event files (a thread loads them, then
        # rereads every few seconds): wait until it lists both runs with their tags, then assert.
        while True:
            with urllib.request.urlopen(board.url + "data/runs", timeout=30) as response:
                listed = json.loads(response.read())
            with urllib.request.urlopen(board.url + "data/plugin/scalars/tags", timeout=30) as response:
                tags = json.loads(response.read())
            loaded = sorted(listed) == expected_runs and all(
                {"epoch_loss", "epoch_accuracy", *(["batch_loss"] if name.endswith("/train") else [])}
                <= set(tags.get(name, {}))
                for name in expected_runs
            )
            if loaded:
                break
            time.sleep(1)
    finally:
        board.stop()
    assert sorted(listed) == expected_runs
    for name in ("run-a", "run-b"):
        assert {"epoch_loss", "epoch_accuracy"} <= set(tags[f"{name}/validation"])
        assert {"epoch_loss", "epoch_accuracy", "batch_loss"} <= set(tags[f"{name}/train"])
