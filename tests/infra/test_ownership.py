"""The ownership check (infra/ownership.py): the rule on recorded objects, the error, the program
refusing before it registers anything, and the real kubernetes client against a recorded API server."""

from __future__ import annotations

import mock_engine as me
import pytest
from recorded_api import RecordedApi, api_server  # noqa: F401 - the fixture

from infra import ownership, stack_state
from infra.cluster_objects import KubeconfigCluster, LiveObject, ObjectRef, Refused, Unreachable
from infra.components.labels import LABEL_VALUE, STACK_LABEL, stack_mark

MARK = "organization.tf-mnist.dev"
OTHER = "organization.tf-mnist.other"
DOMAIN = "abc.cn-hangzhou.nas.aliyuncs.com"
CM = "kubernetes:core/v1:ConfigMap"
JOB = "kubernetes:batch/v1:Job"
PV = "kubernetes:core/v1:PersistentVolume"
RUN_CM = ObjectRef(CM, "tf-mnist", "mnist-run")
CHIEF = ObjectRef(JOB, "tf-mnist", "mnist-chief-0")
LEGACY = {
    "app.kubernetes.io/name": "tf-mnist",
    "app.kubernetes.io/instance": "mnist",
    "app.kubernetes.io/managed-by": "pulumi",
}


def _state(*objects: tuple[ObjectRef, str]) -> dict:
    """A stack's state as the engine's readStackResourceOutputs gives it, holding ``objects``."""
    state = {
        "urn:pulumi:dev::tf-mnist::pulumi:providers:kubernetes::mnist-k8s": {
            "type": "pulumi:providers:kubernetes",
            "outputs": {"kubeconfig": "[secret]"},
        }
    }
    for ref, uid in objects:
        metadata = {"name": ref.name, "uid": uid, **({"namespace": ref.namespace} if ref.namespace else {})}
        state[f"urn:pulumi:dev::tf-mnist::{ref.type}::{ref.name}"] = {
            "type": ref.type,
            "outputs": {"metadata": metadata},
        }
    return state


# --- the rule --------------------------------------------------------------------------------


def test_an_object_passes_only_when_absent_or_held_by_this_stack_with_its_uid():
    planned = [RUN_CM, CHIEF, ObjectRef(PV, None, "mnist-data-1a2b3c4d")]
    held = ownership.held_objects(_state((RUN_CM, "uid-1"), (CHIEF, "uid-old")))
    assert held == {RUN_CM: "uid-1", CHIEF: "uid-old"}  # the provider's entry is no object
    live = {
        RUN_CM: LiveObject("uid-1", {STACK_LABEL: MARK}),
        # The same name, another uid: ours was deleted and something else took the name.
        CHIEF: LiveObject("uid-new", {STACK_LABEL: MARK}),
        ObjectRef(PV, None, "mnist-data-1a2b3c4d"): None,
    }
    (refused,) = ownership.refusals(planned, live, held, MARK)
    assert refused.ref == CHIEF and "not in this stack's state" in refused.owner


def test_objects_from_before_the_label_pass_when_the_state_holds_them():
    # A stack made by an older program: its objects carry no tf-mnist.io/stack label.
    live = {RUN_CM: LiveObject("uid-1", LEGACY)}
    assert ownership.refusals([RUN_CM], live, {RUN_CM: "uid-1"}, MARK) == []
    (refused,) = ownership.refusals([RUN_CM], live, {}, MARK)
    assert (
        refused.owner
        == "created by another stack of this project (namePrefix mnist, before stacks were labelled)"
    )


@pytest.mark.parametrize(
    "labels,owner",
    [
        ({STACK_LABEL: OTHER}, f"created by stack {OTHER} (label {STACK_LABEL})"),
        ({"app": "mnist"}, "not created by a stack of this project"),
        (
            {STACK_LABEL: MARK},
            f"labelled as this stack's ({STACK_LABEL}={MARK}) but not in this stack's state: a "
            "stack of the same name in another Pulumi backend, or left by an interrupted update",
        ),
    ],
    ids=["other-stack", "foreign", "same-name-other-backend"],
)
def test_an_object_missing_from_the_state_is_refused_with_its_owner(labels, owner):
    (refused,) = ownership.refusals([RUN_CM], {RUN_CM: LiveObject("uid-9", labels)}, {}, MARK)
    assert refused == ownership.Refusal(RUN_CM, owner)


def test_without_the_state_the_label_decides():
    live = {RUN_CM: LiveObject("u1", {STACK_LABEL: MARK}), CHIEF: LiveObject("u2", {STACK_LABEL: OTHER})}
    assert [r.ref for r in ownership.refusals([RUN_CM, CHIEF], live, None, MARK)] == [CHIEF]


def test_the_message_names_each_object_its_owner_and_the_keys_to_change():
    found = [
        ownership.Refusal(RUN_CM, f"created by stack {OTHER} (label {STACK_LABEL})"),
        ownership.Refusal(
            ObjectRef(ownership.NAMESPACE_TYPE, None, "team"), "not created by a stack of this project"
        ),
    ]
    assert ownership.refusal_message(found, stack="dev").splitlines() == [
        "2 Kubernetes objects that stack dev would create already exist and are not this stack's; nothing was "
        "deployed:",
        f"  ConfigMap tf-mnist/mnist-run: created by stack {OTHER} (label {STACK_LABEL})",
        "  Namespace team: not created by a stack of this project",
        "Creating them would take them over (server-side apply updates an existing object), and destroying this "
        "stack would then delete them. Give this stack names of its own: `pulumi config set namePrefix <another "
        "prefix>` or `pulumi config set namespace <another namespace>`.",
        "For the namespace itself, which this stack would create (createNamespace true, its default with "
        "namespace tf-mnist): `pulumi config set createNamespace false` deploys into the existing namespace "
        "without owning it; destroying the stack that created it still deletes it, with this stack's objects.",
    ]


def test_the_stack_mark_is_a_label_value_one_per_stack():
    assert stack_mark("organization", "tf-mnist", "dev") == MARK
    long_a, long_b = (
        stack_mark("a-very-long-organization-name", "tf-mnist", "s" * 40 + tail) for tail in "ab"
    )
    assert long_a != long_b and all(LABEL_VALUE.match(m) and len(m) <= 63 for m in (long_a, long_b)), long_a


@pytest.mark.parametrize(
    "ref,path",
    [
        (RUN_CM, "/api/v1/namespaces/tf-mnist/configmaps/mnist-run"),
        (CHIEF, "/apis/batch/v1/namespaces/tf-mnist/jobs/mnist-chief-0"),
        (ObjectRef(PV, None, "mnist-data-1"), "/api/v1/persistentvolumes/mnist-data-1"),
        (
            ObjectRef("kubernetes:networking.k8s.io/v1:NetworkPolicy", "ns", "p"),
            "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/p",
        ),
    ],
)
def test_object_paths(ref, path):
    assert ref.api_path() == path


# --- the program -----------------------------------------------------------------------------


def _kubeconfig_mode(config: dict, **flat: str) -> dict:
    return {
        **config,
        "tf-mnist:kubeconfig": me.secret(me.kubeconfig_content()),
        "tf-mnist:nas.mountTargetDomain": DOMAIN,
        **{f"tf-mnist:{k.replace('__', '.')}": v for k, v in flat.items()},
    }


def _registered_objects(run: me.Run) -> set[ObjectRef]:
    return {
        ObjectRef(r.type, r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"])
        for r in run.registrations
        if r.type.startswith("kubernetes:") and r.custom
    }


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {
            "createNamespace": "true",
            "namespace": "team-a",
            "namePrefix": "exp",
            "persistence__volume__type": "hostPath",
            "registryCredentials__username": "u",
            "registryCredentials__password": "p",
            "ps__number": "0",
            "data__source": "https://b.example.com/mnist.npz?Expires=1&Signature=x",
        },
    ],
    ids=["dev", "namespace-hostPath-registry-secret-source"],
)
def test_the_check_reads_exactly_the_objects_the_program_creates(dev_config, extra):
    config = _kubeconfig_mode(dev_config, **extra)
    if extra:
        config.pop("tf-mnist:nas.mountTargetDomain")
        config["tf-mnist:hostPath.path"] = "/var/tmp/tf-mnist"
    cluster = me.FakeCluster()
    secret = ("tf-mnist:registryCredentials.password", "tf-mnist:data.source") if extra else ()
    run = me.run_program(config, cluster=cluster, secret_keys=secret)
    assert run.error is None, run.error
    assert len(cluster.reads) == len(set(cluster.reads)) > 10
    assert set(cluster.reads) == _registered_objects(run)
    for r in run.registrations:
        if r.type.startswith("kubernetes:") and r.custom:
            assert r.inputs["metadata"]["labels"][STACK_LABEL] == MARK, r.name


def test_another_stacks_object_refuses_the_deployment_before_anything_is_registered(dev_config):
    cluster = me.FakeCluster({RUN_CM: LiveObject("uid-7", {**LEGACY, STACK_LABEL: OTHER})})
    for preview in (True, False):
        run = me.run_program(_kubeconfig_mode(dev_config), cluster=cluster, preview=preview)
        assert isinstance(run.error, ownership.OwnershipError), run.error
        assert f"  ConfigMap tf-mnist/mnist-run: created by stack {OTHER}" in str(run.error)
        assert run.registrations == []
        assert [c.token for c in run.calls] == [me.STATE_TOKEN]


def test_the_stacks_own_objects_pass(dev_config):
    cluster = me.FakeCluster(
        {RUN_CM: LiveObject("uid-1", LEGACY), CHIEF: LiveObject("uid-2", {STACK_LABEL: MARK})}
    )
    run = me.run_program(
        _kubeconfig_mode(dev_config), cluster=cluster, state=_state((RUN_CM, "uid-1"), (CHIEF, "uid-2"))
    )
    assert run.error is None, run.error
    assert RUN_CM in _registered_objects(run)


@pytest.mark.parametrize(
    "error,preview,refused",
    [
        (Unreachable("the API server did not answer (ConnectionRefusedError)"), True, False),
        (Unreachable("the API server did not answer (ConnectionRefusedError)"), False, False),
        (Refused(403, "Forbidden"), True, False),
        (Refused(403, "Forbidden"), False, True),
    ],
    ids=["unreachable-preview", "unreachable-up", "forbidden-preview", "forbidden-up"],
)
def test_a_cluster_that_cannot_be_read(dev_config, error, preview, refused):
    cluster = me.FakeCluster(error=error)
    run = me.run_program(_kubeconfig_mode(dev_config), cluster=cluster, preview=preview)
    assert len(cluster.reads) == 1  # the first failure ends the reading
    if refused:
        assert str(run.error) == (
            f"could not check whether {cluster.reads[0]} already exists: the API server "
            "answered HTTP 403 Forbidden (the check needs get on every kind the stack "
            "creates); nothing was deployed"
        )
        assert run.registrations == []
    else:
        assert run.error is None and _registered_objects(run)


#: The engine's reason when a read of the file backend meets its own write of the checkpoint.
CHECKPOINT_RACE = (
    "invocation of pulumi:pulumi:readStackResourceOutputs returned an error: failed to load checkpoint: EOF"
)


def test_a_checkpoint_read_during_a_write_is_read_again(dev_config, monkeypatch):
    monkeypatch.setattr(stack_state, "READ_PAUSE_S", 0.0)
    cluster = me.FakeCluster({RUN_CM: LiveObject("uid-1", {STACK_LABEL: MARK})})
    run = me.run_program(
        _kubeconfig_mode(dev_config),
        cluster=cluster,
        state=_state((RUN_CM, "uid-1")),
        unreadable_state=CHECKPOINT_RACE,
        unreadable_reads=3,
    )
    assert run.error is None, run.error
    assert [c.token for c in run.calls] == [me.STATE_TOKEN] * 4


@pytest.mark.parametrize(
    "reason",
    [CHECKPOINT_RACE, "no backend client is available"],
    ids=["checkpoint-past-the-deadline", "another-failure"],
)
def test_an_up_refuses_while_the_state_cannot_be_read_and_a_preview_warns(
    dev_config, monkeypatch, caplog, reason
):
    monkeypatch.setattr(stack_state, "READ_DEADLINE_S", 0.0)  # a backend that never gives the state
    # This stack's label but not this stack's uid: only the state can tell.
    cluster = me.FakeCluster({RUN_CM: LiveObject("uid-9", {STACK_LABEL: MARK})})
    up = me.run_program(_kubeconfig_mode(dev_config), cluster=cluster, unreadable_state=reason)
    assert isinstance(up.error, ownership.OwnershipError), up.error
    assert str(up.error) == (
        f"could not read this stack's state to check that the existing objects are its own (invoke of "
        f"{me.STATE_TOKEN} failed: {reason} (stackName)); nothing was deployed. Run `pulumi up` again; if the "
        "state stays unreadable, `pulumi stack export` shows whether the backend can read it."
    )
    assert up.registrations == [] and [c.token for c in up.calls] == [me.STATE_TOKEN]
    preview = me.run_program(
        _kubeconfig_mode(dev_config), cluster=cluster, preview=True, unreadable_state=reason
    )
    assert preview.error is None and RUN_CM in _registered_objects(preview)
    assert f"objects labelled {STACK_LABEL}={MARK} count as this stack's here" in caplog.text


def test_a_stack_that_creates_its_cluster_reads_nothing(dev_config):
    cluster = me.FakeCluster(error=AssertionError("the cloud layer's cluster must not be read"))
    run = me.run_program(dev_config, cluster=cluster)
    assert run.error is None and cluster.reads == []


# --- the kubernetes client against a recorded API server -----------------------------------------------


def test_the_client_reads_metadata_only_with_the_kubeconfigs_token(api_server):
    RecordedApi.seen = []
    RecordedApi.answers = {
        "/api/v1/namespaces/tf-mnist/configmaps/mnist-run": (
            200,
            {
                "kind": "PartialObjectMetadata",
                "metadata": {"name": "mnist-run", "uid": "u-1", "labels": LEGACY},
            },
        ),
        "/apis/batch/v1/namespaces/tf-mnist/jobs/mnist-chief-0": (403, {"kind": "Status", "code": 403}),
    }
    cluster = KubeconfigCluster(me.kubeconfig_content(server=api_server, token="t-42"))
    assert cluster.read(RUN_CM) == LiveObject("u-1", LEGACY)
    assert cluster.read(ObjectRef(PV, None, "absent")) is None
    with pytest.raises(Refused) as refused:
        cluster.read(CHIEF)
    assert refused.value.status == 403
    assert [(path, accept.split(";")[1], auth) for path, accept, auth in RecordedApi.seen] == [
        ("/api/v1/namespaces/tf-mnist/configmaps/mnist-run", "as=PartialObjectMetadata", "Bearer t-42"),
        ("/api/v1/persistentvolumes/absent", "as=PartialObjectMetadata", "Bearer t-42"),
        ("/apis/batch/v1/namespaces/tf-mnist/jobs/mnist-chief-0", "as=PartialObjectMetadata", "Bearer t-42"),
    ]


def test_a_closed_port_is_unreachable_and_the_error_holds_no_kubeconfig_detail():
    cluster = KubeconfigCluster(me.kubeconfig_content(server="http://127.0.0.1:1", token="t-secret"))
    with pytest.raises(Unreachable) as error:
        cluster.read(RUN_CM)
    assert "127.0.0.1" not in str(error.value) and "t-secret" not in str(error.value)
    assert str(error.value).startswith("the API server did not answer ("), error.value
