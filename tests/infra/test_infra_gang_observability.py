"""scheduling.gang: ACK Pro's pod-group labels on the task pods, and only there; and
observability.gpuMetrics / observability.logs: the ACK add-ons (KubernetesAddon) and the log
collection config on a cluster the stack creates, refused where it creates none."""

from __future__ import annotations

import json

import mock_engine as me
import pytest

from infra.components import labels, observability

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
PIPELINE = "kubernetes:telemetry.alibabacloud.com/v1alpha1:ClusterAliyunPipelineConfig"
GANG = {"tf-mnist:scheduling.gang": "true"}
OBSERVED = {"tf-mnist:observability.gpuMetrics": "true", "tf-mnist:observability.logs": "true"}
TASKS = ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2", "mnist-ps-0"]


def _templates(run: me.Run) -> dict[str, dict]:
    """Pod template labels of every workload: the Jobs (tasks, staging, setup, monitor) and
    TensorBoard's Deployment."""
    found = {r.name: r.inputs["spec"]["template"]["metadata"]["labels"] for r in run.of_type(JOB)}
    board = run.one(DEPLOYMENT, "mnist-tensorboard")
    found[board.name] = board.inputs["spec"]["template"]["metadata"]["labels"]
    return found


def _three_workers_one_ps(config: dict) -> dict:
    return me.set_flat(me.set_flat(config, "worker.number", "3"), "ps.number", "1")


def test_gang_labels_every_task_pod_with_all_tasks_as_min_available(dev_config):
    run = me.run_program({**_three_workers_one_ps(dev_config), **GANG})
    assert run.error is None, run.error
    templates = _templates(run)
    for task in TASKS:
        assert templates[task][labels.POD_GROUP_NAME] == "mnist"
        # chief + 3 workers + 1 ps, as a string (a label value).
        assert templates[task][labels.POD_GROUP_MIN_AVAILABLE] == "5"
    others = {name: found for name, found in templates.items() if name not in TASKS}
    assert {"mnist-stage-data", "mnist-tensorboard"} <= set(others)
    assert any("monitor" in name for name in others), sorted(others)
    for name, found in others.items():
        assert labels.POD_GROUP_NAME not in found and labels.POD_GROUP_MIN_AVAILABLE not in found, name


def test_no_gang_labels_by_default(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    for name, found in _templates(run).items():
        assert not [k for k in found if k.startswith("pod-group.scheduling.sigs.k8s.io/")], name


def test_gang_label_keys_are_acks():
    assert labels.POD_GROUP_NAME == "pod-group.scheduling.sigs.k8s.io/name"
    assert labels.POD_GROUP_MIN_AVAILABLE == "pod-group.scheduling.sigs.k8s.io/min-available"


def test_no_addon_or_log_config_by_default(dev_config):
    run = me.run_program(dev_config)
    assert run.error is None, run.error
    assert run.of_type(ADDON) == [] and run.of_type(PIPELINE) == []


def test_gpu_metrics_installs_prometheus_and_the_gpu_exporter(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:observability.gpuMetrics": "true"})
    assert run.error is None, run.error
    addons = {r.inputs["name"]: r for r in run.of_type(ADDON)}
    assert sorted(addons) == ["ack-gpu-exporter", "arms-prometheus"]
    assert {r.inputs["clusterId"] for r in addons.values()} == {me.CLUSTER_ID}
    assert run.of_type(PIPELINE) == []
    # After the node pools (the add-ons' DaemonSets need nodes).
    pools = {r.urn for r in run.of_type("alicloud:cs/nodePool:NodePool")}
    assert pools and all(pools <= set(r.dependencies) for r in addons.values())


def test_logs_installs_loongcollector_and_collects_the_task_pods_stdout(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:observability.logs": "true"})
    assert run.error is None, run.error
    (addon,) = run.of_type(ADDON)
    assert addon.inputs["name"] == "loongcollector"
    (config,) = run.of_type(PIPELINE)
    assert config.inputs["metadata"]["name"] == "mnist-trainer-logs"
    spec = config.inputs["spec"]
    assert spec["project"] == {"name": f"k8s-log-{me.CLUSTER_ID}"}
    assert spec["logstores"] == [{"name": "mnist-trainer"}]
    (source,) = spec["config"]["inputs"]
    assert source["Type"] == "input_container_stdio"
    assert source["ContainerFilters"] == {
        "K8sNamespaceRegex": "^tf-mnist$",
        "IncludeK8sLabel": {"app.kubernetes.io/instance": "^mnist$"},
        "K8sContainerRegex": "^tensorflow$",
    }
    assert spec["config"]["flushers"] == [{"Type": "flusher_sls", "Logstore": "mnist-trainer"}]
    # The CRD comes with the add-on; the task pods start once collection is set up.
    assert addon.urn in config.dependencies
    assert config.urn in run.one(JOB, "mnist-stage-data").dependencies


def test_both_keys_together(dev_config):
    run = me.run_program({**dev_config, **OBSERVED})
    assert run.error is None, run.error
    assert [r.inputs["name"] for r in run.of_type(ADDON)] == list(observability.addon_names(True, True))
    assert len(run.of_type(PIPELINE)) == 1


@pytest.mark.parametrize(
    ("mode", "rule"),
    [
        (
            {"tf-mnist:cluster.id": "c-existing"},
            "applies only when the stack creates the ACK cluster (cluster.id names an existing one)",
        ),
        (
            {
                "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
                "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
            },
            "applies only without kubeconfig",
        ),
    ],
)
def test_observability_is_refused_on_a_cluster_the_stack_does_not_create(dev_config, mode, rule):
    run = me.run_program({**dev_config, **mode, "tf-mnist:observability.logs": "true"})
    assert run.error is not None, "the configuration was accepted"
    message = str(run.error)
    assert "observability.logs" in message and rule in message, message
    assert run.registrations == []


def test_gang_works_on_an_existing_cluster(dev_config):
    """The labels need no add-on: with kubeconfig they are the same (a scheduler without gang
    scheduling ignores them)."""
    config = {
        **dev_config,
        **GANG,
        "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
        "tf-mnist:nas.mountTargetDomain": "abc.cn-hangzhou.nas.aliyuncs.com",
    }
    run = me.run_program(config)
    assert run.error is None, run.error
    chief = run.one(JOB, "mnist-chief-0").inputs["spec"]["template"]["metadata"]["labels"]
    assert chief[labels.POD_GROUP_MIN_AVAILABLE] == "5"  # the dev stack: chief, 2 workers, 2 ps


def test_pipeline_spec_is_json():
    spec = observability.pipeline_spec("k8s-log-c1", "mnist", "tf-mnist")
    assert json.loads(json.dumps(spec)) == spec
