"""The table of checker findings that are right for this workload
(infra/components/checker_suppressions.py): the annotations it makes, and which objects carry
them under the mock engine. That checkov and kube-score then find nothing is
tests/tools/test_checkers.py."""

from __future__ import annotations

import mock_engine as me
import pytest

from infra.components import checker_suppressions as suppress

JOB = "kubernetes:batch/v1:Job"


def test_every_reason_fits_a_checkov_annotation():
    # checkov reads "<id>=<reason>"; kube-score's list is comma-separated.
    for entry in suppress.SUPPRESSIONS:
        assert "=" not in entry.reason and "," not in entry.reason, entry.name
        assert entry.checkov or entry.kube_score, entry.name
        assert entry.roles <= suppress.ALL, entry.name


def by_name(name: str) -> suppress.Suppression:
    return next(s for s in suppress.SUPPRESSIONS if s.name == name)


TAG = "registry.example.com/team/trainer:2.21.0-cpu"
DIGEST = "registry.example.com/team/trainer@sha256:" + "ab" * 32


def test_a_task_pulling_a_tag_always():
    # A tag pulled Always: only the digest check is left, the pull-policy ones do not apply.
    assert suppress.checker_annotations(suppress.TASK, [(TAG, "Always")]) == {
        "checkov.io/skip1": "CKV_K8S_43=" + by_name("image by tag").reason,
        "checkov.io/skip2": "CKV_K8S_11=" + by_name("no CPU limit on a training task").reason,
        "kube-score/ignore": "container-resources",
    }


def test_a_digest_pulled_if_not_present_is_suppressed_for_kube_score_only():
    # checkov's CKV_K8S_15 and CKV_K8S_43 pass a digest; kube-score wants Always for any image.
    found = {s.name for s in suppress.suppressions(suppress.TASK, [(DIGEST, "IfNotPresent")])}
    assert found == {"pull policy not Always", "no CPU limit on a training task"}
    assert suppress.suppressions(suppress.STAGE, [(DIGEST, "Always")]) == []


def test_a_tag_pulled_if_not_present_carries_both_pull_policy_entries():
    found = [s.name for s in suppress.suppressions(suppress.MONITOR, [(TAG, "Never")])]
    assert found == [
        "image by tag",
        "pull policy not Always",
        "tag not pulled Always",
        "service-account token mounted",
    ]
    assert "CKV_K8S_15=" in str(suppress.checker_annotations(suppress.MONITOR, [(TAG, "IfNotPresent")]))
    assert "CKV_K8S_15=" not in str(suppress.checker_annotations(suppress.MONITOR, [(TAG, "Always")]))


def test_the_namespace_and_the_uid_are_fixed_not_suppressed():
    # The stack's own namespace (CKV_K8S_21) and a uid/gid above 10000 (CKV_K8S_40, kube-score's
    # container-security-context-user-group-id): docs/checkers.md's "What was changed".
    ids = {check for s in suppress.SUPPRESSIONS for check in (*s.checkov, *s.kube_score)}
    assert not ids & {"CKV_K8S_21", "CKV_K8S_40", "container-security-context-user-group-id"}, ids
    assert suppress.checker_annotations(suppress.OBJECT) == {}
    assert "CKV_K8S_11" not in str(suppress.checker_annotations(suppress.STAGE))


def test_merged_keeps_the_objects_own_annotations():
    assert suppress.merged(None, suppress.OBJECT) is None
    assert suppress.merged({"a": "1"}, suppress.NODE_PORT_SERVICE) == {
        "a": "1",
        "kube-score/ignore": "service-type",
    }


def test_an_unknown_role_is_refused():
    with pytest.raises(ValueError, match="role 'pod': must be one of"):
        suppress.checker_annotations("pod")


@pytest.mark.parametrize("namespace", ["default", "training"])
def test_each_job_carries_its_roles_annotations(dev_config, namespace):
    run = me.run_program({**dev_config, "tf-mnist:namespace": namespace})
    assert run.error is None, run.error
    # The setup Job mounts the volume and runs once, as staging does: staging's suppressions.
    roles = {
        "mnist-stage-data": suppress.STAGE,
        "mnist-monitor": suppress.MONITOR,
        "mnist-setup": suppress.STAGE,
    }
    jobs = run.of_type(JOB)
    assert len(jobs) == 8
    for job in jobs:
        role = roles.get(job.name, suppress.TASK)
        annotations = job.inputs["metadata"]["annotations"]
        containers = job.inputs["spec"]["template"]["spec"]["containers"]
        pulls = [(c["image"], c["imagePullPolicy"]) for c in containers]
        # `pulumi up` ran every tag on its digest (infra/image_pins.py): checkov's digest and
        # pull-policy checks pass, kube-score still asks Always of every image.
        assert [policy for _, policy in pulls] == ["IfNotPresent"] and "@sha256:" in pulls[0][0], job.name
        assert {
            k: v for k, v in annotations.items() if k not in me.own_annotations(job.inputs["metadata"])
        } == suppress.checker_annotations(role, pulls), job.name
        assert "CKV_K8S_15" not in str(annotations) and "CKV_K8S_43" not in str(annotations), job.name
        assert "container-image-pull-policy" in annotations[suppress.KUBE_SCORE_IGNORE], job.name


def test_docs_list_every_suppression_with_its_ids():
    page = (me.REPO / "docs" / "checkers.md").read_text()
    table = page[page.index("## What is suppressed, and why") :]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert set(rows) - {"suppression"} == {s.name for s in suppress.SUPPRESSIONS}
    for entry in suppress.SUPPRESSIONS:
        cells = [c.strip() for c in rows[entry.name].split("|")]
        assert cells[2] == " ".join(entry.checkov) and cells[3] == " ".join(entry.kube_score), entry.name


@pytest.mark.parametrize("secret", [True, False])
def test_only_a_staging_job_reading_a_secret_source_skips_ckv_k8s_35(dev_config, secret):
    # checkov's CKV_K8S_35 (a Secret in an environment variable) is what a --secret data.source
    # makes of the staging Job, and only then; a plain source is in its command.
    source = "https://tf-mnist.oss-cn-hangzhou.aliyuncs.com/datasets/mnist.npz"
    value = me.secret(source + "?OSSAccessKeyId=LTAI5tExample&Signature=bWFkZS11cA%3D") if secret else source
    run = me.run_program({**dev_config, "tf-mnist:data.source": value})
    assert run.error is None, run.error
    staging = run.one(JOB, "mnist-stage-data").inputs
    env = staging["spec"]["template"]["spec"]["containers"][0].get("env") or []
    assert any("valueFrom" in e for e in env) is secret
    skips = [
        v for k, v in staging["metadata"]["annotations"].items() if k.startswith(suppress.CHECKOV_PREFIX)
    ]
    assert any(v.startswith("CKV_K8S_35=") for v in skips) is secret, skips
    tasks = [job for job in run.of_type(JOB) if job.name != "mnist-stage-data"]
    assert tasks and not any("CKV_K8S_35" in str(job.inputs["metadata"]) for job in tasks)
