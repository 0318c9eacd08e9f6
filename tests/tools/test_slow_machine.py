"""tools/slow-machine/slow-machine: the stand-in for the slowest machine, run for real (root,
cgroups): its limits reach the command, its group goes away after it, bad input is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "slow-machine" / "slow-machine"
CGROUP_FS = Path("/sys/fs/cgroup")

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="makes a cgroup: root on Linux"
)

#: Prints what the command sees: its environment's limits, its cgroup lines and its group's quota.
PROBE = r"""
import os, sys
from pathlib import Path
print("isa", os.environ.get("ONEDNN_MAX_CPU_ISA"))
print("onednn", os.environ.get("TF_ENABLE_ONEDNN_OPTS"))
parent = os.environ["LOCAL_CLUSTER_CGROUP_PARENT"]
print("parent", parent)
fs = Path("/sys/fs/cgroup")
if (fs / "cpu" / "cpu.cfs_quota_us").exists():
    print("quota", (fs / "cpu" / parent.lstrip("/") / "cpu.cfs_quota_us").read_text().strip(),
          (fs / "cpu" / parent.lstrip("/") / "cpu.cfs_period_us").read_text().strip())
else:
    print("quota", *(fs / parent.lstrip("/") / "cpu.max").read_text().split())
print("in", sum(line.split(":", 2)[2] == parent for line in Path("/proc/self/cgroup").read_text().splitlines()))
"""


def _groups() -> set[str]:
    return {str(p) for p in CGROUP_FS.glob("*/tf-mnist-slow-machine-*")} | {
        str(p) for p in CGROUP_FS.glob("tf-mnist-slow-machine-*")
    }


@needs_root
def test_the_command_runs_in_a_quota_group_with_onednn_capped_at_avx2():
    before = _groups()
    proc = subprocess.run(
        [str(TOOL), "--cores", "1.5", "--", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"},
    )
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert seen["isa"] == "AVX2"
    assert seen["onednn"] == "None"  # left to the trainer (trainer/cpu_kernels.py)
    assert seen["parent"].startswith("/tf-mnist-slow-machine-")
    assert seen["quota"] == "15000 10000"  # 1.5 cores: 15 ms per 10 ms period
    assert int(seen["in"]) >= 1  # the command's own cgroup is the tool's, in its hierarchies
    assert "slow-machine: exit 0 after" in proc.stderr and "s CPU at 1.5 cores" in proc.stderr
    assert _groups() == before  # removed in every hierarchy


@needs_root
def test_tf_default_turns_tensorflows_onednn_off_as_on_the_real_cpu():
    proc = subprocess.run(
        [str(TOOL), "--tf-default", "--", sys.executable, "-c", PROBE], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "onednn 0" in proc.stdout.splitlines()


@needs_root
def test_the_commands_exit_status_is_kept():
    proc = subprocess.run([str(TOOL), "--", "sh", "-c", "exit 7"], capture_output=True, text=True)
    assert proc.returncode == 7
    assert "slow-machine: exit 7 after" in proc.stderr


@needs_root
def test_a_process_left_behind_is_killed_and_the_group_removed():
    before = _groups()
    proc = subprocess.run(
        [str(TOOL), "--", "sh", "-c", "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $!"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    left = int(proc.stdout.split()[0])
    assert "the command left processes in its group" in proc.stderr
    assert not Path(f"/proc/{left}").exists() or "zombie" in Path(f"/proc/{left}/status").read_text().lower()
    assert _groups() == before


@pytest.mark.parametrize("cores", ["0", "abc", "100", "-1"])
def test_a_bad_quota_is_refused_naming_it(cores):
    proc = subprocess.run([str(TOOL), "--cores", cores, "--", "true"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"--cores {cores}: must be a number of cores from 0.1 to 64" in proc.stderr
