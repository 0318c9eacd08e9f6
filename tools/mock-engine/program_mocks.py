"""Runs the whole Pulumi program under Pulumi's mock engine and records what it registers: the
harness that the infra tests (through tests/infra/mock_engine.py), tools/render-manifests and
benchmarks/infra_benchmark.py share. Import it with this folder on sys.path.

``run_program(config)`` re-runs ``infra.program.run()`` from scratch with the given config (in
the form the CLI hands a program: ``{"tf-mnist:worker.number": "4"}`` for flat keys,
``{"tf-mnist:worker": '{"number": 4}'}`` for structured ones) and returns every resource
registration (type, name, engine-form camelCase inputs, dependencies, options), the invokes
made, and the stack outputs once resolved.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from fake_cluster import FakeCluster as FakeCluster
from fake_registry import FakeRegistry as FakeRegistry
from fake_registry import fake_digest as fake_digest
from fake_registry import pinned as pinned
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

REPO = Path(__file__).resolve().parents[2]
PROJECT = "tf-mnist"

#: What the mock cloud answers for outputs the program reads.
MOUNT_TARGET_DOMAIN = "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com"
CLUSTER_ID = "c0123456789abcdef0123456789abcdef"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n# mock credential\n"
LOAD_BALANCER_IP = "203.0.113.10"
#: API server of the existing cluster in kubeconfig mode (TEST-NET-1, never reached).
CLUSTER_SERVER = "https://192.0.2.10:6443"


class SecretConfig(str):
    """A config value set with ``pulumi config set --secret`` (``secret``): ``run_program`` names
    its key among the secret keys, wherever the dict that holds it was merged into."""


def secret(value: str) -> SecretConfig:
    """``value`` as ``pulumi config set --secret`` sets it (kubeconfig content must be)."""
    return SecretConfig(value)


def kubeconfig_content(
    server: str = CLUSTER_SERVER, token: str = "token-1", ca: str = "Q0EtMQ==", cluster_name: str = "existing"
) -> str:
    """A kubeconfig for an existing cluster, as `kubectl config view --raw` prints one."""
    return (
        f"apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster_name}\n  cluster:\n"
        f"    server: {server}\n    certificate-authority-data: {ca}\n"
        f"contexts:\n- name: ctx\n  context: {{cluster: {cluster_name}, user: me}}\n"
        f"current-context: ctx\nusers:\n- name: me\n  user: {{token: {token}}}\n"
    )


CREDENTIAL_TOKEN = "alicloud:cs/getClusterCredential:getClusterCredential"
#: The engine's function that returns this stack's state (infra/deployed.py, infra/ownership.py).
STATE_TOKEN = "pulumi:pulumi:readStackResourceOutputs"
#: The provider's NAS zones lookup (infra/nas_zones.py) and what the mock cloud answers by default:
#: every zone of cn-hangzhou that the dev stack may name offers both general-purpose types over NFS.
NAS_ZONES_TOKEN = "alicloud:nas/getZones:getZones"
NAS_ZONES = [
    {
        "zoneId": f"cn-hangzhou-{letter}",
        "instanceTypes": [
            {"storageType": storage, "protocolType": protocol}
            for storage in ("Performance", "Capacity")
            for protocol in ("nfs", "smb")
        ],
    }
    for letter in "bghijk"
]
#: The provider's ECS instance types lookup (infra/instance_prices.py asks it for a price). The
#: mock cloud answers each type asked with INSTANCE_PRICE, a test's own figure, not a real price.
INSTANCE_TYPES_TOKEN = "alicloud:ecs/getInstanceTypes:getInstanceTypes"
INSTANCE_PRICE = "1.5000"


@dataclass
class Registration:
    """One RegisterResource call as the engine sees it."""

    urn: str
    type: str
    name: str
    inputs: dict
    custom: bool
    parent: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    provider: str
    retain_on_delete: bool
    delete_before_replace: bool
    #: The aliases the program gave (each as the engine's Alias message in text form).
    aliases: list[str] = field(default_factory=list)
    #: The input properties whose changes the engine ignores after creation (camelCase).
    ignore_changes: list[str] = field(default_factory=list)


@dataclass
class Run:
    """What one program run registered, invoked and exported."""

    registrations: list[Registration] = field(default_factory=list)
    calls: list[pulumi_mocks.MockCallArgs] = field(default_factory=list)
    #: What the engine answers for this stack's state (READ_STACK_RESOURCES): urn -> {type, outputs}.
    state: dict[str, Any] = field(default_factory=dict)
    #: What NAS answers for the region's zones (NAS_ZONES_TOKEN's ``zones``); an Exception: the
    #: lookup fails with it.
    nas_zones: list[dict] | Exception = field(default_factory=lambda: list(NAS_ZONES))
    #: Instance type -> the price the ECS lookup answers (INSTANCE_TYPES_TOKEN; a type missing:
    #: INSTANCE_PRICE; None: not returned); an Exception: the lookup fails with it.
    instance_prices: dict[str, str | None] | Exception = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: dict[str, bool] = field(default_factory=dict)
    error: BaseException | None = None

    @property
    def calls_besides_state(self) -> list[pulumi_mocks.MockCallArgs]:
        """The invokes other than reads of this stack's own state (which create nothing)."""
        return [c for c in self.calls if c.token != STATE_TOKEN]

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def one(self, type_: str, name: str) -> Registration:
        found = [r for r in self.registrations if r.type == type_ and r.name == name]
        assert len(found) == 1, f"expected one {type_} named {name!r}, found {len(found)}: " + ", ".join(
            sorted(r.name for r in self.of_type(type_))
        )
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.registrations if r.urn == urn)


def mock_uid(name: str, inputs: dict, creation: str = "") -> str:
    """The uid the mock API server gives object ``name`` with ``inputs``: the same for the same
    object and inputs (an update that changes nothing keeps the uid), another one for another
    ``creation`` (the same object created anew, as after a destroy)."""
    digest = hashlib.sha256(
        json.dumps([creation, name, inputs], sort_keys=True, default=str).encode()
    ).hexdigest()
    return str(uuid.UUID(digest[:32]))


class _Mocks(pulumi.runtime.Mocks):
    def __init__(
        self,
        run: Run,
        preview: bool,
        creation: str = "",
        unreadable_state: str | None = None,
        unreadable_reads: int | None = None,
    ) -> None:
        self.run = run
        self.preview = preview
        self.creation = creation
        self.unreadable_state = unreadable_state
        self.unreadable_reads = unreadable_reads

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        state = dict(args.inputs)
        if self.preview:
            # A preview before creation: no ids, no computed outputs.
            return "", state
        if args.typ == "alicloud:cs/managedKubernetes:ManagedKubernetes":
            return CLUSTER_ID, state
        if args.typ == "alicloud:nas/mountTarget:MountTarget":
            state["mountTargetDomain"] = MOUNT_TARGET_DOMAIN
        if args.typ.startswith("kubernetes:") and isinstance(state.get("metadata"), dict):
            state["metadata"] = {**state["metadata"], "uid": mock_uid(args.name, args.inputs, self.creation)}
        if args.typ == "kubernetes:core/v1:Service" and state.get("spec", {}).get("type") == "LoadBalancer":
            state["status"] = {"loadBalancer": {"ingress": [{"ip": LOAD_BALANCER_IP}]}}
        return f"{args.name}-id", state

    def call(self, args: pulumi_mocks.MockCallArgs):
        self.run.calls.append(args)
        if args.token == CREDENTIAL_TOKEN:
            return {"clusterId": args.args.get("clusterId"), "kubeConfig": KUBECONFIG}
        if args.token == NAS_ZONES_TOKEN:
            if isinstance(self.run.nas_zones, Exception):
                return {}, [("fileSystemType", str(self.run.nas_zones))]
            return {
                "id": "cn-hangzhou",
                "fileSystemType": args.args.get("fileSystemType"),
                "zones": self.run.nas_zones,
            }
        if args.token == INSTANCE_TYPES_TOKEN:
            if isinstance(self.run.instance_prices, Exception):
                return {}, [("instanceType", str(self.run.instance_prices))]
            kind = args.args.get("instanceType")
            price = self.run.instance_prices.get(kind, INSTANCE_PRICE)
            found = [] if price is None else [{"id": kind, "price": price}]
            return {"id": "types", "instanceTypes": found, "ids": [t["id"] for t in found]}
        if args.token == STATE_TOKEN:
            failing = self.unreadable_reads is None or self.state_reads() <= self.unreadable_reads
            if self.unreadable_state is not None and failing:
                # An invoke the engine fails: the program's invoke raises with this reason.
                return {}, [("stackName", str(self.unreadable_state))]
            return {"name": args.args.get("stackName"), "outputs": self.run.state}
        raise AssertionError(f"unexpected invoke {args.token}: the program must call no other data source")

    def state_reads(self) -> int:
        """How many times the program has asked for its state, this ask included."""
        return sum(1 for c in self.run.calls if c.token == STATE_TOKEN)


class _Monitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.run = mocks.run

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.run.registrations.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    inputs=rpc.deserialize_properties(request.object),
                    custom=request.custom,
                    parent=request.parent,
                    dependencies=list(request.dependencies),
                    property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                    provider=request.provider,
                    retain_on_delete=request.retainOnDelete,
                    delete_before_replace=request.deleteBeforeReplace,
                    aliases=[str(a) for a in request.aliases],
                    ignore_changes=list(request.ignoreChanges),
                )
            )
        return response


def run_program(
    config: dict[str, str],
    *,
    preview: bool = False,
    stack: str = "dev",
    secret_keys: tuple[str, ...] = (),
    creation: str = "",
    cluster: FakeCluster | None = None,
    state: dict[str, Any] | None = None,
    unreadable_state: str | None = None,
    unreadable_reads: int | None = None,
    nas_zones: list[dict] | Exception | None = None,
    registry: Any = None,
    instance_prices: dict[str, str | None] | Exception | None = None,
) -> Run:
    """Run ``infra.program.run()`` once under fresh mocks.

    Args:
        config: full config keys ("tf-mnist:worker.number") -> string values, as the CLI
            passes them (objects as JSON strings).
        preview: run as a preview: resources get no ids and no computed outputs.
        secret_keys: config keys set with ``--secret`` (the CLI names the flat key, or the
            top-level key of a structured value that holds a secret), besides those whose value
            is a ``secret(...)``.
        creation: which creation of the objects this run models: another value gives every
            Kubernetes object another uid, as a destroy and up does (``mock_uid``).
        cluster: what the ownership check finds in an existing cluster (kubeconfig mode);
            default an empty cluster.
        state: this stack's state as the engine gives it to the program (``Run.state``).
        unreadable_state: why reading the state fails, as it does on an engine or backend without
            the function; None: it succeeds.
        unreadable_reads: how many reads of the state fail with ``unreadable_state`` before one
            succeeds; None: every one.
        nas_zones: what NAS answers for the region's zones (``Run.nas_zones``; None: NAS_ZONES),
            or the Exception its lookup fails with.
        registry: what registries answer at `pulumi up` (a preview asks none): an object whose
            ``lookup(image, login)`` answers as registry_digests.py's; default FakeRegistry().
        instance_prices: what the ECS price lookup answers (``Run.instance_prices``; None: {}).

    Returns:
        The Run; ``error`` holds an exception the program raised (nothing else is caught).
    """
    run = Run(
        state=dict(state or {}),
        nas_zones=list(NAS_ZONES) if nas_zones is None else nas_zones,
        instance_prices={} if instance_prices is None else instance_prices,
    )
    mocks = _Mocks(run, preview, creation, unreadable_state, unreadable_reads)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview, monitor=_Monitor(mocks))
    marked = [key for key, value in config.items() if isinstance(value, SecretConfig)]
    plain = {k: str(v) if isinstance(v, SecretConfig) else v for k, v in config.items()}
    pulumi.runtime.set_all_config(plain, [*secret_keys, *marked])

    from infra import image_pins, program, settings, terway_policy

    lookup = (registry or FakeRegistry()).lookup

    def program_body():
        from infra import ownership

        try:
            outputs = program.run(cluster if cluster is not None else FakeCluster(), lookup)
        except (
            settings.ConfigError,
            ownership.OwnershipError,
            image_pins.ImageDigestError,
            terway_policy.PolicyNotEnforced,
        ) as error:
            run.error = error
            return None

        async def secrecy() -> None:
            for name, value in outputs.items():
                run.secret_outputs[name] = isinstance(value, pulumi.Output) and await value.is_secret()

        def keep(values: dict) -> None:
            run.outputs.update(values)

        return pulumi.Output.all(
            pulumi.Output.from_input(secrecy()), pulumi.Output.all(**outputs).apply(keep)
        )

    pulumi.runtime.test(program_body)()
    return run


def set_flat(config: dict, key: str, value: str) -> dict:
    """``config`` with ``key`` set flat to ``value`` and taken out of its structured form (as
    after `pulumi config rm --path key` and `pulumi config set key value`)."""
    head, *path = key.split(".")
    out = {**config, f"tf-mnist:{key}": value}
    if path and f"tf-mnist:{head}" in config:
        node = json.loads(config[f"tf-mnist:{head}"])
        parent = node
        for part in path[:-1]:
            parent = parent.get(part, {})
        parent.pop(path[-1], None)
        out[f"tf-mnist:{head}"] = json.dumps(node)
    return out


_SECRET_SIG = "4dabf18193072939515e22adb298388d"


def is_secret_value(value: Any) -> bool:
    """True for an engine-form secret (``{<secret signature>: ..., "value": ...}``)."""
    return isinstance(value, dict) and _SECRET_SIG in value


def to_manifest(inputs: Any) -> Any:
    """Engine-form Kubernetes inputs to a plain manifest.

    The engine's wire format (protobuf Struct) carries every number as a double and wraps
    secrets; Kubernetes wants integers where it says integer. Integral floats become ints,
    secrets their values.
    """
    if is_secret_value(inputs):
        return to_manifest(inputs["value"])
    if isinstance(inputs, dict):
        return {k: to_manifest(v) for k, v in inputs.items()}
    if isinstance(inputs, list):
        return [to_manifest(v) for v in inputs]
    if isinstance(inputs, float) and inputs.is_integer():
        return int(inputs)
    return inputs


# --- configuration in the CLI's forms -----------------------------------------------------


def stack_config(stack: str = "dev") -> dict[str, Any]:
    """The ``config:`` map of Pulumi.<stack>.yaml, values as YAML gives them."""
    return yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]


def project_defaults() -> dict[str, Any]:
    """Pulumi.yaml's ``config:`` defaults: key -> default."""
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    return {k: v["default"] for k, v in project.get("config", {}).items() if "default" in v}


def engine_form(config: dict[str, Any]) -> dict[str, str]:
    """Stack-file values to what the program receives: scalars as strings, objects as JSON."""
    out = {}
    for key, value in config.items():
        if isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def with_cli_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """Apply Pulumi.yaml defaults the way the CLI does (pulumi/sdk workspace mergeConfig).

    Each project key is looked up *as a path* (``worker.number`` -> ``tf-mnist:worker`` ->
    ``number``); when absent it is written through the same path, i.e. into the structured
    object, even when a flat ``tf-mnist:worker.number`` exists.
    """
    merged = json.loads(json.dumps(config))
    for key, default in project_defaults().items():
        head, *path = key.split(".")
        full = f"{PROJECT}:{head}"
        if not path:
            merged.setdefault(full, default)
            continue
        node = merged.setdefault(full, {})
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node.setdefault(path[-1], default)
    return merged
