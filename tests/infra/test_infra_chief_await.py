"""job.waitForChief under the mock engine: the chief's Job is awaited until it ends either way
(infra/components/chief_await.py), a chief that failed for good fails `pulumi up` with its
reason, one that succeeded does not, and a failure an earlier up reported is only a warning.

The mock API server answers the chief's Job with the status the real await would have ended on
(``_ended``); a status with no condition is a Job that only lost pods a new one replaced.
"""

from __future__ import annotations

import json

import mock_engine as me
import pytest

from infra.components import chief_await
from infra.components.training import TASK_JOB_AWAIT
from infra.run_monitor import ENDED_BECAUSE

JOB = "kubernetes:batch/v1:Job"
CHIEF = "mnist-chief-0"
#: The Failed condition the Job controller sets for a FailJob rule (the wording of Kubernetes 1.33 and 1.34).
EXIT_3 = {
    "type": "Failed",
    "status": "True",
    "reason": "PodFailurePolicy",
    "message": "Container tensorflow for pod tf-mnist/mnist-chief-0-x7k2p failed with exit code 3 "
    "matching FailJob rule at index 0",
}
COMPLETE = {"type": "Complete", "status": "True"}


def _waiting(config: dict, wait: str = "true") -> dict:
    # The network plugin and the storage type set: the settings then read no state (their
    # defaults for a new cluster and file system come from it), and the NAS zone check off (it
    # reads the state for a file system it would ask about): only the chief's await does.
    return {
        **config,
        "tf-mnist:job.waitForChief": wait,
        "tf-mnist:job.waitTimeoutMinutes": "90",
        "tf-mnist:cluster.networkPlugin": "flannel",
        "tf-mnist:nas.storageType": "Performance",
        "tf-mnist:nas.zoneCheck": "off",
    }


@pytest.fixture
def ended(monkeypatch) -> dict:
    """Job name -> the status the mock API server gives that Job once created; under the key
    ``"annotations"`` annotations it adds to them; under ``"answered"`` the states the mock
    answered, by resource name."""
    statuses: dict = {"answered": {}}
    plain = me._Mocks.new_resource

    def new_resource(self, args):
        resource_id, state = plain(self, args)
        if args.typ == JOB and args.name in statuses and not self.preview:
            state = {**state, "status": statuses[args.name]}
            # What the run monitor writes on a Job it ends (the live object is the output).
            annotations = {**state["metadata"].get("annotations", {}), **statuses.get("annotations", {})}
            state["metadata"] = {**state["metadata"], "annotations": annotations}
        statuses["answered"][args.name] = state
        return resource_id, state

    monkeypatch.setattr(me._Mocks, "new_resource", new_resource)
    return statuses


def _state_with(answered: dict) -> dict:
    """A stack state holding the chief's Job as the mock answered it."""
    urn = f"urn:pulumi:dev::tf-mnist::pulumi:pulumi:Stack$tf-mnist:index:TrainingJob${JOB}::{CHIEF}"
    return {urn: {"type": JOB, "outputs": answered[CHIEF]}}


def test_only_the_chief_is_awaited_until_its_job_ends_either_way(dev_config):
    run = me.run_program(_waiting(dev_config))
    chief = run.one(JOB, CHIEF)
    assert me.own_annotations(chief.inputs["metadata"]) == {
        "pulumi.com/timeoutSeconds": "5400",
        "pulumi.com/waitFor": chief_await.WAIT_FOR_END,
    }
    for worker in ("mnist-worker-0", "mnist-ps-0"):
        assert me.own_annotations(run.one(JOB, worker).inputs["metadata"]) == TASK_JOB_AWAIT


def test_the_await_is_one_jsonpath_true_for_every_end_and_no_other_condition():
    expression = chief_await.WAIT_FOR_END
    # One expression (a JSON list would need all of them), of the form pulumi-kubernetes 4.25
    # parses: jsonpath={...}=value, "==" inside the filter, one "=" before the value.
    with pytest.raises(json.JSONDecodeError):
        json.loads(expression)
    assert expression.startswith("jsonpath={.status.conditions[?(") and expression.endswith(")].status}=True")
    assert expression.replace("==", "").count("=") == 2  # after "jsonpath" and before the value
    filtered = expression[expression.index("[?(") + 3 : expression.index(")]")]
    types = {term.removeprefix('@.type=="').removesuffix('"') for term in filtered.split("||")}
    assert types == {"Complete", "SuccessCriteriaMet", "Failed", "FailureTarget"}


def test_the_task_jobs_still_retry_transient_failures(dev_config):
    # A failed pod that a new pod follows sets no condition of the Job, so the await goes on:
    # preemption and eviction (DisruptionTarget) and a stop (exit 143) do not count against
    # backoffLimit; only the permanent exit codes fail the Job at once.
    run = me.run_program(_waiting(dev_config))
    rules = run.one(JOB, CHIEF).inputs["spec"]["podFailurePolicy"]["rules"]
    assert [(r["action"], r.get("onExitCodes", {}).get("values")) for r in rules] == [
        ("FailJob", [2, 3, 4, 5]),
        ("Ignore", [143]),
        ("Ignore", None),
    ]
    assert rules[2]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]


def test_a_chief_that_exits_3_fails_up_with_the_reason_and_what_the_code_means(dev_config, ended):
    ended[CHIEF] = {"failed": 1, "conditions": [{**EXIT_3, "type": "FailureTarget"}, EXIT_3]}
    with pytest.raises(chief_await.ChiefFailedError) as failed:
        me.run_program(_waiting(dev_config))
    message = str(failed.value)
    assert message.startswith(
        "The chief's Job tf-mnist/mnist-chief-0 failed (PodFailurePolicy): Container tensorflow for "
        "pod tf-mnist/mnist-chief-0-x7k2p failed with exit code 3 matching FailJob rule at index 0.\n"
        "Exit 3 of the trainer means bad data: a new pod would fail the same way"
    ), message
    assert "/logs/chief-0.log on the volume (`kubectl -n tf-mnist logs job/mnist-chief-0`)" in message


def test_the_failure_target_alone_fails_up_too(dev_config, ended):
    # Kubernetes >= 1.31 sets FailureTarget before Failed; the await may end on it.
    ended[CHIEF] = {"conditions": [{**EXIT_3, "type": "FailureTarget"}]}
    with pytest.raises(
        chief_await.ChiefFailedError, match=r"exit code 3 .*\nExit 3 of the trainer means bad data"
    ):
        me.run_program(_waiting(dev_config))


@pytest.mark.parametrize(
    "status",
    [
        {"succeeded": 1, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, COMPLETE]},
        {"succeeded": 1, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]},
        # Two pods lost and replaced on the way (exit 143, an eviction): no condition of the Job.
        {"failed": 2, "succeeded": 1, "conditions": [COMPLETE]},
    ],
)
def test_a_chief_that_succeeded_lets_up_succeed(dev_config, ended, caplog, status):
    ended[CHIEF] = status
    run = me.run_program(_waiting(dev_config))
    assert run.error is None and run.outputs["jobNames"][0] == CHIEF
    assert "The chief's Job" not in caplog.text


def test_a_chief_the_run_monitor_ended_fails_up_with_the_monitor_s_reason(dev_config, ended):
    ended[CHIEF] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "Job was active longer",
            }
        ]
    }
    ended["annotations"] = {ENDED_BECAUSE: "worker-0 unschedulable for 600 s: 0/1 nodes are available"}
    with pytest.raises(chief_await.ChiefFailedError) as failed:
        me.run_program(_waiting(dev_config))
    assert str(failed.value).splitlines()[:3] == [
        "The chief's Job tf-mnist/mnist-chief-0 failed (DeadlineExceeded): Job was active longer.",
        chief_await.REASONS["DeadlineExceeded"],
        "The run monitor ended it: worker-0 unschedulable for 600 s: 0/1 nodes are available",
    ]


def test_without_wait_for_chief_a_failed_chief_fails_nothing(dev_config, ended):
    ended[CHIEF] = {"conditions": [EXIT_3]}
    run = me.run_program(_waiting(dev_config, wait="false"))
    assert run.error is None and run.outputs["jobNames"][0] == CHIEF
    # Nor is the state read for it.
    assert not [c for c in run.calls if c.token == me.STATE_TOKEN]


def test_a_failure_an_earlier_up_reported_is_only_a_warning(dev_config, ended, caplog):
    # Then an up that leaves the Job alone, and the program run of `pulumi destroy
    # --run-program`, get the state's status: an error there would stop the teardown.
    ended[CHIEF] = {"conditions": [EXIT_3]}
    with pytest.raises(chief_await.ChiefFailedError):
        me.run_program(_waiting(dev_config))
    state = _state_with(ended["answered"])
    run = me.run_program(_waiting(dev_config), state=state)
    assert run.error is None and run.outputs["jobNames"][0] == CHIEF
    assert "failed with exit code 3" in caplog.text
    assert "An earlier `pulumi up` failed on this Job; this one leaves it as it is." in caplog.text


def test_a_new_job_of_the_same_name_that_fails_fails_up_again(dev_config, ended):
    ended[CHIEF] = {"conditions": [EXIT_3]}
    with pytest.raises(chief_await.ChiefFailedError):
        me.run_program(_waiting(dev_config))
    state = _state_with(ended["answered"])
    # Another creation of the Job (a replacement): another uid, a failure of this up.
    with pytest.raises(chief_await.ChiefFailedError):
        me.run_program(_waiting(dev_config), state=state, creation="replaced")


def test_an_unreadable_state_warns_and_a_failure_still_fails_up(dev_config, ended, caplog):
    ended[CHIEF] = {"conditions": [EXIT_3]}
    with pytest.raises(chief_await.ChiefFailedError):
        me.run_program(_waiting(dev_config), unreadable_state="backend unreachable")
    assert "could not read this stack's state (" in caplog.text and "backend unreachable" in caplog.text


def test_a_preview_of_a_new_chief_job_does_not_fail(dev_config, ended):
    ended[CHIEF] = {"conditions": [EXIT_3]}
    run = me.run_program(_waiting(dev_config), preview=True)
    assert run.error is None


def test_the_messages_of_the_other_failures():
    backoff = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    backoff["message"] = "Job has reached the specified backoff limit"
    text = chief_await.failure_message("mnist-chief-0", "ns", backoff, None, "/data/runs/k")
    assert text.splitlines()[:2] == [
        "The chief's Job ns/mnist-chief-0 failed (BackoffLimitExceeded): Job has reached the "
        "specified backoff limit.",
        chief_await.REASONS["BackoffLimitExceeded"],
    ]
    deadline = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "too long"}
    text = chief_await.failure_message(
        "mnist-chief-0", "ns", deadline, {ENDED_BECAUSE: "worker-0 unschedulable: 0/1 nodes"}, "/data/runs/k"
    )
    assert text.splitlines()[1:3] == [
        chief_await.REASONS["DeadlineExceeded"],
        "The run monitor ended it: worker-0 unschedulable: 0/1 nodes",
    ]
    assert text.endswith(
        "/data/runs/k/logs/chief-0.log on the volume (`kubectl -n ns logs job/mnist-chief-0`); "
        "`python -m infra.status` shows every task."
    )


def test_failed_before_reads_the_failed_jobs_of_the_state():
    failed = {"metadata": {"uid": "u1"}, "status": {"conditions": [EXIT_3]}}
    ended_well = {"metadata": {"uid": "u2"}, "status": {"conditions": [COMPLETE]}}
    running = {"metadata": {"uid": "u3"}, "status": {"active": 1}}
    lost = {"metadata": {"uid": "u4"}, "status": {"conditions": [{**EXIT_3, "status": "False"}]}}
    state = {
        f"urn:{i}": {"type": JOB, "outputs": outputs}
        for i, outputs in enumerate([failed, ended_well, running, lost])
    }
    state["urn:cm"] = {"type": "kubernetes:core/v1:ConfigMap", "outputs": failed}
    assert chief_await.failed_job_uids(state) == {"u1"}
