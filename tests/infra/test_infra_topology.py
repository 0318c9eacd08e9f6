"""The whole program under the mock engine: the resource graph for the dev stack and for
worker.number 4 + ps.number 1."""

from __future__ import annotations

import json
import re

import mock_engine as me
import pytest

from trainer.contract import cluster_spec as cs

JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
REGISTRY = "registry.cn-hangzhou.aliyuncs.com/tf-mnist"
GPU_IMAGE = f"{REGISTRY}/trainer:2.21.0-gpu"
CPU_IMAGE = f"{REGISTRY}/trainer:2.21.0-cpu"
RECOMMENDED = {
    "app.kubernetes.io/name": "tf-mnist",
    "app.kubernetes.io/instance": "mnist",
    "app.kubernetes.io/part-of": "tf-mnist",
    "app.kubernetes.io/managed-by": "pulumi",
}


@pytest.fixture
def dev_config(dev_config):
    """The dev stack with images of your own (imageRegistry: the images built from
    docker/): these tests check the task pods' images and mounts as docker/'s images run them.
    The default, the base image with the code and packages from the stack, is
    tests/infra/test_base_image.py's."""
    return {**dev_config, "tf-mnist:imageRegistry": REGISTRY}


def _with(config: dict, **structured: dict) -> dict:
    """dev config with some structured keys' sub-values replaced (engine form in, out)."""
    out = dict(config)
    for head, values in structured.items():
        obj = json.loads(out.get(f"tf-mnist:{head}", "{}"))
        obj.update(values)
        out[f"tf-mnist:{head}"] = json.dumps(obj)
    return out


TOPOLOGIES = {
    "dev-2w-2ps": ({}, 2, 2),
    "4w-1ps": ({"worker": {"number": 4}, "ps": {"number": 1}}, 4, 1),
}


@pytest.fixture(params=list(TOPOLOGIES), ids=list(TOPOLOGIES))
def topology(request, dev_config):
    changes, workers, ps = TOPOLOGIES[request.param]
    run = me.run_program(_with(dev_config, **changes))
    assert run.error is None, run.error
    return run, workers, ps


def _container(job: me.Registration) -> dict:
    containers = job.inputs["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{job.name}: {len(containers)} containers"
    return containers[0]


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _training_jobs(run: me.Run) -> list[me.Registration]:
    """The task Jobs and the staging Job (the run monitor's is checked in test_infra_monitor.py)."""
    return [j for j in run.of_type(JOB) if j.name != "mnist-monitor"]


def test_task_names_services_and_jobs(topology):
    run, workers, ps = topology
    tasks = [
        "mnist-chief-0",
        *[f"mnist-worker-{i}" for i in range(workers)],
        *[f"mnist-ps-{i}" for i in range(ps)],
    ]
    assert sorted(j.name for j in run.of_type(JOB)) == sorted([*tasks, "mnist-stage-data", "mnist-monitor"])
    assert sorted(s.name for s in run.of_type(SERVICE)) == sorted([*tasks, "mnist-tensorboard"])
    for name in [*tasks, "mnist-stage-data"]:
        assert run.one(JOB, name).inputs["metadata"]["name"] == name
    assert run.outputs["jobNames"] == tasks
    assert run.outputs["stagingJobName"] == "mnist-stage-data"
    cm = run.one("kubernetes:core/v1:ConfigMap", "mnist-cluster-spec")
    assert cm.inputs["metadata"]["name"] == "mnist-cluster-spec"
    assert json.loads(cm.inputs["data"]["cluster_spec.json"]) == run.outputs["clusterSpec"]


def test_every_kubernetes_object_has_recommended_labels_and_no_bare_job_label(topology):
    run, _, _ = topology
    objects = [r for r in run.registrations if r.type.startswith("kubernetes:") and r.custom]
    assert len(objects) > 10
    for obj in objects:
        labels = obj.inputs["metadata"].get("labels", {})
        assert RECOMMENDED.items() <= labels.items(), f"{obj.type} {obj.name}: {labels}"
        assert "app.kubernetes.io/component" in labels, obj.name
        template = obj.inputs.get("spec", {}).get("template")
        for where in [labels, *([template["metadata"]["labels"]] if template else [])]:
            assert "job" not in where, f"{obj.name} has a bare 'job' label"


def test_task_labels_selectors_and_ports(topology):
    run, workers, ps = topology
    ports = {"chief": 8000, "worker": 8000, "ps": 9000}
    for task_type, count in (("chief", 1), ("worker", workers), ("ps", ps)):
        for index in range(count):
            name = f"mnist-{task_type}-{index}"
            job, svc = run.one(JOB, name), run.one(SERVICE, name)
            pod_labels = job.inputs["spec"]["template"]["metadata"]["labels"]
            assert pod_labels["tf-replica-type"] == task_type
            assert pod_labels["tf-replica-index"] == str(index)
            assert pod_labels["app.kubernetes.io/component"] == task_type
            selector = svc.inputs["spec"]["selector"]
            assert selector == {
                "app.kubernetes.io/instance": "mnist",
                "tf-replica-type": task_type,
                "tf-replica-index": str(index),
            }
            assert selector.items() <= pod_labels.items(), name
            assert svc.inputs["spec"]["clusterIP"] == "None", f"{name} must be headless"
            (svc_port,) = svc.inputs["spec"]["ports"]
            (container_port,) = _container(job)["ports"]
            assert (
                svc_port["port"]
                == svc_port["targetPort"]
                == container_port["containerPort"]
                == ports[task_type]
            )


def test_tf_config_of_every_task_parses_back_to_its_own_task(topology):
    run, workers, ps = topology
    spec = run.outputs["clusterSpec"]
    assert spec == {
        "chief": ["mnist-chief-0.tf-mnist.svc:8000"],
        "worker": [f"mnist-worker-{i}.tf-mnist.svc:8000" for i in range(workers)],
        "ps": [f"mnist-ps-{i}.tf-mnist.svc:9000" for i in range(ps)],
    }
    services = {s.name: s for s in run.of_type(SERVICE)}
    seen = set()
    for job in _training_jobs(run):
        if job.name == "mnist-stage-data":
            assert "TF_CONFIG" not in _env(_container(job))
            continue
        tf_config = json.loads(_env(_container(job))["TF_CONFIG"])
        task = tf_config["task"]
        assert f"mnist-{task['type']}-{task['index']}" == job.name
        assert tf_config == cs.tf_config(spec, task["type"], task["index"])
        # The task's own address is its Service's DNS name and port.
        host, port = tf_config["cluster"][task["type"]][task["index"]].rsplit(":", 1)
        assert host == f"{job.name}.tf-mnist.svc"
        assert services[job.name].inputs["spec"]["ports"][0]["port"] == int(port)
        seen.add(job.name)
    assert len(seen) == 1 + workers + ps


def test_gpu_limits_and_tolerations_only_on_workers(topology):
    run, _, _ = topology
    for job in _training_jobs(run):
        container = _container(job)
        limits = container["resources"].get("limits", {})
        pod = job.inputs["spec"]["template"]["spec"]
        if job.name.startswith("mnist-worker-"):
            assert limits["nvidia.com/gpu"] == "1", job.name
            assert pod["tolerations"] == [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ]
            assert container["image"] == me.pinned(GPU_IMAGE)
            assert "NVIDIA_VISIBLE_DEVICES" not in _env(container)
        else:
            assert "nvidia.com/gpu" not in limits, job.name
            assert "nvidia.com/gpu" not in container["resources"].get("requests", {}), job.name
            assert "tolerations" not in pod, job.name
            assert container["image"] == me.pinned(CPU_IMAGE), job.name
            if job.name != "mnist-stage-data":
                assert _env(container)["NVIDIA_VISIBLE_DEVICES"] == "void", job.name
                assert _env(container)["CUDA_VISIBLE_DEVICES"] == "", job.name


def test_trainer_and_staging_commands(topology):
    run, _, _ = topology
    claim = run.one(PVC, "mnist-data").inputs["metadata"]["name"]
    for job in _training_jobs(run):
        container = _container(job)
        assert job.inputs["spec"]["template"]["spec"]["volumes"] == [
            {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        ]
        data_dir = run.outputs["dataDir"]
        assert re.fullmatch(r"/data/mnist/[0-9a-f]{12}", data_dir)
        if job.name == "mnist-stage-data":
            # Staging mounts the volume's root: it makes the data and run directories
            # (tests/infra/test_infra_volume_scope.py).
            assert container["volumeMounts"] == [
                {"name": "data", "mountPath": "/data"},
                {"name": "tmp", "mountPath": "/tmp"},
            ]
            # Then where the volume lives and how to fix it (tests/infra/test_infra_volume_ownership.py),
            # and the run directory it makes.
            command = container["command"]
            assert command[:-3] == ["python", "-m", "trainer.stage", "--dest", data_dir, "--volume_hint"]
            assert command[-2:] == ["--run_dir", run.outputs["runDir"]]
            continue
        assert container["volumeMounts"] == [
            {
                "name": "data",
                "mountPath": data_dir,
                "subPath": data_dir.removeprefix("/data/"),
                "readOnly": True,
            },
            {
                "name": "data",
                "mountPath": run.outputs["runDir"],
                "subPath": run.outputs["runDir"][len("/data/") :],
            },
            {"name": "tmp", "mountPath": "/tmp"},
        ]
        assert container["command"] == ["python", "-m", "trainer"]
        assert re.fullmatch(r"/data/runs/dev-tf-mnist-mnist/[0-9a-f]{12}", run.outputs["runDir"])
        # The dev stack sets no hyperparams: the program's recipe defaults.
        assert container["args"] == [
            "--data_dir",
            data_dir,
            "--log_dir",
            run.outputs["runDir"],
            "--epochs",
            "2",
            "--batch_size",
            "64",
            "--learning_rate",
            "0.004",
            "--model",
            "convnet_fc_slim",
            "--optimizer",
            "adam",
            "--lr_schedule",
            "warmup_cosine",
            "--lr_scaling",
            "sqrt",
            "--dropout",
            "0.1",
            "--label_smoothing",
            "0.1",
            "--augment_shift",
            "0",
            "--seed",
            "42",
            # auto is float32 for GPU workers (the dev stack's)
            "--precision",
            "float32",
            "--local_steps",
            "50",
            "--peer_timeout",
            "600",
            "--run_id",
            run.outputs["runId"],
        ]
        assert _env(container)["GRPC_FAIL_FAST"] == "use_caller"
        assert job.inputs["spec"]["backoffLimit"] == 4


def test_task_jobs_do_not_await_training_and_wait_for_staging(topology):
    run, _, _ = topology
    staging = run.one(JOB, "mnist-stage-data")
    assert "pulumi.com/skipAwait" not in staging.inputs["metadata"].get("annotations", {})
    assert staging.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == "1200"
    pools = {r.urn for r in run.of_type("alicloud:cs/nodePool:NodePool")}
    assert pools and pools <= set(staging.dependencies)
    for job in _training_jobs(run):
        if job.name != "mnist-stage-data":
            # Ready once created (no wait for training), and deletion is awaited (not skipAwait).
            assert me.own_annotations(job.inputs["metadata"]) == {
                "pulumi.com/waitFor": "jsonpath={.metadata.uid}"
            }, job.name
            assert staging.urn in job.dependencies, job.name
    for svc in run.of_type(SERVICE):
        if svc.name != "mnist-tensorboard":
            assert me.own_annotations(svc.inputs["metadata"]) == {"pulumi.com/skipAwait": "true"}, svc.name


def test_pv_and_pvc_bind_to_each_other_and_retain(topology):
    run, _, _ = topology
    pv, pvc = run.one(PV, "mnist-data"), run.one(PVC, "mnist-data")
    name = pv.inputs["metadata"]["name"]
    assert re.fullmatch(r"mnist-data-[0-9a-f]{8}", name), name
    assert pvc.inputs["metadata"]["name"] == name
    assert pv.inputs["metadata"]["labels"]["train"] == "mnist"
    assert "namespace" not in pv.inputs["metadata"]
    assert pvc.inputs["metadata"]["namespace"] == "tf-mnist"
    assert pvc.inputs["spec"]["selector"] == {"matchLabels": {"train": "mnist"}}
    assert pv.inputs["spec"]["storageClassName"] == pvc.inputs["spec"]["storageClassName"] == ""
    assert pv.inputs["spec"]["accessModes"] == pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv.inputs["spec"]["capacity"] == pvc.inputs["spec"]["resources"]["requests"] == {"storage": "5Gi"}
    assert pv.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc.inputs["spec"]["volumeName"] == name
    assert pv.urn in pvc.dependencies  # created after its PV, deleted before it
    assert pv.inputs["spec"]["csi"] == {
        "driver": "nasplugin.csi.alibabacloud.com",
        "volumeHandle": name,
        "volumeAttributes": {
            "server": me.MOUNT_TARGET_DOMAIN,
            "path": "/data",
            "mode": "1777",
            "modeType": "non-recursive",
        },
    }
    assert pv.inputs["spec"]["mountOptions"] == ["nolock,tcp,noresvport", "vers=3"]
    assert (run.outputs["pvName"], run.outputs["pvcName"]) == (name, name)


def test_pv_depends_on_the_mount_target(dev_config):
    run = me.run_program(dev_config)
    pv = run.one(PV, "mnist-data")
    mount_target = run.one("alicloud:nas/mountTarget:MountTarget", "tf-mnist-dev-mount")
    assert mount_target.urn in pv.dependencies
    rule = run.one("alicloud:nas/accessRule:AccessRule", "tf-mnist-dev-rule")
    assert rule.urn in mount_target.dependencies


def test_cloud_layer(dev_config):
    run = me.run_program(dev_config)
    vpc = run.one("alicloud:vpc/network:Network", "tf-mnist-dev-vpc")
    vswitch = run.one("alicloud:vpc/switch:Switch", "tf-mnist-dev-vswitch")
    assert vpc.inputs["cidrBlock"] == "192.168.0.0/16"
    assert vswitch.inputs["cidrBlock"] == "192.168.0.0/20"
    assert vswitch.inputs["zoneId"] == "cn-hangzhou-i"
    cluster = run.one("alicloud:cs/managedKubernetes:ManagedKubernetes", "tf-mnist-dev-ack")
    assert cluster.inputs["podVswitchIds"] == ["tf-mnist-dev-vswitch-pods-id"]  # Terway: a new stack's
    assert cluster.inputs["serviceCidr"] == "172.21.0.0/20"
    assert cluster.inputs["newNatGateway"] is True
    assert cluster.inputs["slbInternetEnabled"] is True
    assert {a["name"] for a in cluster.inputs["addons"]} == {"terway-eniip", "csi-plugin", "csi-provisioner"}
    cpu = run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-cpu")
    gpu = run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert cpu.urn in gpu.dependencies, "node pools must be created one after another"
    assert gpu.inputs["instanceTypes"] == [
        "ecs.gn5-c4g1.xlarge",
        "ecs.gn6i-c4g1.xlarge",
        "ecs.gn6i-c8g1.2xlarge",
        "ecs.gn6v-c8g1.2xlarge",
    ]
    # From 0 to 2 nodes: 2 workers x 1 GPU / 1 GPU per instance.
    assert gpu.inputs["scalingConfig"] == {"enable": True, "minSize": 0, "maxSize": 2, "type": "gpu"}
    assert "desiredSize" not in gpu.inputs
    assert gpu.inputs["systemDiskCategory"] == "cloud_efficiency"
    assert gpu.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert "taints" not in cpu.inputs
    fs = run.one("alicloud:nas/fileSystem:FileSystem", "tf-mnist-dev-fs")
    assert fs.inputs["protocolType"] == "NFS" and fs.inputs["storageType"] == "Capacity"
    assert fs.inputs["zoneId"] == "cn-hangzhou-i"
    assert fs.retain_on_delete is True
    assert "vpcId" not in fs.inputs and "vswitchId" not in fs.inputs
    rule = run.one("alicloud:nas/accessRule:AccessRule", "tf-mnist-dev-rule")
    assert rule.inputs["sourceCidrIp"] == "192.168.0.0/20"
    assert (rule.inputs["rwAccessType"], rule.inputs["userAccessType"]) == ("RDWR", "no_squash")
    provider = run.one("pulumi:providers:kubernetes", "tf-mnist-dev-k8s")
    assert provider.inputs["clusterIdentifier"] == me.CLUSTER_ID
    assert me.is_secret_value(provider.inputs["kubeconfig"])
    # NAS's zones first (before anything is registered), then the new cluster's credential; the
    # pools' prices besides (infra/instance_prices.py, tests/infra/test_infra_prices.py).
    calls = [c for c in run.calls_besides_state if c.token != me.INSTANCE_TYPES_TOKEN]
    assert [c.token for c in calls] == [me.NAS_ZONES_TOKEN, me.CREDENTIAL_TOKEN]
    assert calls[1].args["clusterId"] == me.CLUSTER_ID
    for obj in run.registrations:
        if obj.type.startswith("kubernetes:") and obj.custom:
            assert obj.provider.startswith(provider.urn + "::"), f"{obj.name} uses {obj.provider}"


def test_stack_outputs(dev_config):
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:tensorboard.serviceType": "LoadBalancer",
            "tf-mnist:tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
        }
    )
    out = run.outputs
    assert out["clusterId"] == me.CLUSTER_ID
    assert out["kubeconfig"] == me.KUBECONFIG
    assert run.secret_outputs["kubeconfig"] is True
    assert out["nasFileSystemId"] == "tf-mnist-dev-fs-id"
    assert out["mountTargetDomain"] == me.MOUNT_TARGET_DOMAIN
    assert out["tensorboardUrl"] == f"http://{me.LOAD_BALANCER_IP}/"
    assert (
        out["followChiefLog"][-1]
        == "kubectl --kubeconfig tf-mnist-kubeconfig.yaml --namespace tf-mnist logs --follow job/mnist-chief-0"
    )


def test_tensorboard(dev_config):
    run = me.run_program(dev_config)
    deployment = run.one("kubernetes:apps/v1:Deployment", "mnist-tensorboard")
    container = _container(deployment)
    assert container["image"] == me.pinned(f"{REGISTRY}/tensorboard:2.21.0")
    # One TensorBoard over every run of the stack.
    assert (
        container["args"][:2]
        == ["--logdir", "/data/runs/dev-tf-mnist-mnist"]
        == ["--logdir", run.outputs["runsDir"]]
    )
    svc = run.one(SERVICE, "mnist-tensorboard")
    # Private by default: reached with kubectl port-forward, no load balancer, no URL.
    assert svc.inputs["spec"]["type"] == "ClusterIP"
    assert (
        svc.inputs["spec"]["selector"].items()
        <= deployment.inputs["spec"]["template"]["metadata"]["labels"].items()
    )
    assert me.own_annotations(svc.inputs["metadata"]) == {}
    assert run.outputs["tensorboardUrl"] is None


def test_staging_source_comes_from_data_source(dev_config):
    url = "https://mirror.example.com/datasets/mnist.npz"
    run = me.run_program({**dev_config, "tf-mnist:data.source": url})
    assert run.error is None, run.error
    container = run.one(JOB, "mnist-stage-data").inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:-4] == [
        "python",
        "-m",
        "trainer.stage",
        "--dest",
        run.outputs["dataDir"],
        "--source",
        url,
    ]
