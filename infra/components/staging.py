"""What the data staging Job runs: its command, and the data source it reads from a Secret.

A data.source set with ``--secret`` (a presigned URL: infra/settings/url_credentials.py) never
enters the Job's command, which ``kubectl get job -o yaml`` shows and the state stores in plain
text: the stack writes it into the Secret ``<prefix>-data-source`` (a Pulumi secret, so the
state holds it encrypted), and the staging container reads it from the environment variable
SOURCES_ENV (``python -m trainer.stage --sources_env``). A plain data.source stays in the
command, as before, so its staging Job does not change.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from infra.settings.parsers import source_list

#: The environment variable that holds the sources as a JSON list of strings.
SOURCES_ENV = "DATA_SOURCES"
#: The Secret's key that holds them.
SOURCES_KEY = "sources"
SECRET = "kubernetes:core/v1:Secret"


def source_secret_name(name: str) -> str:
    """The data source Secret's name: ``<name>-data-source``."""
    return f"{name}-data-source"


def stage_command(data_dir: str, source: str | tuple[str, ...] | None, volume_hint: str = "",
                  from_secret: bool = False) -> list[str]:
    """The staging Job's command: ``python -m trainer.stage --dest DIR``, with one ``--source``
    per URL of a list, the one source, or none (the sample in the image), or, ``from_secret``,
    ``--sources_env DATA_SOURCES`` instead of them; and ``--volume_hint`` when given (the end of
    its error on a volume it cannot write)."""
    sources = ["--sources_env", SOURCES_ENV] if from_secret else [a for s in source_list(source) for a in ("--source", s)]
    hint = ["--volume_hint", volume_hint] if volume_hint else []
    return ["python", "-m", "trainer.stage", "--dest", data_dir, *sources, *hint]


def source_secret(name: str, source: str | tuple[str, ...], metadata: k8s.meta.v1.ObjectMetaArgs,
                  parent: pulumi.Resource) -> k8s.core.v1.Secret:
    """The Secret ``metadata`` names, holding ``source`` under SOURCES_KEY as a JSON list, its
    value a Pulumi secret (encrypted in the state, hidden in the preview)."""
    return k8s.core.v1.Secret(
        name, metadata=metadata, type="Opaque",
        string_data=pulumi.Output.secret({SOURCES_KEY: json.dumps(source_list(source))}),
        opts=pulumi.ResourceOptions(parent=parent))


def source_env(secret_name: str) -> list[k8s.core.v1.EnvVarArgs]:
    """SOURCES_ENV from the SOURCES_KEY of the Secret ``secret_name`` (a plain name: the pod
    template holds no Output)."""
    return [k8s.core.v1.EnvVarArgs(name=SOURCES_ENV, value_from=k8s.core.v1.EnvVarSourceArgs(
        secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret_name, key=SOURCES_KEY)))]
