"""Observability: the ACK add-ons that watch a run on the cluster the stack creates
(observability.gpuMetrics, observability.logs), and the log collection of its task pods.

Each add-on is an ``alicloud.cs.KubernetesAddon``, not an entry of the cluster's ``addons``
list: the pinned provider (pulumi-alicloud 3.95, ``cs.ManagedKubernetes``) documents that list
as "Only works for **Create** Operation, use resource cs_kubernetes_addon to manage addons if
cluster is created", so a key switched on for a running cluster would install nothing there.
A KubernetesAddon installs the add-on on the cluster as it is, and uninstalls it when the key
is switched off or the stack destroyed; that is why the rules allow the keys only on a cluster
the stack creates (infra/settings/cloud_rules.py ``OBSERVABILITY_KEYS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from infra.components.labels import recommended_labels
from infra.components.task_jobs import CONTAINER_NAME

#: observability.gpuMetrics: ACK's Managed Service for Prometheus agent, by the add-on name the
#: pinned provider's ManagedKubernetes docs install it with (``name = "arms-prometheus"``,
#: "Prometheus, Optional"), and the GPU exporter that ACK's "GPU monitoring" lists as the
#: component of Managed Service for Prometheus (``ack-gpu-exporter``; DCGM-compatible metrics,
#: https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/introduction-to-metrics).
GPU_METRICS_ADDONS = ("arms-prometheus", "ack-gpu-exporter")
#: observability.logs: Simple Log Service's collector on ACK, LoongCollector (the successor of
#: logtail-ds): its operator serves the ClusterAliyunPipelineConfig CRD ("Collect container logs
#: (standard output and files) from a cluster using a Kubernetes CRD",
#: https://www.alibabacloud.com/help/doc-detail/2950474.html).
LOGS_ADDON = "loongcollector"
#: The collection config's API ("AliyunPipelineConfig parameters",
#: https://help.aliyun.com/zh/sls/kubernetes-cr-parameter-description): cluster-scoped; the
#: operator creates the project and logstores it names when they do not exist.
PIPELINE_API_VERSION = "telemetry.alibabacloud.com/v1alpha1"
PIPELINE_KIND = "ClusterAliyunPipelineConfig"


def addon_names(gpu_metrics: bool, logs: bool) -> list[str]:
    """The add-ons the keys ask for, in install order: ``GPU_METRICS_ADDONS``, ``LOGS_ADDON``."""
    return [*(GPU_METRICS_ADDONS if gpu_metrics else ()), *([LOGS_ADDON] if logs else [])]


def log_project(cluster_id: str) -> str:
    """The SLS project of the logs: ``k8s-log-<cluster id>``, the project ACK's log add-on uses
    for a cluster by default, so the run's logs sit beside the cluster's own."""
    return f"k8s-log-{cluster_id}"


def logstore(name_prefix: str) -> str:
    """The logstore of the task pods' stdout and stderr: ``<name_prefix>-trainer``."""
    return f"{name_prefix}-trainer"


def pipeline_spec(project: str, name_prefix: str, namespace: str) -> dict[str, Any]:
    """The ClusterAliyunPipelineConfig spec that sends the task pods' stdout and stderr to
    ``logstore(name_prefix)`` in ``project``.

    The input ``input_container_stdio`` reads containers' standard output and error; its
    ContainerFilters keep the run's namespace, its pods (app.kubernetes.io/instance) and
    their trainer container (``task_jobs.CONTAINER_NAME``: the task pods' only container; no
    staging, setup, monitor or TensorBoard container has that name). The flusher
    ``flusher_sls`` writes to the logstore (SLS LogtailPipelineConfig, ``flushers``).
    """
    return {
        "project": {"name": project},
        "logstores": [{"name": logstore(name_prefix)}],
        "config": {
            "inputs": [
                {
                    "Type": "input_container_stdio",
                    "ContainerFilters": {
                        "K8sNamespaceRegex": f"^{namespace}$",
                        "IncludeK8sLabel": {"app.kubernetes.io/instance": f"^{name_prefix}$"},
                        "K8sContainerRegex": f"^{CONTAINER_NAME}$",
                    },
                }
            ],
            "flushers": [{"Type": "flusher_sls", "Logstore": logstore(name_prefix)}],
        },
    }


@dataclass
class ObservabilityArgs:
    """What to install and where.

    Attributes:
        cluster_id: the ACK cluster the stack creates.
        provider: the kubernetes provider of that cluster (for the collection config).
        gpu_metrics, logs: observability.gpuMetrics, observability.logs.
        name_prefix: namePrefix: the collection config's and the logstore's names.
        namespace: the run's namespace, whose task pods' logs are collected.
        after: what the add-ons wait for (the node pools: an add-on's DaemonSet needs nodes).
    """

    cluster_id: pulumi.Input[str]
    provider: k8s.Provider
    gpu_metrics: bool
    logs: bool
    name_prefix: str
    namespace: str
    after: list[pulumi.Resource]


class Observability(pulumi.ComponentResource):
    """The add-ons of ``addon_names`` and, with logs, the collection config.

    Children: ``<name>-addon-<addon>`` (alicloud.cs.KubernetesAddon; no version: the provider
    documents none as required and leaves the choice to ACK, unverified on a live cluster) per
    add-on; with logs, ``<name>-trainer-logs``, a ClusterAliyunPipelineConfig
    named ``<namePrefix>-trainer-logs`` (after the log add-on, whose operator serves its CRD).

    Attributes:
        ready: what the task pods wait for, so that their first lines are collected: the log
            add-on and the collection config; empty without logs.
    """

    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("tf-mnist:index:Observability", name, None, opts)
        addons = {
            addon: alicloud.cs.KubernetesAddon(
                f"{name}-addon-{addon}",
                cluster_id=args.cluster_id,
                name=addon,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.after),
            )
            for addon in addon_names(args.gpu_metrics, args.logs)
        }
        self.ready = []
        if args.logs:
            config = k8s.apiextensions.CustomResource(
                f"{name}-trainer-logs",
                api_version=PIPELINE_API_VERSION,
                kind=PIPELINE_KIND,
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{args.name_prefix}-trainer-logs",
                    labels=recommended_labels(args.name_prefix, "logs"),
                ),
                spec=pulumi.Output.from_input(args.cluster_id).apply(
                    lambda cluster_id: pipeline_spec(
                        log_project(cluster_id), args.name_prefix, args.namespace
                    )
                ),
                opts=pulumi.ResourceOptions(
                    parent=self, provider=args.provider, depends_on=[addons[LOGS_ADDON]]
                ),
            )
            self.ready = [addons[LOGS_ADDON], config]
        self.register_outputs({"addons": list(addons)})
