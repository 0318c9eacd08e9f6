"""No image to build (infra/components/setup.py): every pod of a stack without images of its
own runs the base image of its region, the code from content-named ConfigMaps and the packages
that the setup Job installs on the volume; images of your own (imageRegistry, *.image) replace
it role by role."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import mock_engine as me
import pytest

from infra import bundle

JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
REGISTRY = "registry.example.com/team"


def containers(run: me.Run) -> dict[str, dict]:
    """Object name -> its one container, for every Job and Deployment."""
    out = {}
    for obj in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        (container,) = obj.inputs["spec"]["template"]["spec"]["containers"]
        out[obj.name] = container
    return out


def env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def no_region(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "alicloud:region"}


def kubeconfig_mode(config: dict) -> dict:
    """``config`` against an existing cluster (no cloud layer, no region) on an existing NAS."""
    return no_region(config) | {
        "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
        "tf-mnist:nas.mountTargetDomain": me.MOUNT_TARGET_DOMAIN,
    }


def test_the_dev_stack_runs_the_regional_base_image_with_its_packages(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    found = containers(run)
    # By tag: `pulumi up` resolves it to its digest, which every pod runs (infra/image_pins.py).
    assert {c["image"] for c in found.values()} == {me.pinned(bundle.ALINUX_PYTHON_IMAGE)}
    assert {c["imagePullPolicy"] for c in found.values()} == {"IfNotPresent"}
    cpu = f"/data/packages/cpu-{bundle.lock_hash('cpu')}/site"
    gpu = f"/data/packages/gpu-{bundle.lock_hash('gpu')}/site"
    board = f"/data/packages/tensorboard-{bundle.lock_hash('tensorboard')}/site"
    for name in ("mnist-chief-0", "mnist-ps-0", "mnist-ps-1", "mnist-stage-data"):
        assert env(found[name])["PYTHONPATH"] == f"/opt/tf-mnist:{cpu}", name
    for name in ("mnist-worker-0", "mnist-worker-1"):
        assert env(found[name])["PYTHONPATH"] == f"/opt/tf-mnist:{gpu}"
        assert env(found[name])["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env(found["mnist-tensorboard"])["PYTHONPATH"] == board
    assert found["mnist-tensorboard"]["command"] == ["python", "-m", "tensorboard.main"]
    assert found["mnist-chief-0"]["command"] == ["python", "-m", "trainer"]
    assert {"name": "code", "mountPath": "/opt/tf-mnist", "readOnly": True} in found["mnist-chief-0"][
        "volumeMounts"
    ]
    assert run.outputs["setupJobName"] == "mnist-setup"
    assert run.outputs["baseImage"] == me.pinned(bundle.ALINUX_PYTHON_IMAGE)


def test_the_setup_job_installs_every_set_from_the_regional_mirror(dev_config):
    run = me.run_program(dev_config)
    job = run.one(JOB, "mnist-setup")
    (container,) = job.inputs["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:5] == ["python", "-m", "trainer.install", "--dest", "/data/packages"]
    assert command[command.index("--index_url") + 1] == bundle.ALIYUN_PYPI_MIRROR
    locks = [command[i + 1] for i, a in enumerate(command) if a == "--lock"]
    assert locks == [f"{s}=/opt/tf-mnist-locks/{s}.txt" for s in ("cpu", "gpu", "tensorboard")]
    assert command[command.index("--sample_dest") + 1] == f"/data/sample/{bundle.sample_hash()}"
    assert job.inputs["spec"]["backoffLimit"] == 0
    assert job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    spec = job.inputs["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    locks_map = next(r for r in run.of_type(CONFIG_MAP) if r.name.startswith("mnist-packages-"))
    assert locks_map.inputs["data"] == {
        f"{s}.txt": bundle.lock_text(s) for s in ("cpu", "gpu", "tensorboard")
    }
    # Staging (and so the tasks) and TensorBoard wait for it.
    assert job.urn in run.one(JOB, "mnist-stage-data").dependencies
    assert job.urn in run.one(DEPLOYMENT, "mnist-tensorboard").dependencies


def test_the_code_is_immutable_configmaps_named_by_content(dev_config):
    run = me.run_program(dev_config)
    code = run.one(CONFIG_MAP, f"mnist-code-{bundle.code_hash()}")
    assert code.inputs["immutable"] is True
    files = bundle.code_files()
    assert code.inputs["data"] == {bundle.config_map_key(p): data.decode() for p, data in files.items()}
    volume = next(
        v
        for v in run.one(JOB, "mnist-chief-0").inputs["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "code"
    )
    assert volume["configMap"]["name"] == code.name
    assert {i["path"] for i in volume["configMap"]["items"]} == set(files)
    pieces = [
        r for r in run.of_type(CONFIG_MAP) if r.name.startswith(f"mnist-sample-{bundle.sample_hash()}-")
    ]
    assert len(pieces) >= 2 and all(p.inputs["immutable"] is True for p in pieces)
    joined: dict[str, bytes] = {}
    for piece in pieces:
        for key, value in piece.inputs["binaryData"].items():
            assert len(base64.b64decode(value)) <= bundle.CONFIG_MAP_BYTES
            joined[key] = base64.b64decode(value)
    for name, data in bundle.sample_files().items():
        count = len([k for k in joined if k.startswith(f"{name}.part-")])
        assert b"".join(joined[f"{name}.part-{i}"] for i in range(count)) == data
    # The staging Job copies the joined sample, not the image's (there is none).
    (stage,) = run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"]
    assert stage["command"][stage["command"].index("--source") + 1] == f"/data/sample/{bundle.sample_hash()}"


def test_without_a_region_python_slim_by_digest_and_pypi(dev_config):
    registry = me.FakeRegistry()
    run = me.run_program(kubeconfig_mode(dev_config), registry=registry)
    assert run.error is None, run.error
    found = containers(run)
    assert {c["image"] for c in found.values()} == {bundle.PYTHON_SLIM_IMAGE}
    assert "@sha256:" in bundle.PYTHON_SLIM_IMAGE
    assert {c["imagePullPolicy"] for c in found.values()} == {"IfNotPresent"}
    assert registry.asked == []  # a digest is not asked for
    command = found["mnist-setup"]["command"]
    assert command[command.index("--index_url") + 1] == bundle.PYPI_INDEX


def test_base_image_and_index_can_be_set(dev_config):
    image = "registry.example.com/python:3.11@sha256:" + "c" * 64
    config = dev_config | {
        "tf-mnist:baseImage": image,
        "tf-mnist:packageIndex": "http://10.0.0.5:8080/simple/",
    }
    run = me.run_program(config)
    assert run.error is None, run.error
    assert {c["image"] for c in containers(run).values()} == {image}
    command = containers(run)["mnist-setup"]["command"]
    assert command[command.index("--index_url") + 1] == "http://10.0.0.5:8080/simple/"
    policy = run.one(POLICY, "mnist-setup")
    ports = {p["port"] for rule in policy.inputs["spec"]["egress"] for p in rule.get("ports", [])}
    assert {80, 443, 8080} <= ports


@pytest.mark.parametrize(
    "value", ["ftp://mirror.example/simple/", "https://user:pw@mirror.example/simple/", "not a url"]
)
def test_a_bad_package_index_is_refused_by_name(dev_config, value):
    run = me.run_program(dev_config | {"tf-mnist:packageIndex": value})
    assert run.error is not None
    assert "packageIndex" in str(run.error) and value in str(run.error)
    assert "must be an http(s) URL of a package index" in str(run.error)


def test_images_of_your_own_leave_out_the_code_and_the_setup(dev_config):
    run = me.run_program(dev_config | {"tf-mnist:imageRegistry": REGISTRY})
    assert run.error is None, run.error
    found = containers(run)
    assert "mnist-setup" not in found
    assert found["mnist-worker-0"]["image"] == me.pinned(f"{REGISTRY}/trainer:2.21.0-gpu")
    assert found["mnist-chief-0"]["image"] == me.pinned(f"{REGISTRY}/trainer:2.21.0-cpu")
    assert found["mnist-tensorboard"]["command"] == ["tensorboard"]
    assert all("PYTHONPATH" not in env(c) for c in found.values())
    assert not [
        r.name for r in run.of_type(CONFIG_MAP) if r.name.startswith(("mnist-code-", "mnist-sample-"))
    ]
    assert run.outputs["setupJobName"] is None
    assert "mnist-setup" not in {p.name for p in run.of_type(POLICY)}


def test_an_image_of_your_own_for_one_role_leaves_its_set_out(dev_config):
    run = me.run_program(dev_config | {"tf-mnist:tensorboard.image": f"{REGISTRY}/tensorboard:2.21.0"})
    command = containers(run)["mnist-setup"]["command"]
    assert [command[i + 1].split("=")[0] for i, a in enumerate(command) if a == "--lock"] == ["cpu", "gpu"]
    assert containers(run)["mnist-tensorboard"]["command"] == ["tensorboard"]


def test_cpu_workers_load_the_cpu_set(dev_config):
    run = me.run_program(dev_config | {"tf-mnist:worker.gpuCount": "0"})
    command = containers(run)["mnist-setup"]["command"]
    assert [command[i + 1].split("=")[0] for i, a in enumerate(command) if a == "--lock"] == [
        "cpu",
        "tensorboard",
    ]
    assert env(containers(run)["mnist-worker-0"])["PYTHONPATH"].endswith(
        f"/cpu-{bundle.lock_hash('cpu')}/site"
    )


def test_changed_code_or_pins_are_a_new_run(dev_config, monkeypatch):
    base = me.run_program(dev_config).outputs["runDir"]
    assert me.run_program(dev_config).outputs["runDir"] == base
    monkeypatch.setattr(bundle, "code_hash", lambda root=bundle.REPO: "0" * 12)
    changed_code = me.run_program(dev_config)
    assert changed_code.outputs["runDir"] != base
    assert changed_code.one(CONFIG_MAP, "mnist-code-000000000000").inputs["immutable"] is True
    monkeypatch.undo()
    real = bundle.lock_hash
    monkeypatch.setattr(
        bundle, "lock_hash", lambda s, root=bundle.REPO: "1" * 12 if s == "gpu" else real(s, root)
    )
    changed_pins = me.run_program(dev_config)
    assert changed_pins.outputs["runDir"] not in (base, changed_code.outputs["runDir"])
    assert changed_pins.outputs["runDir"].rsplit("/", 1)[0] == base.rsplit("/", 1)[0]


def test_own_images_keep_their_run_when_the_code_changes(dev_config, monkeypatch):
    config = dev_config | {"tf-mnist:imageRegistry": REGISTRY}
    base = me.run_program(config).outputs["runDir"]
    monkeypatch.setattr(bundle, "code_hash", lambda root=bundle.REPO: "0" * 12)
    assert me.run_program(config).outputs["runDir"] == base


def test_the_ownership_check_knows_the_setup_objects(dev_config):
    config = kubeconfig_mode(dev_config)
    cluster = me.FakeCluster()
    run = me.run_program(config, cluster=cluster)
    assert run.error is None, run.error
    read = {ref.name for ref in cluster.reads}
    assert {"mnist-setup", f"mnist-code-{bundle.code_hash()}"} <= read
    assert any(name.startswith("mnist-sample-") for name in read)
    assert any(name.startswith("mnist-packages-") for name in read)


def test_a_pull_secret_reaches_the_setup_pod_too(dev_config):
    run = me.run_program(dev_config | {"tf-mnist:imagePullSecret": "mirror-pull"})
    assert run.error is None, run.error
    for obj in [*run.of_type(JOB), *run.of_type(DEPLOYMENT)]:
        assert obj.inputs["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}], (
            obj.name
        )


def test_what_the_configmaps_carry_stages_the_sample_as_a_pod_would(dev_config, tmp_path):
    """The code ConfigMap laid out as its volume's items, the sample's pieces joined by
    trainer.install as the setup Job does, then the staging Job's own command run from that
    code alone (not this checkout): the sample is staged with its checksums verified."""
    run = me.run_program(dev_config)
    code_dir, parts, volume = tmp_path / "code", tmp_path / "parts", tmp_path / "data"
    code = run.one(CONFIG_MAP, f"mnist-code-{bundle.code_hash()}").inputs["data"]
    volumes = run.one(JOB, "mnist-chief-0").inputs["spec"]["template"]["spec"]["volumes"]
    for item in next(v for v in volumes if v["name"] == "code")["configMap"]["items"]:
        (code_dir / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (code_dir / item["path"]).write_text(code[item["key"]])
    parts.mkdir()
    for piece in run.of_type(CONFIG_MAP):
        for key, value in (piece.inputs.get("binaryData") or {}).items():
            (parts / key).write_bytes(base64.b64decode(value))
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    (stage,) = run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"]
    sample = stage["command"][stage["command"].index("--source") + 1]
    dest = stage["command"][stage["command"].index("--dest") + 1]
    setup = containers(run)["mnist-setup"]["command"]
    joined = [sys.executable, "-m", "trainer.install", "--dest", str(volume / "packages"), "--index_url", "x"]
    joined += ["--sample_parts", str(parts), "--sample_dest", str(volume / sample.removeprefix("/data/"))]
    assert setup[setup.index("--sample_dest") + 1] == sample
    done = subprocess.run(joined, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    command = [sys.executable, *stage["command"][1 : stage["command"].index("--volume_hint")]]
    command = [volume / c.removeprefix("/data/") if c.startswith("/data/") else c for c in command]
    done = subprocess.run(
        list(map(str, command)), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    staged = volume / dest.removeprefix("/data/")
    assert sorted(p.name for p in staged.iterdir() if not p.name.startswith(".")) == sorted(
        bundle.sample_files()
    )


def test_a_setup_pod_that_never_starts_fails_at_the_start_timeout(dev_config):
    """Created with data.startTimeoutSeconds as its deadline (a base image that cannot be pulled
    fails `up` then), which the run monitor raises to the hour once the pod runs."""
    run = me.run_program(dev_config | {"tf-mnist:data.startTimeoutSeconds": "300"})
    setup = run.one(JOB, "mnist-setup")
    assert setup.inputs["spec"]["activeDeadlineSeconds"] == 300
    assert "spec.activeDeadlineSeconds" in setup.ignore_changes
    monitor = run.one(JOB, "mnist-monitor").inputs["spec"]["template"]["spec"]["containers"][0]
    assert (env(monitor)["MONITOR_SETUP_JOB"], env(monitor)["MONITOR_SETUP_DEADLINE_S"]) == (
        "mnist-setup",
        "3600",
    )
    role = run.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "mnist-monitor")
    (patch,) = [rule for rule in role.inputs["rules"] if rule["verbs"] == ["patch"]]
    assert "mnist-setup" in patch["resourceNames"]
