"""RunMonitor: the ``<prefix>-monitor`` Job that ends a run which cannot go on (its script is
infra/run_monitor.py), with the ServiceAccount and namespaced Role it reads the API with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from infra import monitor_api, pod_progress, run_cost, run_monitor, trainer_status
from infra.components import checker_suppressions as suppress
from infra.components import pods
from infra.components.labels import recommended_labels
from infra.components.pods import Placement
from trainer.contract import progress

COMPONENT = "monitor"
SCRIPT_KEY = "run_monitor.py"
#: The modules the script imports, delivered beside it (each key is the file's name).
MODULE_KEY = "pod_progress.py"
API_MODULE_KEY = "monitor_api.py"
TRAINER_STATUS_KEY = "trainer_status.py"
RUN_COST_KEY = "run_cost.py"
#: trainer/contract/progress.py, the chief's progress lines' parser (standard library only).
PROGRESS_KEY = "progress.py"
SCRIPT_DIR = "/monitor"
#: What infra/run_monitor.py calls: it lists the run's Jobs and pods (by label) and the
#: namespace's pod Events (the kubelet's steps toward starting a pod: Events carry no labels),
#: and patches a task Job to end it; the patch is granted on the run's own task Jobs only
#: (``resourceNames``), so the monitor cannot end any other Job in the namespace. No ``get`` of
#: an object: it reads nothing by name.
LIST_RULES = (("batch", "jobs"), ("", "pods"), ("", "events"))
#: The one read by name: the chief pod's log (``GET pods/{name}/log``), whose progress lines the
#: monitor writes on the chief's Job (infra/trainer_status.py). The pod's name is the Job
#: controller's random one, unknown when the Role is made, so no ``resourceNames`` can narrow it:
#: the rule covers the logs of the namespace's pods, and nothing else (no ``pods/exec``, no
#: ``pods/attach``, no ``pods`` by name). ``get`` is the only verb the log subresource has.
LOG_RULE = ("", "pods/log", "get")
#: The monitor pod's requests: Python's standard library polling a few lists and the tail of the
#: chief's log (500 lines) every few seconds (about 20 MB resident, next to no CPU).
REQUESTS = {"cpu": "10m", "memory": "64Mi"}
#: Half a core: it starts Python and makes a TLS call every few seconds.
LIMITS = {"cpu": "500m", "memory": "128Mi"}
#: Ready for Pulumi once the API server has it (the task Jobs' await; infra/components/training.py).
AWAIT = {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}
#: Failed monitor pods that count: an API server out of reach for MAX_FAILURES polls (the
#: script exits 1), or never reached in UNREACHED_FAILURES (exit 3: an address or a port that
#: is closed to it), gets two more pods before the Job fails. Kills do not count
#: (failure_policy).
BACKOFF_LIMIT = 2
#: A container killed by SIGKILL or SIGTERM (128 + the signal): the node's OOM killer, a
#: person's or a script's ``kill`` of the node's processes, a drained node. The monitor keeps no
#: state between polls, so a new pod takes over where the killed one stopped.
EXIT_KILLED = (137, 143)


@dataclass
class RunMonitorArgs:
    """The run to watch and how the monitor pod runs.

    Attributes:
        namespace: the run's namespace (an Output when the stack creates it).
        namespace_name: the same as plain text (the script's MONITOR_NAMESPACE).
        run_id: the run's id: only Jobs with this ``--run_id`` count, and a new id (a new run)
            replaces the monitor Job, so each run gets a monitor of its own.
        task_job_names: the run's task Jobs (``<prefix>-<type>-<index>``), the only Jobs the
            monitor may patch.
        schedule_timeout_seconds: job.scheduleTimeoutSeconds (0 = never).
        start_timeout_seconds: job.startTimeoutSeconds (0 = never).
        api_server: monitor.apiServer, or None for the in-cluster address.
        egress_ports: the TCP ports the monitor's NetworkPolicy opens to the API server
            (infra/monitor_egress.py); empty without one. They are in the pod's environment, so
            that a monitor which cannot reach the server names them, and a change of them (the
            fix) starts a new monitor Job.
        image: the CPU trainer image (it has python3), pulled with ``image_pull_policy``.
        image_pull_policy: ps.imagePullPolicy.
        placement: where the pod goes (the CPU roles' placement).
        image_pull_secret: the docker-registry Secret every pod pulls with, if any.
        priority_class_name: job.priorityClassName (the monitor is part of the run).
        after: resources the Job waits for (the node pools, the pull Secret).
        staging_job_name: the run's data staging Job, whose activeDeadlineSeconds the monitor
            raises to ``staging_deadline_seconds`` once its pod runs (run_monitor.staging_deadline;
            None: not watched).
        setup_job_name: the setup Job (infra/components/setup.py), watched the same way, its
            deadline raised to ``setup_deadline_seconds``; None: the stack has none.
        watched_start_timeout_seconds: data.startTimeoutSeconds, both watched Jobs' deadline as
            created: while their pod progresses toward starting (a slow pull), the monitor keeps
            the deadline this far past the pod's last step (run_monitor.staging_deadline).
    """

    namespace: pulumi.Input[str]
    namespace_name: str
    run_id: pulumi.Input[str]
    task_job_names: Sequence[str]
    schedule_timeout_seconds: int
    start_timeout_seconds: int
    api_server: str | None
    egress_ports: Sequence[int]
    image: str
    image_pull_policy: str
    placement: Placement
    image_pull_secret: str | None
    priority_class_name: str | None = None
    after: Sequence[pulumi.Resource] = ()
    staging_job_name: str | None = None
    staging_deadline_seconds: int = 0
    setup_job_name: str | None = None
    setup_deadline_seconds: int = 0
    watched_start_timeout_seconds: int = 0


def failure_policy() -> k8s.batch.v1.PodFailurePolicyArgs:
    """How the monitor Job treats a failed pod: a bad environment (exit 2) fails the Job at
    once; a killed container (EXIT_KILLED) or a disruption (DisruptionTarget) gets a new pod
    that does not count; anything else (exit 1: the API server out of reach) counts against
    BACKOFF_LIMIT. A run is then never left unwatched because its monitor was killed."""
    # A bad environment: no new pod mends it.
    return pods.failure_policy(COMPONENT, fail_job=[run_monitor.EXIT_BAD_ENVIRONMENT], ignore=EXIT_KILLED)


def object_names(name: str) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of every Kubernetes object ``RunMonitor(name, ...)``
    creates in its namespace, all named ``<name>-monitor``."""
    object_name = f"{name}-{COMPONENT}"
    return [
        (rtype, object_name)
        for rtype in (
            "kubernetes:core/v1:ServiceAccount",
            "kubernetes:rbac.authorization.k8s.io/v1:Role",
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
            "kubernetes:core/v1:ConfigMap",
            "kubernetes:batch/v1:Job",
        )
    ]


class RunMonitor(pulumi.ComponentResource):
    """The run monitor of ``name`` (the name prefix); every child is named ``<name>-monitor``.

    Children: a ServiceAccount, a Role (LIST_RULES, LOG_RULE and the patch) and its RoleBinding, a
    ConfigMap holding the script's text and its modules' (so a change to them needs no image
    rebuild), and a batch/v1 Job running ``python /monitor/run_monitor.py``. Its pod passes Pod
    Security Standard "restricted" like every pod of the stack, and it is the one pod that mounts
    a service-account token: it reads and patches the run's Jobs through the API.

    Outputs:
        job_name: the monitor Job's name.
    """

    job_name: pulumi.Output[str]

    def __init__(self, name: str, args: RunMonitorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:RunMonitor", name, None, opts)
        self._name, self._args = name, args
        object_name = f"{name}-{COMPONENT}"
        child = pulumi.ResourceOptions(parent=self)
        account = k8s.core.v1.ServiceAccount(
            object_name,
            metadata=self._metadata(object_name),
            # Only the monitor's pod asks for a token (automountServiceAccountToken on the pod).
            automount_service_account_token=False,
            opts=child,
        )
        role = k8s.rbac.v1.Role(
            object_name,
            metadata=self._metadata(object_name),
            rules=[
                *(
                    k8s.rbac.v1.PolicyRuleArgs(api_groups=[group], resources=[resource], verbs=["list"])
                    for group, resource in LIST_RULES
                ),
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=[LOG_RULE[0]], resources=[LOG_RULE[1]], verbs=[LOG_RULE[2]]
                ),
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["batch"], resources=["jobs"], verbs=["patch"], resource_names=self._patched()
                ),
            ],
            opts=child,
        )
        binding = k8s.rbac.v1.RoleBinding(
            object_name,
            metadata=self._metadata(object_name),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(
                    kind="ServiceAccount", name=account.metadata.name, namespace=args.namespace
                )
            ],
            opts=child,
        )
        script = k8s.core.v1.ConfigMap(
            object_name,
            metadata=self._metadata(object_name),
            data={
                SCRIPT_KEY: Path(run_monitor.__file__).read_text(encoding="utf-8"),
                MODULE_KEY: Path(pod_progress.__file__).read_text(encoding="utf-8"),
                API_MODULE_KEY: Path(monitor_api.__file__).read_text(encoding="utf-8"),
                TRAINER_STATUS_KEY: Path(trainer_status.__file__).read_text(encoding="utf-8"),
                RUN_COST_KEY: Path(run_cost.__file__).read_text(encoding="utf-8"),
                PROGRESS_KEY: Path(progress.__file__).read_text(encoding="utf-8"),
            },
            opts=child,
        )
        job = k8s.batch.v1.Job(
            object_name,
            metadata=self._metadata(
                object_name, AWAIT, role=suppress.MONITOR, pulls=[(args.image, args.image_pull_policy)]
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=BACKOFF_LIMIT,
                pod_failure_policy=failure_policy(),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=recommended_labels(name, COMPONENT)),
                    spec=self._pod(account.metadata.name, script.metadata.name),
                ),
            ),
            # The Role's binding first: a pod started before it is refused every call.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding, *args.after]),
        )
        self.job_name = job.metadata.name
        self.register_outputs({"job_name": self.job_name})

    def _metadata(
        self,
        name: str,
        annotations: dict | None = None,
        role: str = suppress.OBJECT,
        pulls: Sequence[suppress.Pull] = (),
    ) -> k8s.meta.v1.ObjectMetaArgs:
        """An object's metadata; ``role`` and its containers' ``pulls`` (image, pull policy)
        pick the checkers' suppressions it carries."""
        return k8s.meta.v1.ObjectMetaArgs(
            name=name,
            namespace=self._args.namespace,
            labels=recommended_labels(self._name, COMPONENT),
            annotations=suppress.merged(annotations, role, pulls),
        )

    def _patched(self) -> list[str]:
        """The Jobs the Role lets the monitor patch: the run's task Jobs, its staging Job and
        its setup Job."""
        args = self._args
        watched = [name for name in (args.staging_job_name, args.setup_job_name) if name]
        return [*args.task_job_names, *watched]

    def _env(self) -> list[k8s.core.v1.EnvVarArgs]:
        args = self._args
        values: dict[str, pulumi.Input[str]] = {
            "MONITOR_NAMESPACE": args.namespace_name,
            "MONITOR_PREFIX": self._name,
            "MONITOR_RUN_ID": args.run_id,
            "MONITOR_SCHEDULE_TIMEOUT_S": str(args.schedule_timeout_seconds),
            "MONITOR_START_TIMEOUT_S": str(args.start_timeout_seconds),
            # The script is run from a read-only ConfigMap volume: no .pyc to write.
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if args.api_server:
            values["MONITOR_API_SERVER"] = args.api_server
        if args.egress_ports:
            values["MONITOR_EGRESS_PORTS"] = ",".join(map(str, args.egress_ports))
        if args.staging_job_name:
            values["MONITOR_STAGING_JOB"] = args.staging_job_name
            values["MONITOR_STAGING_DEADLINE_S"] = str(args.staging_deadline_seconds)
        if args.watched_start_timeout_seconds and (args.staging_job_name or args.setup_job_name):
            values["MONITOR_WATCHED_START_TIMEOUT_S"] = str(args.watched_start_timeout_seconds)
        if args.setup_job_name:
            values["MONITOR_SETUP_JOB"] = args.setup_job_name
            values["MONITOR_SETUP_DEADLINE_S"] = str(args.setup_deadline_seconds)
        return [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in values.items()] + pods.scratch_env()

    def _pod(self, account: pulumi.Input[str], config_map: pulumi.Input[str]) -> k8s.core.v1.PodSpecArgs:
        args = self._args
        return k8s.core.v1.PodSpecArgs(
            # Never, not OnFailure: a podFailurePolicy needs it, and under OnFailure every
            # in-place restart counts against backoffLimit (the Job fails once the restarts
            # *reach* it), so two kills of the node's processes failed a monitor whose run
            # then trained to the end.
            restart_policy="Never",
            service_account_name=account,
            # The one pod of the stack with a token: it calls the API (the Role's rules, this
            # namespace only).
            automount_service_account_token=True,
            security_context=pods.pod_security_context(),
            node_selector=pods.node_selector(args.placement),
            tolerations=pods.tolerations(args.placement, uses_gpu=False),
            image_pull_secrets=pods.image_pull_secrets(args.image_pull_secret),
            priority_class_name=args.priority_class_name,
            containers=[
                k8s.core.v1.ContainerArgs(
                    name=COMPONENT,
                    image=args.image,
                    image_pull_policy=args.image_pull_policy,
                    command=["python", f"{SCRIPT_DIR}/{SCRIPT_KEY}"],
                    env=self._env(),
                    # A failed pod's status then ends with the script's last lines, the reason it
                    # gave up (which API server, which port): `kubectl describe`, infra.status.
                    termination_message_policy="FallbackToLogsOnError",
                    resources=pods.resources(REQUESTS, LIMITS),
                    security_context=pods.container_security_context(),
                    volume_mounts=[
                        k8s.core.v1.VolumeMountArgs(name="script", mount_path=SCRIPT_DIR, read_only=True),
                        pods.scratch_mount(),
                    ],
                )
            ],
            volumes=[
                k8s.core.v1.VolumeArgs(
                    name="script", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=config_map)
                ),
                pods.scratch_volume(),
            ],
        )
