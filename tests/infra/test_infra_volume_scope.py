"""What each pod sees of the shared volume (docs/design.md, "What a task pod may write"): a task
(chief, worker, ps) mounts the data directory read-only and its run's directory read-write, each
alone by subPath at its own path, never the volume's root; the staging Job, which every task Job
waits for, mounts the root to stage the data and make the run's directory; the setup Job keeps
the root for its package and sample folders; TensorBoard reads it all, read-only."""

from __future__ import annotations

import mock_engine as me
import pytest

from infra.components import pods

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
TASKS = ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0", "mnist-ps-1"]
#: The pods that mount the volume's root writable, and why: they make its directories.
ROOT_WRITERS = {"mnist-stage-data", "mnist-setup"}


def _workloads(run: me.Run) -> dict[str, dict]:
    """Object name -> pod spec of every Job and Deployment."""
    return {
        o.name: o.inputs["spec"]["template"]["spec"] for o in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]
    }


def _volume_mounts(pod: dict) -> list[dict]:
    """The mounts of the shared volume (the claim's) in ``pod``'s one container."""
    claimed = {v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    (container,) = pod["containers"]
    return [m for m in container["volumeMounts"] if m["name"] in claimed]


@pytest.fixture(params=["base image", "images of your own"])
def run(request, dev_config) -> me.Run:
    config = (
        dev_config if request.param == "base image" else {**dev_config, "tf-mnist:imageRegistry": REGISTRY}
    )
    run = me.run_program(config)
    assert run.error is None, run.error
    return run


def test_a_task_mounts_the_data_read_only_and_only_its_run_directory_writable(run):
    data_dir, run_dir = run.outputs["dataDir"], run.outputs["runDir"]
    for name in TASKS:
        mounts = _volume_mounts(_workloads(run)[name])
        assert mounts[:2] == [
            {
                "name": "data",
                "mountPath": data_dir,
                "subPath": data_dir.removeprefix("/data/"),
                "readOnly": True,
            },
            {"name": "data", "mountPath": run_dir, "subPath": run_dir.removeprefix("/data/")},
        ], name
        # On the base image, its package set's folder, read-only; nothing else of the volume.
        for extra in mounts[2:]:
            assert extra["readOnly"] is True and extra["subPath"].startswith("packages/"), (name, extra)
        assert all("subPath" in m for m in mounts), name
        assert [m for m in mounts if not m.get("readOnly")] == [mounts[1]], name


def test_the_task_paths_are_the_ones_the_trainer_is_given(run):
    # Mounted at their own paths: --data_dir and --log_dir are those paths, and what the
    # trainer prints (checkpoints, the export) is where it lies on the volume.
    for name in TASKS:
        pod = _workloads(run)[name]
        args = pod["containers"][0]["args"]
        flags = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
        mounted = {m["mountPath"] for m in _volume_mounts(pod)}
        assert {flags["--data_dir"], flags["--log_dir"]} <= mounted, name
        assert "/data" not in mounted, name


def test_on_the_base_image_a_task_mounts_its_own_package_set_read_only(dev_config):
    run = me.run_program(dev_config)
    for name in TASKS:
        (container,) = _workloads(run)[name]["containers"]
        site = next(e["value"] for e in container["env"] if e["name"] == "PYTHONPATH").split(":")[1]
        (packages,) = _volume_mounts(_workloads(run)[name])[2:]
        assert packages["mountPath"] == site.removesuffix("/site"), name
        assert packages["subPath"] == packages["mountPath"].removeprefix("/data/"), name


def test_only_staging_and_setup_mount_the_volume_s_root_writable(run):
    writers = set()
    for name, pod in _workloads(run).items():
        for mount in _volume_mounts(pod):
            if "subPath" not in mount and not mount.get("readOnly"):
                assert mount["mountPath"] == "/data", name
                writers.add(name)
    expected = ROOT_WRITERS if run.outputs["setupJobName"] else {"mnist-stage-data"}
    assert writers == expected
    # TensorBoard reads every run of the stack, read-only (the claim too).
    board = _workloads(run)["mnist-tensorboard"]
    assert _volume_mounts(board) == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    assert [
        v["persistentVolumeClaim"]["readOnly"] for v in board["volumes"] if "persistentVolumeClaim" in v
    ] == [True]


def test_staging_makes_the_run_directory_before_any_task_starts(run):
    staging = run.one(JOB, "mnist-stage-data")
    (container,) = staging.inputs["spec"]["template"]["spec"]["containers"]
    assert container["command"][-2:] == ["--run_dir", run.outputs["runDir"]]
    for name in TASKS:
        assert staging.urn in run.one(JOB, name).dependencies, name


def test_a_new_run_key_gives_staging_the_new_run_directory(dev_config):
    before = me.run_program(dev_config)
    after = me.run_program(me.set_flat(dev_config, "hyperparams.model", "mlp"))
    assert after.error is None, after.error
    assert after.outputs["runDir"] != before.outputs["runDir"]
    (container,) = after.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"]
    assert container["command"][-1] == after.outputs["runDir"]


@pytest.mark.parametrize("directory", ["/data", "/elsewhere/runs", "/data/../etc", "/database/x"])
def test_a_directory_outside_the_volume_is_refused(directory):
    with pytest.raises(ValueError, match=f"{directory}: not a directory under the volume's mount path /data"):
        pods.volume_dir_mount("data", "/data", directory, read_only=True)
