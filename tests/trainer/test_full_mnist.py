"""The launcher's default recipe on the whole MNIST (../shared/data/mnist-full), on request.

Opt-in twice: the product never depends on the data (see its README), and the run is an
accuracy check that costs about 75 CPU seconds of the slowest machine's CI, where the 10k
sample's runs (test_distributed.py) already show a default-recipe run ending cleanly. So it
runs with TF_MNIST_FULL_MNIST=1 and the data present; without either it is skipped with the
reason. Speed and accuracy targets live in benchmarks/trainer_benchmark.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_test_helpers import full_mnist_or_skip

from trainer.contract import progress

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TF_MNIST_FULL_MNIST") != "1",
        reason="opt-in: set TF_MNIST_FULL_MNIST=1 to train the whole MNIST (an accuracy check)",
    ),
]

REPO = Path(__file__).resolve().parents[2]


#: An error or warning line: glog's E/W/F prefixes, Python's, or a traceback.
_NOISY = re.compile(r"(^|\] )[EWF]\d{4} |error|warning|Traceback", re.I)


@pytest.mark.parametrize("ps", [1, 0], ids=["2-workers-1-ps", "2-workers-ps-0"])
def test_default_recipe_trains_full_mnist_and_ends_cleanly(tmp_path, ps):
    data_dir = full_mnist_or_skip()
    log_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.local",
            "--data_dir",
            str(data_dir),
            "--log_dir",
            str(log_dir),
            "--ps",
            str(ps),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    parsed = progress.parse_log(proc.stdout)
    # The recipe's 0.99 is the benchmark's target over 25 seeds (benchmarks/trainer_benchmark.py),
    # not this one run's: with a ps the workers are asynchronous, so no seed fixes the result.
    # What one run reaches, 2 workers + 1 ps: float32 (forced, an Intel Xeon; 2026-12-04) seeds
    # 1-25 mean 0.9916, min 0.9909; bfloat16 (AMX) four benchmarks of 25 seeds, means
    # 0.9911-0.9914, lowest 0.9892; float32 on an AMD EPYC without bfloat16, 0.9897-0.9913 in 4
    # runs. ps 0: 0.9904-0.9922. Standard deviation about 0.0006 throughout, so 0.985, about
    # 10 of them below the means, fails only a recipe that trains worse.
    assert parsed.done and parsed.test_accuracy >= 0.985, proc.stdout[-2000:]
    after = proc.stdout[proc.stdout.index("[chief-0] done") :]
    noisy = [line for line in after.splitlines() if _NOISY.search(line)]
    assert not noisy, "\n".join(noisy)
    assert "every task exited 0" in after
    # Each task's own output (what `kubectl logs` shows), from the start: with the start-up
    # banners gone (the fork server imports TensorFlow) nothing is an error or a warning.
    names = ["chief-0", "worker-0", "worker-1"] + (["ps-0"] if ps else [])
    for name in names:
        lines = (log_dir / "logs" / f"{name}.log").read_text().splitlines()
        assert lines[0].startswith(f"==== {name} started ")
        noisy = [line for line in lines if _NOISY.search(line)]
        assert not noisy, f"{name}: " + "\n".join(noisy)
