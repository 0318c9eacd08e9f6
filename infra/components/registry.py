"""PullSecret: the docker-registry Secret every pod pulls its image with, made from
registry credentials kept as Pulumi secrets."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.components.labels import recommended_labels
from infra.registry_digests import RegistryCredentials
from infra.settings import Settings

#: The Pulumi type token of the Secret.
SECRET = "kubernetes:core/v1:Secret"
#: The Secret type kubelet reads image pull credentials from (a ``.dockerconfigjson`` key).
DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"


def registry_login(settings: Settings) -> RegistryCredentials | None:
    """The stack's registry login: registryCredentials.username and .password for
    ``settings.registry_server``; None without both (the rules refuse one alone)."""
    login = settings.registry_credentials
    if not (login.username and login.password):
        return None
    return RegistryCredentials(settings.registry_server, login.username, login.password)


def pull_secret_name(settings: Settings) -> str | None:
    """The docker-registry Secret every pod pulls with: imagePullSecret, or with
    registryCredentials.* ``<namePrefix>-registry``, which the stack creates from
    ``registry_login``; None = the nodes' own credentials."""
    login = settings.registry_credentials
    created = f"{settings.name_prefix}-registry" if login.username or login.password else None
    return settings.image_pull_secret or created


def docker_config_json(credentials: RegistryCredentials) -> str:
    """The ``.dockerconfigjson`` document for one registry (``docker login``'s format).

    ``auth`` is base64("username:password"), which kubelet uses; username and password are
    given beside it as ``kubectl create secret docker-registry`` writes them.
    """
    auth = base64.b64encode(f"{credentials.username}:{credentials.password}".encode()).decode()
    return json.dumps(
        {
            "auths": {
                credentials.server: {
                    "username": credentials.username,
                    "password": credentials.password,
                    "auth": auth,
                }
            }
        },
        separators=(",", ":"),
        sort_keys=True,
    )


@dataclass
class PullSecretArgs:
    """The pull Secret's place and contents.

    Attributes:
        namespace: the pods' namespace (an Output when the stack creates it).
        credentials: the registry login (registryCredentials.*).
        name_prefix: the run's name prefix, for the recommended labels.
    """

    namespace: pulumi.Input[str]
    credentials: RegistryCredentials
    name_prefix: str


class PullSecret(pulumi.ComponentResource):
    """A ``kubernetes.io/dockerconfigjson`` Secret named ``name`` in ``args.namespace``.

    Children: ``secret``. Its ``data`` is a ``pulumi.Output.secret`` from the first moment, so
    the plan, the state and the stack outputs hold only ciphertext (``[secret]`` in a
    preview); the plaintext exists in this process and in the cluster only.

    Outputs:
        name: the Secret's name (pods reference it in imagePullSecrets).
    """

    name: pulumi.Output[str]

    def __init__(self, name: str, args: PullSecretArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:PullSecret", name, None, opts)
        encoded = base64.b64encode(docker_config_json(args.credentials).encode()).decode()
        self.secret = k8s.core.v1.Secret(
            name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=name, namespace=args.namespace, labels=recommended_labels(args.name_prefix, "registry")
            ),
            type=DOCKER_CONFIG_JSON,
            # data (base64), the form the API server stores; stringData is write-only there.
            data=pulumi.Output.secret({".dockerconfigjson": encoded}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = self.secret.metadata.name
        self.register_outputs({"name": self.name})
