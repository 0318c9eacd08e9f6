"""TensorBoard: a Deployment reading the run's log directory and a Service in front of it."""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from infra.components import pods
from infra.components.labels import recommended_labels
from infra.settings import Placement

TENSORBOARD_PORT = 6006
SERVICE_PORT = 80
#: ACK cloud-controller-manager annotations for CLB Services.
LB_ANNOTATION = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"


class TensorBoard(pulumi.ComponentResource):
    """TensorBoard for one run.

    Children: ``<prefix>-tensorboard`` Deployment (``tensorboard --logdir <log_dir>``, the
    volume mounted read-only) and Service (type ``service_type``, port 80). A LoadBalancer
    gets ACK's address-type annotation and, with ``source_ranges``, the standard
    ``spec.loadBalancerSourceRanges`` (kube-proxy and most load balancers enforce it); with
    ``cloud_acl`` (the stack created the ACK cluster) also an SLB ACL (whitelist) attached
    through the ACL annotations, because ACK's default CLB ignores loadBalancerSourceRanges.
    Without the cloud layer nothing Alibaba-specific is created: the stack may be pointed at
    any cluster, and a kubeconfig-only stack must not need Alibaba credentials.

    Args:
        placement: the tensorboard.* node selector and tolerations.
        image_pull_secret: the docker-registry Secret to pull the image with, if any.

    Outputs:
        url: ``http://<address>/`` once the load balancer has one; None for other types.
    """

    url: pulumi.Output[Optional[str]]

    def __init__(self, name: str, *, namespace: pulumi.Input[str], image: str, image_pull_policy: str, log_dir: str,
                 mount_path: str, pvc_name: pulumi.Input[str], service_type: str, address_type: str,
                 source_ranges: Sequence[str], cloud_acl: bool, placement: Placement,
                 image_pull_secret: Optional[str], after: Sequence[pulumi.Resource] = (),
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:

        super().__init__("tf-mnist:index:TensorBoard", name, None, opts)
        full_name = f"{name}-tensorboard"
        labels = recommended_labels(name, "tensorboard")
        selector = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "tensorboard"}
        k8s_opts = pulumi.ResourceOptions(parent=self)
        k8s.apps.v1.Deployment(
            full_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=full_name, namespace=namespace, labels=labels),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        node_selector=pods.node_selector(placement),
                        tolerations=pods.tolerations(placement, uses_gpu=False),
                        image_pull_secrets=pods.image_pull_secrets(image_pull_secret),
                        containers=[k8s.core.v1.ContainerArgs(
                            name="tensorboard",
                            image=image,
                            image_pull_policy=image_pull_policy,
                            command=["tensorboard"],
                            args=["--logdir", log_dir, "--bind_all", "--port", str(TENSORBOARD_PORT)],
                            ports=[k8s.core.v1.ContainerPortArgs(name="http", container_port=TENSORBOARD_PORT)],
                            readiness_probe=k8s.core.v1.ProbeArgs(
                                http_get=k8s.core.v1.HTTPGetActionArgs(path="/", port="http")),
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={"cpu": "250m", "memory": "512Mi"}, limits={"memory": "2Gi"}),
                            volume_mounts=[k8s.core.v1.VolumeMountArgs(name="data", mount_path=mount_path,
                                                                       read_only=True)],
                        )],
                        volumes=[k8s.core.v1.VolumeArgs(
                            name="data",
                            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                                claim_name=pvc_name, read_only=True))],
                    ),
                ),
            ),
            # Pulumi waits for the Deployment to be ready, which needs nodes (`after`).
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )

        annotations: dict[str, pulumi.Input[str]] = {}
        if service_type == "LoadBalancer":
            annotations[LB_ANNOTATION + "address-type"] = address_type
            if source_ranges and cloud_acl:
                acl = alicloud.slb.Acl(f"{full_name}-acl", name=full_name, ip_version="ipv4",
                                       opts=pulumi.ResourceOptions(parent=self))
                for i, cidr in enumerate(source_ranges):
                    alicloud.slb.AclEntryAttachment(f"{full_name}-acl-{i}", acl_id=acl.id, entry=cidr,
                                                    comment=f"{full_name} allowlist",
                                                    opts=pulumi.ResourceOptions(parent=self))
                annotations[LB_ANNOTATION + "acl-status"] = "on"
                annotations[LB_ANNOTATION + "acl-id"] = acl.id
                annotations[LB_ANNOTATION + "acl-type"] = "white"
            elif not source_ranges and address_type == "internet":
                pulumi.log.warn(
                    f"TensorBoard ({full_name}) is open to the whole internet: set "
                    "tensorboard.allowedSourceRanges or tensorboard.addressType intranet.")
        service = k8s.core.v1.Service(
            full_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=full_name, namespace=namespace, labels=labels,
                                                annotations=annotations or None),
            spec=k8s.core.v1.ServiceSpecArgs(
                type=service_type,
                selector=selector,
                load_balancer_source_ranges=(list(source_ranges) or None) if service_type == "LoadBalancer"
                else None,
                ports=[k8s.core.v1.ServicePortArgs(name="http", port=SERVICE_PORT, target_port="http",
                                                  protocol="TCP")],
            ),
            opts=k8s_opts,
        )
        if service_type == "LoadBalancer":
            self.url = service.status.apply(_load_balancer_url)
        else:
            self.url = pulumi.Output.from_input(None)
        self.register_outputs({"url": self.url})


def _load_balancer_url(status) -> Optional[str]:
    """``http://<ip or hostname>/`` of a Service status, or None before the address exists."""
    balancer = getattr(status, "load_balancer", None) if status is not None else None
    ingress = (getattr(balancer, "ingress", None) or []) if balancer is not None else []
    if not ingress:
        return None
    address = getattr(ingress[0], "ip", None) or getattr(ingress[0], "hostname", None)
    return f"http://{address}/" if address else None
