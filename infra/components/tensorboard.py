"""TensorBoard: a Deployment reading the run's log directory and a Service in front of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from infra.components import checker_suppressions as suppress
from infra.components import pods
from infra.components.labels import recommended_labels
from infra.components.pods import Placement
from infra.components.tags import cloud_tags
from infra.settings import ImageSettings, PodIdentity
from infra.settings.run import TensorBoard as TensorBoardKeys

TENSORBOARD_PORT = 6006
REQUESTS = {"cpu": "250m", "memory": "512Mi"}
#: One core: TensorBoard's server and its event-file reader are Python threads.
LIMITS = {"cpu": "1", "memory": "2Gi"}
#: Restarts a TensorBoard whose port stays closed for 2 minutes (6 x 20 s). A TCP check, not
#: the readiness probe's HTTP one: a page served slowly while a large log directory loads
#: makes TensorBoard unready, never restarted.
LIVENESS_PROBE = k8s.core.v1.ProbeArgs(
    tcp_socket=k8s.core.v1.TCPSocketActionArgs(port="http"),
    initial_delay_seconds=20,
    period_seconds=20,
    timeout_seconds=5,
    failure_threshold=6,
)
SERVICE_PORT = 80
#: ACK cloud-controller-manager annotations for CLB Services.
LB_ANNOTATION = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"


DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"


def object_names(name: str) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every Kubernetes object ``TensorBoard(name, ...)``
    creates, in its namespace: the Deployment and the Service, both ``<name>-tensorboard``."""
    full_name = tensorboard_name(name)
    return [(DEPLOYMENT, full_name), (SERVICE, full_name)]


def tensorboard_name(name: str) -> str:
    """The Deployment's and the Service's name: ``<name>-tensorboard``."""
    return f"{name}-tensorboard"


@dataclass
class TensorBoardArgs:
    """What TensorBoard shows and how it is reached.

    Attributes:
        tensorboard: its Service's keys (tensorboard.*).
        image: its image and pull policy, resolved.
        namespace: the namespace (an Output when the stack creates it).
        pvc_name: the run's claim, mounted read-only (its plain name: known at preview).
        mount_path: where the claim is mounted.
        log_dir: the run's directory on it (``--logdir``).
        placement: the tensorboard.* node selector and tolerations.
        image_pull_secret: the docker-registry Secret to pull the image with, if any.
        cloud_acl: the stack created the ACK cluster, whose load balancer needs an SLB ACL to
            honour the source ranges.
        identity: the uid and gid the pod runs as (pods.*).
        after: resources the Deployment waits for (the node pools, the pull Secret, the claim).
        packages_dir: on the base image, the folder of TensorBoard's package set on the volume
            (infra/components/setup.py), which the pod runs from; None: an image of your own.
    """

    tensorboard: TensorBoardKeys
    image: ImageSettings
    namespace: pulumi.Input[str]
    pvc_name: pulumi.Input[str]
    mount_path: str
    log_dir: str
    placement: Placement
    image_pull_secret: str | None
    cloud_acl: bool
    identity: PodIdentity = pods.IMAGE_IDENTITY
    after: Sequence[pulumi.Resource] = ()
    packages_dir: str | None = None


class TensorBoard(pulumi.ComponentResource):
    """TensorBoard for one run.

    Children: ``<prefix>-tensorboard`` Deployment (``tensorboard --logdir <log_dir>``, the
    volume mounted read-only) and Service (type tensorboard.serviceType, port 80). A
    LoadBalancer gets ACK's address-type annotation and, with source ranges, the standard
    ``spec.loadBalancerSourceRanges`` (kube-proxy and most load balancers enforce it); with
    ``args.cloud_acl`` (the stack created the ACK cluster) also an SLB ACL (whitelist) attached
    through the ACL annotations, because ACK's default CLB ignores loadBalancerSourceRanges.
    Without the cloud layer nothing Alibaba-specific is created: the stack may be pointed at
    any cluster, and a kubeconfig-only stack must not need Alibaba credentials.

    Outputs:
        url: ``http://<address>/`` once the load balancer has one; None for other types.
    """

    url: pulumi.Output[str | None]

    def __init__(self, name: str, args: TensorBoardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:TensorBoard", name, None, opts)
        full_name = tensorboard_name(name)
        labels = recommended_labels(name, "tensorboard")
        selector = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "tensorboard"}
        k8s.apps.v1.Deployment(
            full_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=full_name,
                namespace=args.namespace,
                labels=labels,
                annotations=suppress.merged(
                    None, suppress.TENSORBOARD, [(args.image.image, args.image.image_pull_policy)]
                ),
            ),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels), spec=_pod(args)
                ),
            ),
            # Pulumi waits for the Deployment to be ready, which needs nodes (`after`).
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
        )
        service_type = args.tensorboard.service_type
        source_ranges = args.tensorboard.allowed_source_ranges
        if service_type == "NodePort":
            pulumi.log.warn(
                f"TensorBoard ({full_name}) is a NodePort Service: every node serves it, without login, to "
                "whatever reaches a node's address (the VPC, or the internet where a node has a public IP), and "
                "a NodePort takes no source ranges. Private: tensorboard.serviceType ClusterIP and kubectl "
                "port-forward; shared: LoadBalancer with tensorboard.allowedSourceRanges.",
                resource=self,
            )
        service = k8s.core.v1.Service(
            full_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=full_name,
                namespace=args.namespace,
                labels=labels,
                annotations=suppress.merged(
                    self._annotations(full_name, args),
                    suppress.NODE_PORT_SERVICE if service_type == "NodePort" else suppress.OBJECT,
                ),
            ),
            spec=k8s.core.v1.ServiceSpecArgs(
                type=service_type,
                selector=selector,
                load_balancer_source_ranges=(list(source_ranges) or None)
                if service_type == "LoadBalancer"
                else None,
                ports=[
                    k8s.core.v1.ServicePortArgs(
                        name="http", port=SERVICE_PORT, target_port="http", protocol="TCP"
                    )
                ],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        if service_type == "LoadBalancer":
            self.url = service.status.apply(_load_balancer_url)
        else:
            self.url = pulumi.Output.from_input(None)
        self.register_outputs({"url": self.url})

    def _annotations(self, full_name: str, args: TensorBoardArgs) -> dict[str, pulumi.Input[str]]:
        """The Service's ACK load balancer annotations (none unless a LoadBalancer), creating
        the SLB ACL that enforces the source ranges on a cluster the stack created."""
        annotations: dict[str, pulumi.Input[str]] = {}
        settings = args.tensorboard
        if settings.service_type != "LoadBalancer":
            return annotations
        annotations[LB_ANNOTATION + "address-type"] = settings.address_type
        if settings.allowed_source_ranges and args.cloud_acl:
            acl = alicloud.slb.Acl(
                f"{full_name}-acl",
                name=full_name,
                ip_version="ipv4",
                tags=cloud_tags(),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for i, cidr in enumerate(settings.allowed_source_ranges):
                alicloud.slb.AclEntryAttachment(
                    f"{full_name}-acl-{i}",
                    acl_id=acl.id,
                    entry=cidr,
                    comment=f"{full_name} allowlist",
                    opts=pulumi.ResourceOptions(parent=self),
                )
            annotations[LB_ANNOTATION + "acl-status"] = "on"
            annotations[LB_ANNOTATION + "acl-id"] = acl.id
            annotations[LB_ANNOTATION + "acl-type"] = "white"
        # The settings refuse a load balancer that may face the internet (internet, or any with
        # kubeconfig, where ACK's address-type annotation may mean nothing) without source
        # ranges, and ranges that admit the internet (infra/settings/rules.py tensorboard).
        return annotations


def _pod(args: TensorBoardArgs) -> k8s.core.v1.PodSpecArgs:
    """TensorBoard's pod: the run's log directory on the claim, mounted read-only; "restricted"
    (infra/components/pods.py). On the base image it runs TensorBoard's module from its package
    folder on the same volume (the image of your own has the ``tensorboard`` script)."""
    packages = args.packages_dir
    command = ["python", "-m", "tensorboard.main"] if packages else ["tensorboard"]
    env = [k8s.core.v1.EnvVarArgs(name="PYTHONPATH", value=packages)] if packages else []
    return k8s.core.v1.PodSpecArgs(
        node_selector=pods.node_selector(args.placement),
        tolerations=pods.tolerations(args.placement, uses_gpu=False),
        image_pull_secrets=pods.image_pull_secrets(args.image_pull_secret),
        security_context=pods.pod_security_context(args.identity),
        automount_service_account_token=False,
        containers=[
            k8s.core.v1.ContainerArgs(
                name="tensorboard",
                image=args.image.image,
                image_pull_policy=args.image.image_pull_policy,
                command=command,
                args=["--logdir", args.log_dir, "--bind_all", "--port", str(TENSORBOARD_PORT)],
                ports=[k8s.core.v1.ContainerPortArgs(name="http", container_port=TENSORBOARD_PORT)],
                readiness_probe=k8s.core.v1.ProbeArgs(
                    http_get=k8s.core.v1.HTTPGetActionArgs(path="/", port="http")
                ),
                liveness_probe=LIVENESS_PROBE,
                resources=pods.resources(REQUESTS, LIMITS),
                env=pods.scratch_env() + env,
                security_context=pods.container_security_context(),
                volume_mounts=[
                    k8s.core.v1.VolumeMountArgs(name="data", mount_path=args.mount_path, read_only=True),
                    pods.scratch_mount(),
                ],
            )
        ],
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="data",
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=args.pvc_name, read_only=True
                ),
            ),
            pods.scratch_volume(),
        ],
    )


def _load_balancer_url(status) -> str | None:
    """``http://<ip or hostname>/`` of a Service status, or None before the address exists."""
    balancer = getattr(status, "load_balancer", None) if status is not None else None
    ingress = (getattr(balancer, "ingress", None) or []) if balancer is not None else []
    if not ingress:
        return None
    address = getattr(ingress[0], "ip", None) or getattr(ingress[0], "hostname", None)
    return f"http://{address}/" if address else None
