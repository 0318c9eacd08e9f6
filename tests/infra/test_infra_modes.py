"""Strict Kubernetes schema validation of every object, preview behaviour, the assertion
counter, and the stack's other modes (CPU workers, autoscaling, allowlist, kubeconfig, ...)."""

from __future__ import annotations

import json

import kubernetes_validate
import mock_engine as me
import pulumi
import pytest
from pulumi.output import Unknown

from infra.components.chief_await import WAIT_FOR_END

#: Kubernetes minor version whose OpenAPI schema the objects must satisfy (strict: no unknown
#: fields). kubernetes-validate 1.37.0 ships 1.33-1.37; ACK offers 1.33 and later.
KUBERNETES_VERSION = "1.33.0"


def _set(config: dict, **flat: str) -> dict:
    return {**config, **{f"tf-mnist:{k.replace('__', '.')}": v for k, v in flat.items()}}


def _kubernetes_objects(run: me.Run) -> list[me.Registration]:
    return [
        r
        for r in run.registrations
        if r.type.startswith("kubernetes:") and r.custom and not r.type.startswith("pulumi:providers:")
    ]


CONFIGS = {
    "dev": {},
    "4w-1ps": {"worker.number": "4", "ps.number": "1"},
    "cpu-sync": {"worker.gpuCount": "0", "ps.number": "0", "tensorboard.serviceType": "ClusterIP"},
    "allowlist-namespace-wait": {
        "tensorboard.serviceType": "LoadBalancer",
        "tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
        "namespace": "training",
        "createNamespace": "true",
        "job.waitForChief": "true",
    },
    # A GPU chief, placement for every role, a deadline, a priority
    # class, a pull Secret created from credentials.
    "gpu-chief-placement-registry": {
        "ps.number": "0",
        "job.activeDeadlineSeconds": "86400",
        "job.peerTimeoutSeconds": "900",
        "job.priorityClassName": "training-high",
        "worker.nodeSelector": '{"aliyun.accelerator/nvidia_name": "Tesla-P100-PCIE-16GB"}',
        "worker.tolerations": '[{"key":"dedicated","operator":"Equal","value":"training","effect":"NoSchedule"}]',
        "chief.nodeSelector": '{"tf-mnist/pool": "cpu"}',
        "ps.tolerations": '[{"operator":"Exists"}]',
        "tensorboard.nodeSelector": '{"tf-mnist/pool": "cpu"}',
        "tensorboard.tolerations": '[{"key":"a","operator":"Exists","effect":"NoExecute","tolerationSeconds":60}]',
        "registryCredentials.username": "ml-team",
        "registryCredentials.password": "s3cr3t",
    },
    # On an existing cluster: NFS, an allowlist, an existing pull Secret.
    "existing-nfs": {
        "kubeconfig": me.secret(me.kubeconfig_content()),
        "persistence.volume.type": "nfs",
        "nfs.server": "10.0.0.5",
        "nfs.path": "/exports/tf-mnist",
        "imagePullSecret": "acr-pull",
        "tensorboard.serviceType": "LoadBalancer",
        "tensorboard.allowedSourceRanges": '["203.0.113.0/24"]',
    },
    "existing-hostPath": {
        "kubeconfig": me.secret(me.kubeconfig_content()),
        "persistence.volume.type": "hostPath",
        "tensorboard.serviceType": "NodePort",
    },
}
SECRET_KEYS = {"gpu-chief-placement-registry": ("tf-mnist:registryCredentials.password",)}
#: Objects (kind, a field of its spec) a configuration must produce, so that they get validated.
MUST_VALIDATE = {
    "gpu-chief-placement-registry": [("Secret", "type"), ("Job", "podFailurePolicy")],
    "existing-nfs": [("PersistentVolume", "nfs"), ("Service", "loadBalancerSourceRanges")],
    "existing-hostPath": [("PersistentVolume", "hostPath")],
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_kubernetes_object_validates_strictly(dev_config, name):
    run = me.run_program(
        {**dev_config, **{f"tf-mnist:{k}": v for k, v in CONFIGS[name].items()}},
        secret_keys=SECRET_KEYS.get(name, ()),
    )
    assert run.error is None, run.error
    objects = _kubernetes_objects(run)
    assert len(objects) >= 9
    manifests = [me.to_manifest(obj.inputs) for obj in objects]
    for kind, field_ in MUST_VALIDATE.get(name, []):
        assert any(m["kind"] == kind and field_ in {**m, **m.get("spec", {})} for m in manifests), (
            kind,
            field_,
        )
    for obj in objects:
        manifest = me.to_manifest(obj.inputs)
        assert manifest["kind"] == obj.type.rsplit(":", 1)[1], obj.type
        try:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{obj.type} {obj.name}: {error.message} at {list(error.caught.absolute_path)}")


def test_strict_validation_catches_an_unknown_field(dev_config):
    # The check above can fail: a misspelt field in a real manifest is rejected.
    run = me.run_program(dev_config)
    manifest = me.to_manifest(run.one("kubernetes:batch/v1:Job", "mnist-chief-0").inputs)
    manifest["spec"]["backofLimit"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_preview_makes_no_credential_call_and_leaves_the_kubeconfig_unknown(dev_config):
    run = me.run_program(dev_config, preview=True)
    assert run.error is None
    assert run.calls_besides_state == [], "the credential invoke must wait for a known cluster id"
    provider = run.one("pulumi:providers:kubernetes", "tf-mnist-dev-k8s")
    kubeconfig = provider.inputs["kubeconfig"]
    assert me.is_secret_value(kubeconfig) and isinstance(kubeconfig["value"], Unknown), kubeconfig
    assert isinstance(provider.inputs["clusterIdentifier"], Unknown)
    # The whole topology is still registered, so a preview shows it.
    assert len(run.of_type("kubernetes:batch/v1:Job")) == 8  # 5 tasks, staging, the run monitor, the setup
    assert "kubeconfig" not in run.outputs  # unknown outputs never resolve


def test_checks_fail_when_an_assertion_never_ran(dev_config):
    checks = me.Checks()

    @pulumi.runtime.test
    def body():
        from infra import program

        outputs = program.run()
        return checks.on(outputs["clusterId"], "cluster id", lambda value: None)

    pulumi.runtime.set_mocks(me._Mocks(me.Run(), preview=True), project="tf-mnist", stack="dev", preview=True)
    pulumi.runtime.set_all_config(dev_config, [])
    body()
    with pytest.raises(AssertionError, match="never ran"):
        checks.verify()


def test_checks_pass_when_the_assertion_ran(dev_config, checks):
    seen = []

    @pulumi.runtime.test
    def body():
        from infra import program

        outputs = program.run(lookup=me.FakeRegistry().lookup)
        return checks.on(
            outputs["clusterId"],
            "cluster id",
            lambda value: seen.append(value) or _assert_equal(value, me.CLUSTER_ID),
        )

    pulumi.runtime.set_mocks(
        me._Mocks(me.Run(), preview=False), project="tf-mnist", stack="dev", preview=False
    )
    pulumi.runtime.set_all_config(dev_config, [])
    body()
    assert seen == [me.CLUSTER_ID]


def _assert_equal(a, b):
    assert a == b


def test_cpu_workers_without_gpu_pool(dev_config):
    run = me.run_program(_set(dev_config, worker__gpuCount="0"))
    pools = [p.name for p in run.of_type("alicloud:cs/nodePool:NodePool")]
    assert pools == ["tf-mnist-dev-cpu"]
    for name in ("mnist-worker-0", "mnist-worker-1"):
        container = run.one("kubernetes:batch/v1:Job", name).inputs["spec"]["template"]["spec"]["containers"][
            0
        ]
        # The base image with the CPU packages (tests/infra/test_base_image.py), as the ps's.
        assert (
            container["image"]
            == run.one("kubernetes:batch/v1:Job", "mnist-ps-0").inputs["spec"]["template"]["spec"][
                "containers"
            ][0]["image"]
        )
        assert "/packages/cpu-" in {e["name"]: e.get("value") for e in container["env"]}["PYTHONPATH"]
        assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_gpu_pool_size_from_worker_demand_and_autoscaling(dev_config):
    run = me.run_program(
        _set(
            dev_config,
            worker__number="5",
            worker__gpuCount="2",
            gpuPool__gpusPerInstance="4",
            gpuPool__autoscaling="true",
        )
    )
    gpu = run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu")
    assert "desiredSize" not in gpu.inputs
    assert gpu.inputs["scalingConfig"] == {
        "enable": True,
        "minSize": 0,
        "maxSize": 3,
        "type": "gpu",
    }  # ceil(10/4)
    limits = run.one("kubernetes:batch/v1:Job", "mnist-worker-4").inputs["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2"


def test_no_ps_means_synchronous_workers(dev_config):
    run = me.run_program(_set(dev_config, ps__number="0"))
    assert run.outputs["clusterSpec"] == {
        "chief": ["mnist-chief-0.tf-mnist.svc:8000"],
        "worker": ["mnist-worker-0.tf-mnist.svc:8000", "mnist-worker-1.tf-mnist.svc:8000"],
    }
    assert not [j for j in run.of_type("kubernetes:batch/v1:Job") if "-ps-" in j.name]


def test_tensorboard_allowlist_uses_an_slb_acl_and_no_warning(dev_config, caplog):
    run = me.run_program(
        _set(
            dev_config,
            tensorboard__serviceType="LoadBalancer",
            tensorboard__allowedSourceRanges='["203.0.113.0/24", "198.51.100.7/32"]',
        )
    )
    acl = run.one("alicloud:slb/acl:Acl", "mnist-tensorboard-acl")
    entries = sorted(
        e.inputs["entry"] for e in run.of_type("alicloud:slb/aclEntryAttachment:AclEntryAttachment")
    )
    assert entries == ["198.51.100.7/32", "203.0.113.0/24"]
    svc = run.one("kubernetes:core/v1:Service", "mnist-tensorboard")
    prefix = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
    assert me.own_annotations(svc.inputs["metadata"]) == {
        prefix + "address-type": "internet",
        prefix + "acl-status": "on",
        prefix + "acl-id": "mnist-tensorboard-acl-id",
        prefix + "acl-type": "white",
    }
    assert acl.urn in svc.dependencies
    assert "open to the whole internet" not in caplog.text


def test_wait_for_chief_awaits_only_the_chief(dev_config):
    run = me.run_program(_set(dev_config, job__waitForChief="true", job__waitTimeoutMinutes="90"))
    chief = run.one("kubernetes:batch/v1:Job", "mnist-chief-0")
    # Until its Job ends either way (tests/infra/test_infra_chief_await.py has the rest).
    assert me.own_annotations(chief.inputs["metadata"]) == {
        "pulumi.com/timeoutSeconds": "5400",
        "pulumi.com/waitFor": WAIT_FOR_END,
    }
    worker = run.one("kubernetes:batch/v1:Job", "mnist-worker-0")
    assert me.own_annotations(worker.inputs["metadata"]) == {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}


def test_kubeconfig_mode_creates_no_cloud_resources(dev_config):
    run = me.run_program(
        _set(
            dev_config,
            kubeconfig=me.secret(me.kubeconfig_content()),
            nas__mountTargetDomain="abc.cn-hangzhou.nas.aliyuncs.com",
        )
    )
    assert run.error is None
    assert not [r for r in run.registrations if r.type.startswith("alicloud:")]
    assert run.calls == []
    pv = run.one("kubernetes:core/v1:PersistentVolume", "mnist-data")
    assert pv.inputs["spec"]["csi"]["volumeAttributes"]["server"] == "abc.cn-hangzhou.nas.aliyuncs.com"
    assert run.outputs["clusterId"] is None
    assert run.secret_outputs["kubeconfig"] is True


def test_kubeconfig_mode_needs_a_mount_target(dev_config):
    run = me.run_program(_set(dev_config, kubeconfig="/home/me/.kube/config", clusterIdentifier="existing"))
    assert str(run.error).endswith(
        "Configuration 'tf-mnist:nas.mountTargetDomain' is missing: required with kubeconfig "
        "(the stack then creates no NAS).\n    fix: pulumi config set nas.mountTargetDomain "
        "xxxx.cn-hangzhou.nas.aliyuncs.com"
    )
    assert run.registrations == []


def test_existing_cluster_and_vswitch(dev_config):
    run = me.run_program(
        _set(dev_config, cluster__id="c-existing", vswitch__id="vsw-existing", vswitch__cidr="10.0.1.0/24")
    )
    assert run.error is None
    types = {r.type for r in run.registrations}
    assert "alicloud:cs/managedKubernetes:ManagedKubernetes" not in types
    assert "alicloud:vpc/switch:Switch" not in types and "alicloud:vpc/network:Network" not in types
    (credential,) = [c for c in run.calls if c.token == me.CREDENTIAL_TOKEN]
    assert credential.args["clusterId"] == "c-existing"
    assert (
        run.one("alicloud:nas/accessRule:AccessRule", "tf-mnist-dev-rule").inputs["sourceCidrIp"]
        == "10.0.1.0/24"
    )
    assert run.one("alicloud:cs/nodePool:NodePool", "tf-mnist-dev-gpu").inputs["vswitchIds"] == [
        "vsw-existing"
    ]


def test_name_prefix_and_namespace_let_two_runs_share_a_cluster(dev_config):
    run = me.run_program(_set(dev_config, namePrefix="exp2", namespace="research"))
    names = sorted(r.inputs["metadata"]["name"] for r in _kubernetes_objects(run))
    assert all(n.startswith("exp2-") for n in names), names
    assert run.outputs["clusterSpec"]["ps"] == ["exp2-ps-0.research.svc:9000", "exp2-ps-1.research.svc:9000"]
    pvc = run.one("kubernetes:core/v1:PersistentVolumeClaim", "exp2-data")
    assert pvc.inputs["metadata"]["namespace"] == "research"
    args = run.one("kubernetes:batch/v1:Job", "exp2-chief-0").inputs["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert args[args.index("--log_dir") + 1] == run.outputs["runDir"]
    assert run.outputs["runDir"].startswith("/data/runs/dev-research-exp2/")


def test_custom_match_labels_flow_to_pv_and_pvc(dev_config):
    persistence = json.loads(dev_config["tf-mnist:persistence"])
    persistence["pvc"]["matchLabels"] = {"train": "mnist", "team": "vision"}
    run = me.run_program({**dev_config, "tf-mnist:persistence": json.dumps(persistence)})
    pv = run.one("kubernetes:core/v1:PersistentVolume", "mnist-data")
    assert {"train": "mnist", "team": "vision"}.items() <= pv.inputs["metadata"]["labels"].items()
    pvc = run.one("kubernetes:core/v1:PersistentVolumeClaim", "mnist-data")
    assert pvc.inputs["spec"]["selector"]["matchLabels"] == {"train": "mnist", "team": "vision"}


KUBECONFIG_PATH_MODE = {
    "tf-mnist:kubeconfig": "~/.kube/config",
    "tf-mnist:clusterIdentifier": "existing",
    "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
}


def test_follow_log_commands_work_with_a_kubeconfig_path(dev_config):
    # With kubeconfig set to a path (what docs/local-cluster.md says to set), the kubeconfig output is
    # that path: `pulumi stack output kubeconfig --show-secrets > file` wrote the path, not a
    # kubeconfig, into the file kubectl was then told to read.
    run = me.run_program({**dev_config, **KUBECONFIG_PATH_MODE})
    assert run.error is None
    assert run.outputs["followChiefLog"] == [
        "kubectl --kubeconfig ~/.kube/config --namespace tf-mnist logs --follow job/mnist-chief-0"
    ]
    assert run.secret_outputs["followChiefLog"] is False


def test_follow_log_commands_keep_a_secret_kubeconfig_path_secret(dev_config):
    run = me.run_program({**dev_config, **KUBECONFIG_PATH_MODE}, secret_keys=("tf-mnist:kubeconfig",))
    assert run.error is None
    assert run.secret_outputs["followChiefLog"] is True


def test_follow_log_commands_with_kubeconfig_content(dev_config):
    run = me.run_program(
        {**dev_config, **KUBECONFIG_PATH_MODE, "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content())}
    )
    assert run.outputs["followChiefLog"] == [
        "pulumi stack output kubeconfig --show-secrets > tf-mnist-kubeconfig.yaml",
        "kubectl --kubeconfig tf-mnist-kubeconfig.yaml --namespace tf-mnist logs --follow job/mnist-chief-0",
    ]
