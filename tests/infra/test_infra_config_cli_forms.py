"""Configuration as the Pulumi CLI stores it: a key set both flat and with --path, values set
with --secret, and keys the program does not know; each reported before any resource is
registered, a secret never with its value."""

from __future__ import annotations

import json

import mock_engine as me

HEADER_1 = "1 invalid configuration value; nothing was deployed:"


# --- one key set both flat and with --path ---------------------------------------------------


def test_a_key_set_both_ways_to_different_values_is_rejected(dev_config):
    # `pulumi config set worker.number 4` then `pulumi config set --path worker.number 6`:
    # the flat value would win, silently dropping the user's latest command.
    worker = json.loads(dev_config["tf-mnist:worker"])
    worker["number"] = 6
    run = me.run_program({**dev_config, "tf-mnist:worker": json.dumps(worker), "tf-mnist:worker.number": "4"})
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:worker.number' is set twice, to '4' (flat) and to '6' (--path): "
            "a key must be set one way only.",
            "    fix: pulumi config rm worker.number (keeps '6'), or pulumi config rm --path worker.number (keeps '4')",
        ]
    )
    assert run.registrations == []


def test_a_key_set_both_ways_to_the_same_value_is_accepted(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:worker.number": "2", "tf-mnist:ps.number": 2})
    assert run.error is None


def test_a_bad_structured_value_beside_a_flat_one_is_reported_once_as_the_conflict(dev_config):
    labels = json.loads(dev_config["tf-mnist:persistence"])
    labels["pvc"]["matchLabels"] = {}
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:persistence": json.dumps(labels),
            "tf-mnist:persistence.pvc.matchLabels": '{"team":"ml"}',
        }
    )
    assert str(run.error).splitlines()[1:] == [
        "Configuration 'tf-mnist:persistence.pvc.matchLabels' is set twice, to '{\"team\":\"ml\"}' (flat) "
        "and to '{}' (--path): a key must be set one way only.",
        "    fix: pulumi config rm persistence.pvc.matchLabels (keeps '{}'), "
        'or pulumi config rm --path persistence.pvc.matchLabels (keeps \'{"team":"ml"}\')',
    ]


# --- secret config values (`pulumi config set --secret`) -------------------------------------
# The program reads config with Config.get, which returns a secret's plaintext: before these
# checks a secret nas.mountTargetDomain went into the PV and the mountTargetDomain output in
# plain text (real `pulumi preview --json`), and a bad secret value was printed back.

KUBECONFIG_MODE = {
    "tf-mnist:kubeconfig": "/home/me/.kube/config",
    "tf-mnist:clusterIdentifier": "existing",
    "tf-mnist:nas.mountTargetDomain": "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com",
}


def test_a_secret_mount_target_stays_secret_in_the_pv_and_the_outputs(dev_config):
    run = me.run_program({**dev_config, **KUBECONFIG_MODE}, secret_keys=("tf-mnist:nas.mountTargetDomain",))
    assert run.error is None
    (pv,) = run.of_type("kubernetes:core/v1:PersistentVolume")
    spec = pv.inputs["spec"]  # the SDK marks the whole input object that holds the secret
    assert me.is_secret_value(spec), spec
    assert (
        spec["value"]["csi"]["volumeAttributes"]["server"] == "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com"
    )
    assert run.secret_outputs["mountTargetDomain"] is True


def test_a_plain_mount_target_stays_plain(dev_config):
    run = me.run_program({**dev_config, **KUBECONFIG_MODE})
    (pv,) = run.of_type("kubernetes:core/v1:PersistentVolume")
    assert (
        pv.inputs["spec"]["csi"]["volumeAttributes"]["server"]
        == "0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com"
    )
    assert run.secret_outputs["mountTargetDomain"] is False


def test_a_secret_that_would_go_into_specs_in_plain_text_is_rejected_without_its_value(dev_config):
    run = me.run_program(
        {**dev_config, "tf-mnist:worker.memory": "9Gi"}, secret_keys=("tf-mnist:worker.memory",)
    )
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:worker.memory' is a secret: the stack writes this value into Kubernetes "
            "objects and stack outputs in plain text, so it cannot stay secret "
            "(only kubeconfig, nas.mountTargetDomain, nfs.*, data.source and registryCredentials.* can).",
            "    fix: pulumi config set worker.memory <value> (again, without --secret)",
        ]
    )
    assert "9Gi" not in str(run.error)
    assert run.registrations == []


def test_a_structured_secret_is_reported_once_for_its_top_level_key(dev_config):
    # `pulumi config set --secret --path worker.memory 9Gi`: the CLI marks all of tf-mnist:worker.
    worker = {**json.loads(dev_config["tf-mnist:worker"]), "memory": "9Gi"}
    run = me.run_program(
        {**dev_config, "tf-mnist:worker": json.dumps(worker)}, secret_keys=("tf-mnist:worker",)
    )
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:worker' holds a secret: the stack writes worker.* values into Kubernetes "
            "objects and stack outputs in plain text, so they cannot stay secret "
            "(only kubeconfig, nas.mountTargetDomain, nfs.*, data.source and registryCredentials.* can).",
            "    fix: pulumi config set --path worker.<key> <value> (again, without --secret)",
        ]
    )


def test_a_bad_secret_value_is_never_printed(dev_config):
    run = me.run_program(
        {**dev_config, **KUBECONFIG_MODE, "tf-mnist:nas.path": "relative/s3cr3t"},
        secret_keys=("tf-mnist:nas.path",),
    )
    assert "s3cr3t" not in str(run.error)
    assert "Configuration 'tf-mnist:nas.path' value '[secret]' is invalid: must be an absolute path" in str(
        run.error
    )


# --- keys the program does not know ----------------------------------------------------------
# A typo (`pulumi config set worker.numbr 4`) used to be ignored: the preview showed the
# default 2 workers and no word about the key (real CLI).


def test_an_unknown_flat_key_is_reported_with_the_key_it_resembles(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:worker.numbr": "4", "alicloud:profile": "default"})
    assert str(run.error) == "\n".join(
        [
            HEADER_1,
            "Configuration 'tf-mnist:worker.numbr' value '4' is not a setting of this stack (did you mean "
            "worker.number?): the program would ignore it.",
            "    fix: pulumi config rm worker.numbr",
        ]
    )
    assert run.registrations == []


def test_an_unknown_structured_key_is_reported_by_its_path(dev_config):
    persistence = json.loads(dev_config["tf-mnist:persistence"])
    persistence["pvc"]["size"] = "5Gi"
    run = me.run_program(
        {**dev_config, "tf-mnist:workers": '{"number": 8}', "tf-mnist:persistence": json.dumps(persistence)}
    )
    assert str(run.error).splitlines()[1:] == [  # in key order
        "Configuration 'tf-mnist:persistence.pvc.size' value '5Gi' is not a setting of this stack (did you "
        "mean persistence.pvc.storage?): the program would ignore it.",
        "    fix: pulumi config rm --path persistence.pvc.size",
        "Configuration 'tf-mnist:workers' value '{\"number\": 8}' is not a setting of this stack (did you mean "
        "worker?): the program would ignore it.",
        "    fix: pulumi config rm workers",
    ]


def test_an_unknown_secret_key_is_reported_without_its_value(dev_config):
    run = me.run_program({**dev_config, "tf-mnist:apiKey": "s3cr3t"}, secret_keys=("tf-mnist:apiKey",))
    assert "s3cr3t" not in str(run.error)
    assert "Configuration 'tf-mnist:apiKey' value '[secret]' is not a setting of this stack" in str(run.error)


def test_label_maps_and_known_objects_are_not_unknown_keys(dev_config):
    persistence = json.loads(dev_config["tf-mnist:persistence"])
    persistence["pvc"]["matchLabels"] = {"train": "mnist", "team": "ml"}
    run = me.run_program(
        {
            **dev_config,
            "tf-mnist:persistence": json.dumps(persistence),
            "tf-mnist:gpuPool.instanceTypes": '["ecs.gn5-c8g1.2xlarge"]',
        }
    )
    assert run.error is None
