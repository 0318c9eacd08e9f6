"""Safe defaults under the mock engine: every pod passes the Pod Security Standard "restricted",
a created namespace enforces it, and TensorBoard is private unless the user opens it."""

from __future__ import annotations

import mock_engine as me
import pytest

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
NAMESPACE = "kubernetes:core/v1:Namespace"
HEADER_1 = "1 invalid configuration value; nothing was deployed:"
#: The configurations whose pods are checked: the dev stack (GPU workers, ps), a GPU chief
#: without ps, and a CPU-only stack on an existing cluster with a hostPath volume.
CONFIGS = {
    "dev": {},
    "gpu-chief": {"ps.number": "0"},
    "existing-hostPath": {
        "kubeconfig": me.secret(me.kubeconfig_content()),
        "persistence.volume.type": "hostPath",
        "worker.gpuCount": "0",
        "createNamespace": "true",
        "namespace": "training",
    },
}


def _set(config: dict, overrides: dict) -> dict:
    return {**config, **{f"tf-mnist:{k}": v for k, v in overrides.items()}}


def _pod_specs(run: me.Run) -> dict[str, dict]:
    """Every workload's pod spec by its object name (the Jobs and the Deployment)."""
    specs = {r.name: r.inputs["spec"]["template"]["spec"] for r in run.of_type(JOB)}
    specs.update({r.name: r.inputs["spec"]["template"]["spec"] for r in run.of_type(DEPLOYMENT)})
    return specs


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_pod_is_restricted(dev_config, name):
    run = me.run_program(_set(dev_config, CONFIGS[name]))
    assert run.error is None, run.error
    specs = _pod_specs(run)
    tasks = [n for n in specs if n.split("-")[1] in ("chief", "worker", "ps")]
    assert {"mnist-stage-data", "mnist-tensorboard", "mnist-monitor", "mnist-setup"} <= set(specs) and len(
        tasks
    ) >= 3, sorted(specs)
    for pod_name, pod in specs.items():
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        }, pod_name
        # Only the run monitor has a token: it reads the API (tests/infra/test_infra_monitor.py).
        monitor = pod_name == "mnist-monitor"
        assert pod["automountServiceAccountToken"] is monitor, pod_name
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"], pod_name
        # "restricted" allows these volume types (and more): the monitor's script, the trainer's
        # code and the setup Job's requirement files are ConfigMaps, the sample's pieces a
        # projection of them.
        allowed = {"persistentVolumeClaim", "emptyDir", "configMap", "projected"}
        assert all(set(v) - {"name"} <= allowed for v in pod["volumes"]), pod_name
        for container in pod["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, pod_name
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], pod_name
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert (env["HOME"], env["TMPDIR"]) == ("/tmp", "/tmp"), pod_name
            assert "hostPort" not in str(container.get("ports")), pod_name


def test_task_pods_have_time_for_the_chiefs_final_save(dev_config):
    run = me.run_program(dev_config)
    specs = _pod_specs(run)
    for name in ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-ps-0", "mnist-ps-1"):
        assert specs[name]["terminationGracePeriodSeconds"] == 120, name
    # Staging and TensorBoard save nothing: Kubernetes' default (30 s).
    assert "terminationGracePeriodSeconds" not in specs["mnist-stage-data"]
    assert "terminationGracePeriodSeconds" not in specs["mnist-tensorboard"]


def test_a_created_namespace_enforces_restricted(dev_config):
    run = me.run_program(_set(dev_config, {"createNamespace": "true", "namespace": "training"}))
    labels = run.one(NAMESPACE, "training").inputs["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted", labels
    assert labels["app.kubernetes.io/instance"] == "mnist"


def test_tensorboard_is_cluster_ip_by_default(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    spec = run.one(SERVICE, "mnist-tensorboard").inputs["spec"]
    assert spec["type"] == "ClusterIP" and "loadBalancerSourceRanges" not in spec, spec
    assert [r for r in run.registrations if r.type.startswith("alicloud:slb")] == []
    assert run.outputs["tensorboardUrl"] is None


@pytest.mark.parametrize("address_type", [None, "internet"])
def test_an_internet_load_balancer_without_source_ranges_is_refused(dev_config, address_type):
    overrides = {"tensorboard.serviceType": "LoadBalancer"}
    if address_type:
        overrides["tensorboard.addressType"] = address_type
    run = me.run_program(_set(dev_config, overrides))
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:tensorboard.allowedSourceRanges' is missing: required with "
            "tensorboard.serviceType LoadBalancer and tensorboard.addressType internet (TensorBoard has no login: "
            "without source ranges the whole internet reaches it); or keep it private with tensorboard.serviceType "
            "ClusterIP and kubectl port-forward, or use tensorboard.addressType intranet.",
            "    fix: pulumi config set --path 'tensorboard.allowedSourceRanges[0]' <your address>/32",
        ]
    )
    assert run.registrations == [] and run.calls_besides_state == []


#: Source ranges that admit the internet, however they are written: the rule counts the
#: public addresses of their union (infra/source_ranges.py), not the text "/0".
WIDE = {
    "everyone": ('["0.0.0.0/0"]', "3,702,258,688", " (every one)"),
    "everyone-beside-one": ('["198.51.100.7/32","0.0.0.0/0"]', "3,702,258,688", " (every one)"),
    "two-halves": ('["0.0.0.0/1","128.0.0.0/1"]', "3,702,258,688", " (every one)"),
    "a-quarter": ('["64.0.0.0/2"]', "1,052,770,304", ""),  # less CGN 100.64/10 and loopback
    "two-public-slash-8s": ('["11.0.0.0/8","12.0.0.0/8"]', "33,554,432", ""),
}


def _too_wide(shown: str, count: str, every: str) -> str:
    return (
        f"Configuration 'tf-mnist:tensorboard.allowedSourceRanges' value '{shown}' is invalid: these ranges together "
        f"admit {count} public IPv4 addresses{every}, more than one /8 (16,777,216 addresses): TensorBoard has no "
        "login, so list the networks that may reach it, not the internet; or keep it private with "
        "tensorboard.serviceType ClusterIP and kubectl port-forward."
    )


@pytest.mark.parametrize("wide", list(WIDE))
@pytest.mark.parametrize("address_type", ["internet", "intranet"])
def test_a_load_balancer_open_to_the_internet_is_refused(dev_config, wide, address_type):
    ranges, count, every = WIDE[wide]
    run = me.run_program(
        _set(
            dev_config,
            {
                "tensorboard.serviceType": "LoadBalancer",
                "tensorboard.addressType": address_type,
                "tensorboard.allowedSourceRanges": ranges,
            },
        )
    )
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            _too_wide(ranges, count, every),
            """    fix: pulumi config set tensorboard.allowedSourceRanges '["<your address>/32"]'""",
        ]
    )
    assert run.registrations == [] and run.calls_besides_state == []


def test_wide_ranges_set_with_path_get_a_fix_that_replaces_the_whole_list(dev_config):
    config = {
        **_set(dev_config, {"tensorboard.serviceType": "LoadBalancer"}),
        "tf-mnist:tensorboard": '{"allowedSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]}',
    }
    run = me.run_program(config)
    assert str(run.error).splitlines()[1:] == [
        _too_wide('["0.0.0.0/1","128.0.0.0/1"]', "3,702,258,688", " (every one)"),
        "    fix: pulumi config rm --path tensorboard.allowedSourceRanges && pulumi config set --path "
        "'tensorboard.allowedSourceRanges[0]' <your address>/32",
    ]


@pytest.mark.parametrize("ranges", ['["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"]', '["11.0.0.0/8"]'])
def test_private_networks_and_one_public_slash_8_are_not_the_internet(dev_config, ranges):
    overrides = {"tensorboard.serviceType": "LoadBalancer", "tensorboard.allowedSourceRanges": ranges}
    assert me.run_program(_set(dev_config, overrides)).error is None


@pytest.mark.parametrize("address_type", [None, "intranet"])
def test_with_kubeconfig_a_load_balancer_needs_source_ranges_whatever_its_address_type(
    dev_config, address_type
):
    # intranet is ACK's annotation: on another cluster the load balancer is typically public.
    overrides = {**CONFIGS["existing-hostPath"], "tensorboard.serviceType": "LoadBalancer"}
    if address_type:
        overrides["tensorboard.addressType"] = address_type
    run = me.run_program(_set(dev_config, overrides))
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:tensorboard.allowedSourceRanges' is missing: required with "
            "tensorboard.serviceType LoadBalancer and kubeconfig, whatever tensorboard.addressType says (the "
            "address type is an annotation only ACK's cloud controller reads: on another cluster the load "
            "balancer is typically internet-facing, and TensorBoard has no login); or keep it private with "
            "tensorboard.serviceType ClusterIP and kubectl port-forward.",
            "    fix: pulumi config set --path 'tensorboard.allowedSourceRanges[0]' <your address>/32",
        ]
    )
    ranged = me.run_program(
        _set(dev_config, {**overrides, "tensorboard.allowedSourceRanges": '["10.0.0.0/8"]'})
    )
    assert ranged.error is None, ranged.error
    spec = ranged.one(SERVICE, "mnist-tensorboard").inputs["spec"]
    assert spec["loadBalancerSourceRanges"] == ["10.0.0.0/8"]


def test_a_node_port_tensorboard_is_warned_about(dev_config, caplog):
    run = me.run_program(_set(dev_config, {"tensorboard.serviceType": "NodePort"}))
    assert run.error is None, run.error
    assert (
        "TensorBoard (mnist-tensorboard) is a NodePort Service: every node serves it, without login, to "
        "whatever reaches a node's address"
    ) in caplog.text
    caplog.clear()
    assert me.run_program(dev_config).error is None
    assert "NodePort Service" not in caplog.text, "the default ClusterIP is warned about"


@pytest.mark.parametrize(
    "overrides",
    [
        {"tensorboard.serviceType": "LoadBalancer", "tensorboard.addressType": "intranet"},
        {"tensorboard.serviceType": "LoadBalancer", "tensorboard.allowedSourceRanges": '["198.51.100.7/32"]'},
        {"tensorboard.serviceType": "NodePort"},
    ],
    ids=["intranet", "source-ranges", "node-port"],
)
def test_a_load_balancer_that_names_who_reaches_it_is_accepted(dev_config, overrides):
    run = me.run_program(_set(dev_config, overrides))
    assert run.error is None, run.error
    assert (
        run.one(SERVICE, "mnist-tensorboard").inputs["spec"]["type"] == overrides["tensorboard.serviceType"]
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_container_has_ephemeral_storage_and_helpers_a_cpu_limit(dev_config, name):
    run = me.run_program(_set(dev_config, CONFIGS[name]))
    for pod_name, pod in _pod_specs(run).items():
        task = pod_name.split("-")[1] in ("chief", "worker", "ps")
        for container in pod["containers"]:
            resources = container["resources"]
            assert resources["requests"]["ephemeral-storage"] == "64Mi", pod_name
            assert resources["limits"]["ephemeral-storage"] == "512Mi", pod_name
            # A task has none: a CPU limit throttles TensorFlow's thread pools.
            assert ("cpu" in resources["limits"]) is not task, pod_name


def test_tensorboard_is_restarted_when_its_port_stays_closed(dev_config):
    pod = _pod_specs(me.run_program(dev_config))["mnist-tensorboard"]
    container = pod["containers"][0]
    assert container["livenessProbe"] == {
        "tcpSocket": {"port": "http"},
        "initialDelaySeconds": 20,
        "periodSeconds": 20,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
    }
    # Unlike readiness (an HTTP page), which a slow load may fail without a restart.
    assert container["readinessProbe"] == {"httpGet": {"path": "/", "port": "http"}}


def test_the_dev_stack_runs_in_a_namespace_of_its_own_that_it_creates(dev_config):
    # Not `default` (checkov CKV_K8S_21): namespace defaults to tf-mnist, and createNamespace,
    # unset, is true for it.
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    (namespace,) = run.of_type(NAMESPACE)
    assert namespace.name == "tf-mnist" and namespace.inputs["metadata"]["name"] == "tf-mnist"
    labels = namespace.inputs["metadata"]["labels"]
    assert all(
        labels[f"pod-security.kubernetes.io/{mode}"] == "restricted" for mode in ("enforce", "warn", "audit")
    )
    placed = [
        r
        for r in run.registrations
        if r.type.startswith("kubernetes:")
        and "metadata" in r.inputs
        and r.type not in (NAMESPACE, "kubernetes:core/v1:PersistentVolume")
    ]
    assert len(placed) > 20 and {r.inputs["metadata"]["namespace"] for r in placed} == {"tf-mnist"}, placed
    assert run.outputs["namespace"] == "tf-mnist"


def test_every_pod_runs_as_a_uid_and_gid_above_10000(dev_config):
    # checkov CKV_K8S_40 and kube-score's container-security-context-user-group-id.
    for pod_name, pod in _pod_specs(me.run_program(dev_config)).items():
        context = pod["securityContext"]
        assert min(context["runAsUser"], context["runAsGroup"], context["fsGroup"]) > 10000, (
            pod_name,
            context,
        )


@pytest.mark.parametrize(
    "overrides,created",
    [
        ({"namespace": "team-a"}, []),
        ({"namespace": "default"}, []),
        ({"createNamespace": "false"}, []),
        ({"namespace": "team-a", "createNamespace": "true"}, ["team-a"]),
    ],
    ids=["another-namespace-exists", "the-old-default", "tf-mnist-not-created", "another-created"],
)
def test_only_the_default_namespace_is_created_unless_told(dev_config, overrides, created):
    run = me.run_program(_set(dev_config, overrides))
    assert run.error is None, run.error
    assert [r.name for r in run.of_type(NAMESPACE)] == created
    jobs = run.of_type(JOB)
    assert {j.inputs["metadata"]["namespace"] for j in jobs} == {overrides.get("namespace", "tf-mnist")}
