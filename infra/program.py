"""The Pulumi program: reads the configuration (and nothing else does), builds the stack,
exports its outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pulumi
import pulumi_kubernetes as k8s

from infra import image_pins, instance_prices, monitor_egress, nas_zones, ownership, runs, terway_policy
from infra.cluster_objects import KubeconfigCluster, ObjectRef
from infra.components import chief_await, network_policy, pods, setup, staging, storage, tensorboard, training
from infra.components.labels import recommended_labels
from infra.components.monitor import RunMonitor, RunMonitorArgs
from infra.components.monitor import object_names as monitor_object_names
from infra.components.network_policy import RunNetworkPolicies, RunNetworkPoliciesArgs
from infra.components.registry import SECRET, PullSecret, PullSecretArgs, pull_secret_name, registry_login
from infra.components.setup import PackageSetup, PackageSetupArgs
from infra.components.storage import SharedVolume, SharedVolumeArgs
from infra.components.tensorboard import TensorBoard, TensorBoardArgs
from infra.components.training import TrainingJob, TrainingJobArgs, staging_name, task_names
from infra.deployed import deployed_from
from infra.kubeconfig import is_kubeconfig_path
from infra.pull_policy import stale_tag_warnings
from infra.settings import PROJECT, Settings, load_settings
from infra.stack_state import read_once
from infra.target import deploy_target, existing_volume_server, volume_path

#: Keys whose --secret value reaches the PV (its server or path): kept secret there.
VOLUME_SECRET_KEYS = frozenset({"nas.mountTargetDomain", "nfs.server", "nfs.path"})


class ExistingCluster(
    ownership.ClusterView, monitor_egress.EndpointsView, terway_policy.ConfigMapView, Protocol
):
    """What the program reads from an existing cluster before it registers anything: the objects
    it would create (infra/ownership.py), the API server's endpoint ports
    (infra/monitor_egress.py) and Terway's policy setting (infra/terway_policy.py)."""


def run(cluster: ExistingCluster | None = None, lookup: image_pins.Lookup | None = None) -> dict[str, Any]:
    """Validate the stack configuration, register every resource, export the outputs.

    Args:
        cluster: where the program reads an existing cluster (kubeconfig mode: the ownership
            check, the run monitor's egress ports); None for the kubeconfig's cluster. Tests
            pass a recorded one.
        lookup: how a tag's digest is asked for (infra/image_pins.py); None for the image's
            registry (infra/registry_digests.py). Tests pass a stand-in.

    Returns:
        The stack outputs by name (the same values ``pulumi.export`` receives), for tests.

    Raises:
        infra.settings.ConfigError: on any invalid configuration, before any resource exists;
            also a NAS storage type the file system's zone does not offer (infra/nas_zones.py).
        infra.ownership.OwnershipError: an object the stack would create exists and is not
            this stack's, before any resource exists.
        infra.image_pins.ImageDigestError: at `pulumi up`, an image tag whose registry gave no
            digest, before any resource exists.
    """
    dry_run = pulumi.runtime.is_dry_run()
    state = read_once()
    settings, notes = image_pins.pin(
        load_settings(deployed=lambda: deployed_from(state())),
        dry_run=dry_run,
        lookup=lookup or image_pins.lookup_digest,
        state=state,
    )
    for note in notes:
        pulumi.log.info(note)
    nas_zones.check(
        settings, dry_run=dry_run, deployed=lambda: deployed_from(state()).nas_storage_type is not None
    )
    # On a cluster the stack creates there is nothing to read on the first up; on later ups its
    # kubeconfig is an output of the cluster resource, which exists only once registered.
    # Another stack pointed at that cluster by a kubeconfig reads it itself.
    existing = None
    if not settings.creates_cloud:
        existing = cluster or KubeconfigCluster(settings.kubeconfig or "")
        ownership.check(
            planned_objects(settings, existing_volume_server(settings)),
            existing,
            stack=settings.stack,
            dry_run=dry_run,
            state=state,
        )
    terway_policy.check(settings.network_policy.enabled, existing)
    monitor_ports = (
        monitor_egress.monitor_ports(settings, existing) if settings.network_policy.enabled else []
    )
    # Before anything is registered: what the state says of the Jobs before this run.
    failed_before = chief_await.failed_before(state) if settings.training.job.wait_for_chief else frozenset()
    outputs = build(settings, failed_before, monitor_ports)
    # The pools' prices, for a run's cost (infra/status/cost.py): at `pulumi up`; never fails.
    outputs[instance_prices.OUTPUT] = instance_prices.lookup(settings, dry_run=dry_run)
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs


def build(settings: Settings, failed_before: frozenset[str], monitor_ports: Sequence[int]) -> dict[str, Any]:
    """Register the cluster to deploy into (``deploy_target``) and the Kubernetes layer;
    ``failed_before``: TrainingJobArgs.failed_before; ``monitor_ports``: the TCP ports the run
    monitor's NetworkPolicy opens to the API server (infra/monitor_egress.py).

    Returns:
        The stack outputs by name.
    """
    prefix = settings.name_prefix
    for message in stale_tag_warnings(image_pulls(settings)):
        pulumi.log.warn(message)
    target = deploy_target(settings)
    k8s_opts = pulumi.ResourceOptions(providers=[target.provider])
    namespace = _namespace(settings, target.provider)
    # A change of what the API server cannot change in place on the PV or its claim (capacity,
    # matchLabels, the source, the namespace) renames both: a new pair is created, the Jobs and
    # TensorBoard move to it (the claim's name is in their pod templates), the old pair is
    # deleted last; the data stays where it is (Retain, same directory). See SharedVolume.
    # On a run in progress that replaces the Jobs (a new run id): the old Jobs' pods get
    # SIGTERM, on which the chief saves a checkpoint, and the new tasks resume from the latest
    # checkpoint in log_dir, which is the same directory on the new PV; staging runs again and
    # finds the data already there. A finished run stays finished (its last checkpoint).
    volume_args = _volume_args(
        settings, target.volume_server, target.volume_server_key, namespace, after=target.volume_after
    )
    volume = SharedVolume(prefix, volume_args, opts=k8s_opts)
    pods_after = [*target.pods_after, *_before_pods(settings, namespace, k8s_opts, monitor_ports)]
    runtime = pods_runtime(settings)
    installed = _package_setup(settings, runtime, namespace, volume, pods_after, k8s_opts)
    # Staging (and so the tasks) and TensorBoard load their packages from the setup Job's folders.
    after_setup = [*pods_after, *([installed.job] if installed else [])]
    training = _training_job(settings, namespace, volume, after_setup, k8s_opts, failed_before, runtime)
    monitor = _run_monitor(settings, namespace, training.run_id, pods_after, k8s_opts, monitor_ports)
    tensorboard = _tensorboard(settings, namespace, volume, after_setup, k8s_opts, runtime)
    return {
        "clusterId": target.cluster_id,
        "kubeconfig": target.kubeconfig,
        "nasFileSystemId": target.nas_file_system_id,
        "mountTargetDomain": pulumi.Output.from_input(
            volume_args.server if settings.volume.type == "nas" else None
        ),
        "namespace": settings.namespace,
        "pvName": volume.pv_name,
        "pvcName": volume.pvc_name,
        "clusterSpec": training.cluster_spec,
        "jobNames": training.job_names,
        "stagingJobName": training.staging_job_name,
        "setupJobName": installed.job_name if installed else None,
        "baseImage": settings.runtime.base_image if runtime else None,
        "monitorJobName": monitor.job_name,
        "runId": training.run_id,
        "runDir": training.run_dir,
        "runsDir": runs.runs_dir(settings),
        "dataDir": runs.data_dir(settings),
        # Where the chief writes the SavedModel at the end (trainer/training/finish.py).
        "exportPath": f"{runs.log_dir(settings)}/export",
        "tensorboardUrl": tensorboard.url,
        "followChiefLog": _follow_chief_log(settings),
    }


def _training_job(
    settings: Settings,
    namespace: pulumi.Input[str],
    volume: SharedVolume,
    pods_after: Sequence[pulumi.Resource],
    k8s_opts: pulumi.ResourceOptions,
    failed_before: frozenset[str],
    runtime: setup.Runtime | None,
) -> TrainingJob:
    """The run's TrainingJob on ``volume``; its pods wait for ``pods_after`` and the claim."""
    prefix = settings.name_prefix
    return TrainingJob(
        prefix,
        TrainingJobArgs(
            training=settings.training,
            placement=pods.placements(settings),
            namespace=namespace,
            namespace_name=settings.namespace,
            claim_name=volume.claim_name,
            mount_path=settings.mount_path,
            data_dir=runs.data_dir(settings),
            log_dir=runs.log_dir(settings),
            run_key=runs.run_key(settings),
            image_pull_secret=pull_secret_name(settings),
            identity=settings.pods,
            data_source_secret="data.source" in settings.secret_keys,
            volume_hint=_volume_hint(settings),
            after=[*pods_after, volume.pvc],
            failed_before=failed_before,
            runtime=runtime,
        ),
        opts=k8s_opts,
    )


def pods_runtime(settings: Settings) -> setup.Runtime | None:
    """What the pods on the base image add (setup.runtime); None when no pod runs it."""
    return setup.runtime(
        settings.name_prefix,
        settings.mount_path,
        settings.runtime,
        sample=settings.training.data.source is None,
    )


def _package_setup(
    settings: Settings,
    runtime: setup.Runtime | None,
    namespace: pulumi.Input[str],
    volume: SharedVolume,
    pods_after: Sequence[pulumi.Resource],
    k8s_opts: pulumi.ResourceOptions,
) -> PackageSetup | None:
    """The code ConfigMaps and the setup Job, when some pod runs the base image."""
    if runtime is None:
        return None
    t = settings.training
    return PackageSetup(
        settings.name_prefix,
        PackageSetupArgs(
            namespace=namespace,
            runtime=runtime,
            settings=settings.runtime,
            claim_name=volume.claim_name,
            mount_path=settings.mount_path,
            identity=settings.pods,
            placement=settings.chief,
            image_pull_policy=settings.runtime.image_pull_policy,
            image_pull_secret=pull_secret_name(settings),
            priority_class_name=t.job.priority_class_name,
            start_timeout_seconds=t.data.start_timeout_seconds,
            after=[*pods_after, volume.pvc],
        ),
        opts=k8s_opts,
    )


def _run_monitor(
    settings: Settings,
    namespace: pulumi.Input[str],
    run_id: pulumi.Input[str],
    pods_after: Sequence[pulumi.Resource],
    k8s_opts: pulumi.ResourceOptions,
    egress_ports: Sequence[int],
) -> RunMonitor:
    """The RunMonitor of run ``run_id``: it ends the run when its chief's Job fails or a task
    cannot be scheduled (run_monitor.py); ``egress_ports``: what its NetworkPolicy opens."""
    prefix, training = settings.name_prefix, settings.training
    return RunMonitor(
        prefix,
        RunMonitorArgs(
            namespace=namespace,
            namespace_name=settings.namespace,
            run_id=run_id,
            task_job_names=task_names(prefix, training.replicas),
            schedule_timeout_seconds=training.job.schedule_timeout_seconds,
            start_timeout_seconds=training.job.start_timeout_seconds,
            api_server=training.monitor.api_server,
            egress_ports=egress_ports,
            image=training.ps.image,
            image_pull_policy=training.ps.image_pull_policy,
            placement=settings.chief,
            image_pull_secret=pull_secret_name(settings),
            priority_class_name=training.job.priority_class_name,
            after=pods_after,
            staging_job_name=staging_name(prefix),
            staging_deadline_seconds=staging.STAGING_TIMEOUT_SECONDS,
            setup_job_name=setup.setup_name(prefix) if settings.runtime.used else None,
            setup_deadline_seconds=setup.SETUP_TIMEOUT_SECONDS,
            watched_start_timeout_seconds=training.data.start_timeout_seconds,
        ),
        opts=k8s_opts,
    )


def _tensorboard(
    settings: Settings,
    namespace: pulumi.Input[str],
    volume: SharedVolume,
    pods_after: Sequence[pulumi.Resource],
    k8s_opts: pulumi.ResourceOptions,
    runtime: setup.Runtime | None,
) -> TensorBoard:
    """TensorBoard over every run's directory on ``volume``."""
    packages = settings.tensorboard_image.packages
    return TensorBoard(
        settings.name_prefix,
        TensorBoardArgs(
            tensorboard=settings.tensorboard,
            image=settings.tensorboard_image,
            namespace=namespace,
            pvc_name=volume.claim_name,
            mount_path=settings.mount_path,
            log_dir=runs.runs_dir(settings),
            placement=settings.tensorboard,
            image_pull_secret=pull_secret_name(settings),
            cloud_acl=settings.creates_cloud,
            identity=settings.pods,
            after=[*pods_after, volume.pvc],
            packages_dir=runtime.package_dirs[packages] if runtime and packages else None,
        ),
        opts=k8s_opts,
    )


def image_pulls(settings: Settings) -> list[tuple[str, str, str]]:
    """``(key, image, pull policy)`` of every kind of container the stack creates, the key being
    the one that sets its policy: the workers (and a GPU chief), the CPU trainer image's pods
    (ps, a CPU chief, staging, the run monitor) and TensorBoard."""
    t = settings.training
    return [
        ("worker.imagePullPolicy", t.worker.image, t.worker.image_pull_policy),
        ("ps.imagePullPolicy", t.ps.image, t.ps.image_pull_policy),
        (
            "ps.imagePullPolicy",
            settings.tensorboard_image.image,
            settings.tensorboard_image.image_pull_policy,
        ),
    ]


def _before_pods(
    settings: Settings,
    namespace: pulumi.Input[str],
    k8s_opts: pulumi.ResourceOptions,
    monitor_ports: Sequence[int],
) -> list[pulumi.Resource]:
    """What every pod of the stack waits for: the image pull Secret (a pod started before it
    pulls, is refused and backs off) and the NetworkPolicies (the task pods' ports are closed
    to other pods from their first packet)."""
    prefix, login, pull_secret = settings.name_prefix, registry_login(settings), pull_secret_name(settings)
    before: list[pulumi.Resource] = []
    if login is not None and pull_secret is not None:
        before.append(
            PullSecret(
                pull_secret,
                PullSecretArgs(namespace=namespace, credentials=login, name_prefix=prefix),
                opts=k8s_opts,
            )
        )
    if settings.network_policy.enabled:
        before.append(
            RunNetworkPolicies(
                prefix,
                RunNetworkPoliciesArgs(
                    namespace=namespace,
                    task_ports=list(settings.training.ports.values()),
                    tensorboard_exposed=settings.tensorboard.service_type != "ClusterIP",
                    api_server_ports=monitor_ports,
                    source_ports=_source_ports(settings),
                    setup_ports=_setup_ports(settings),
                ),
                opts=k8s_opts,
            )
        )
    return before


def _namespace(settings: Settings, provider: k8s.Provider) -> pulumi.Input[str]:
    """The namespace name for namespaced objects: from the Namespace resource when the stack
    creates it, which orders them after it. A created namespace enforces the Pod Security
    Standard "restricted", which every pod of the stack passes (pods.POD_SECURITY_LABELS)."""
    if not settings.creates_namespace:
        return settings.namespace
    return k8s.core.v1.Namespace(
        settings.namespace,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=settings.namespace,
            labels={**recommended_labels(settings.name_prefix, "namespace"), **pods.POD_SECURITY_LABELS},
        ),
        opts=pulumi.ResourceOptions(provider=provider),
    ).metadata.name


def _volume_args(
    settings: Settings,
    server: pulumi.Input[str] | None,
    server_key: str,
    namespace: pulumi.Input[str],
    after: Sequence[pulumi.Resource] = (),
) -> SharedVolumeArgs:
    """The shared volume on ``server`` (none for hostPath; ``server_key`` stands for it in the
    name, see storage.volume_name) at the configured path."""
    path_key = volume_path(settings)
    path: pulumi.Input[str] = path_key
    if server is not None and settings.secret_keys & VOLUME_SECRET_KEYS:
        # Set with --secret: keep it secret in the PV's inputs and the stack outputs.
        server = pulumi.Output.secret(server)
        path = pulumi.Output.secret(path)
    return SharedVolumeArgs(
        namespace=namespace,
        namespace_name=settings.namespace,
        volume_type=settings.volume.type,
        server=server,
        server_key=server_key,
        path=path,
        path_key=path_key,
        storage=settings.pvc.storage,
        match_labels=settings.pvc.match_labels,
        after=after,
    )


def _source_ports(settings: Settings) -> list[int]:
    """The ports the staging Job fetches data.source on (network_policy.url_ports)."""
    source = settings.training.data.source
    return network_policy.url_ports(
        [] if source is None else [source] if isinstance(source, str) else list(source)
    )


def _setup_ports(settings: Settings) -> list[int]:
    """The ports the setup Job reaches the package index on; none without a setup Job."""
    return network_policy.url_ports([settings.runtime.package_index]) if settings.runtime.used else []


def _volume_hint(settings: Settings) -> str:
    """The end of the staging Job's error on a volume its pods cannot write
    (``storage.unwritable_hint``); a path set with --secret is not shown (it would be in the
    Job's pod spec)."""
    path = None if settings.secret_keys & VOLUME_SECRET_KEYS else volume_path(settings)
    return storage.unwritable_hint(
        settings.volume.type, path, settings.mount_path, settings.pods.run_as_user, settings.pods.run_as_group
    )


def planned_objects(settings: Settings, volume_server: str | None) -> list[ObjectRef]:
    """Every Kubernetes object ``build`` creates on a cluster it does not create, by the names
    the components give them: the namespace (createNamespace), the PV and its claim, the pull
    Secret (registryCredentials.*), the TrainingJob's, TensorBoard's and the run monitor's objects,
    and the run's NetworkPolicies (networkPolicy.enabled).

    Args:
        volume_server: the volume's server (``target.existing_volume_server``).
    """
    prefix, namespace = settings.name_prefix, settings.namespace
    objects = [ObjectRef(ownership.NAMESPACE_TYPE, None, namespace)] if settings.creates_namespace else []
    volume = _volume_args(settings, volume_server, volume_server or "", namespace)
    objects += [
        ObjectRef(rtype, namespace if rtype != storage.PERSISTENT_VOLUME else None, name)
        for rtype, name in storage.object_names(prefix, volume)
    ]
    pull_secret = pull_secret_name(settings)
    if registry_login(settings) is not None and pull_secret is not None:
        objects.append(ObjectRef(SECRET, namespace, pull_secret))
    if "data.source" in settings.secret_keys:
        objects.append(ObjectRef(SECRET, namespace, staging.source_secret_name(prefix)))
    named = (
        training.object_names(prefix, settings.training.replicas)
        + setup.object_names(prefix, settings.runtime, sample=settings.training.data.source is None)
        + tensorboard.object_names(prefix)
        + monitor_object_names(prefix)
        + (
            network_policy.object_names(prefix, settings.runtime.used)
            if settings.network_policy.enabled
            else []
        )
    )
    return objects + [ObjectRef(rtype, namespace, name) for rtype, name in named]


def _follow_chief_log(settings: Settings) -> Any:
    """The commands that follow the chief's log: with the kubeconfig output written to a file,
    or, when the kubeconfig setting is a path, with that path."""
    ns, kubeconfig = settings.namespace, settings.kubeconfig
    chief = f"{settings.name_prefix}-chief-0"
    if kubeconfig is None or not is_kubeconfig_path(kubeconfig):
        return [
            f"pulumi stack output kubeconfig --show-secrets > {PROJECT}-kubeconfig.yaml",
            f"kubectl --kubeconfig {PROJECT}-kubeconfig.yaml --namespace {ns} logs --follow job/{chief}",
        ]
    # The kubeconfig output is then the path itself, not a file kubectl could read.
    command = [f"kubectl --kubeconfig {kubeconfig} --namespace {ns} logs --follow job/{chief}"]
    return pulumi.Output.secret(command) if "kubeconfig" in settings.secret_keys else command
