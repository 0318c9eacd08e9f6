"""On the real local cluster: a task pod of the stack writes its run's directory and nothing
else of the volume (docs/design.md, "What a task pod may write").

The smallest run trains to its end, so the subPath mounts work for the trainer (checkpoints, the
export and its record in result.json). Then a pod with the chief's own pod spec, the Job's
template (the same volumes, mounts, user and security context, in the namespace that enforces
"restricted"), runs a probe instead of the trainer: it tries to create a file in the data
directory, in its run's directory, beside its run's directory (a new run), in the volume's root
and through ``..`` into another run's directory planted on the volume. Deterministic, where an
exec into the chief would race a run that ends within a minute.
"""

from __future__ import annotations

import json

import pytest

from .kube import Kube, pod_phase
from .stack import TINY_RUN, on_volume, outputs, sha256, stack_on_cluster, wait_for_tasks

pytestmark = pytest.mark.cluster

NAMESPACE = "tf-mnist-volume-scope"
PREFIX = "mnist"
#: The probe: for each path, the outcome of creating a file there (then removed): "written" or
#: the errno's name; and whether the planted run's directory is visible at all.
PROBE = r"""
import errno, json, os, sys
outcomes = {}
for name, directory in zip(("data", "run", "beside", "root", "escape"), sys.argv[1:]):
    target = os.path.join(directory, "scope-probe")
    try:
        with open(target, "x") as f:
            f.write("probe")
        os.remove(target)
        outcomes[name] = "written"
    except OSError as err:
        outcomes[name] = errno.errorcode[err.errno]
outcomes["planted_visible"] = os.path.exists(sys.argv[5])
print(json.dumps(outcomes, sort_keys=True))
"""


def _probe_pod(template: dict, name: str, argv: list[str]) -> dict:
    """A pod of ``template``'s spec (a task Job's) running PROBE with ``argv``, without the
    task's labels (its Service must not select it)."""
    spec = {**template["spec"]}
    (container,) = spec["containers"]
    spec["containers"] = [{**container, "command": ["python", "-c", PROBE, *argv], "args": []}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_task_pod_can_write_its_run_directory_and_nothing_else(local_cluster, tmp_path_factory) -> None:
    config = TINY_RUN | {"namespace": NAMESPACE, "createNamespace": "true"}
    with stack_on_cluster(local_cluster, tmp_path_factory, "dev", config) as (project, volume):
        kube = Kube(local_cluster.kubectl_bin, local_cluster.kubeconfig, NAMESPACE)
        project.pulumi("up", "--yes", "--skip-preview", timeout=900)
        ends = wait_for_tasks(kube, PREFIX, ("chief-0", "worker-0"), timeout=600)
        assert ends == {f"{PREFIX}-chief-0": "Complete", f"{PREFIX}-worker-0": "Complete"}, ends
        run_dir, data_dir = on_volume(project, volume, "runDir"), on_volume(project, volume, "dataDir")
        result = json.loads((run_dir / "result.json").read_text())
        assert result["saved_model_files"] and (run_dir / result["saved_model"] / "saved_model.pb").is_file()

        # Another run of the same stack, as an earlier configuration left it on the volume.
        planted = run_dir.parent / "000000000000" / "export" / "9" / "saved_model.pb"
        planted.parent.mkdir(parents=True)
        planted.write_bytes(b"a planted model")
        before = {p: sha256(p) for p in [planted, *data_dir.iterdir()]}
        out = outputs(project)
        pod_run_dir, pod_data_dir = out["runDir"], out["dataDir"]
        argv = [
            pod_data_dir,
            pod_run_dir,
            pod_run_dir.rsplit("/", 1)[0],  # beside it: where a new run's directory would go
            "/data",
            f"{pod_run_dir}/../000000000000/export/9",
        ]
        template = kube.get("job", f"{PREFIX}-chief-0")["spec"]["template"]
        kube.apply(_probe_pod(template, "volume-scope-probe", argv))
        kube.wait_for(
            "the probe to end", lambda: pod_phase(kube, "volume-scope-probe") in ("Succeeded", "Failed")
        )
        outcomes = json.loads(kube.logs("volume-scope-probe").strip().splitlines()[-1])
        kube.run("delete", "pod", "volume-scope-probe", "--wait=false")
        print(f"\nwhat a task pod could write: {outcomes}")
        assert outcomes == {
            "data": "EROFS",
            "run": "written",
            "beside": "EROFS",  # the image's read-only root: the volume's runs/ is not there
            "root": "EROFS",
            "escape": "ENOENT",  # `..` leaves the mount: the other run is not in the pod at all
            "planted_visible": False,
        }, outcomes
        assert {p: sha256(p) for p in [planted, *data_dir.iterdir()]} == before
        assert not (run_dir / "scope-probe").exists() and not (data_dir / "scope-probe").exists()
