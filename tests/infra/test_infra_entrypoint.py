"""`main: infra`: the language host runs infra/ as a directory, with only infra/ on sys.path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mock_engine as me

from infra.bundle import ALINUX_PYTHON_IMAGE

# Emulates pulumi-language-python-exec: run_path on the program directory from inside it,
# with the repository root NOT importable, under mocks so no engine is needed.
SCRIPT = textwrap.dedent("""
    import json, runpy, sys
    sys.path = [p for p in sys.path if p not in ("", {repo!r})]
    sys.path.insert(0, {infra!r})
    sys.path.insert(0, {tests!r})
    import pulumi
    import mock_engine as me
    run = me.Run()
    mocks = me._Mocks(run, preview=False)
    pulumi.runtime.set_mocks(mocks, project="tf-mnist", stack="dev", monitor=me._Monitor(mocks))
    pulumi.runtime.set_all_config({config!r}, [])
    pulumi.runtime.test(lambda: runpy.run_path({infra!r}, run_name="__main__"))()
    print(json.dumps(sorted(r.name for r in run.registrations if r.type == "kubernetes:batch/v1:Job")))
""")


def test_program_directory_runs_without_the_repo_on_sys_path(dev_config):
    infra = str(me.REPO / "infra")
    # The entry point runs the program with its own registry lookup, which no stand-in reaches:
    # the base image by digest leaves no tag to ask a registry about (infra/image_pins.py).
    config = {**dev_config, "tf-mnist:baseImage": me.pinned(ALINUX_PYTHON_IMAGE)}
    script = SCRIPT.format(
        repo=str(me.REPO), infra=infra, tests=str(me.REPO / "tests" / "infra"), config=config
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=infra, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == (
        '["mnist-chief-0", "mnist-monitor", "mnist-ps-0", "mnist-ps-1", "mnist-setup", "mnist-stage-data", '
        '"mnist-worker-0", "mnist-worker-1"]'
    )
