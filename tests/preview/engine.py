"""Runs the real Pulumi CLI offline on a throwaway copy of a Pulumi project.

The set-up every preview here uses (see tools/pulumi-toolchain/pulumi-toolchain.sh for where the binaries
come from):

* a local file backend in a temporary directory (``PULUMI_BACKEND_URL=file://...``), so no
  login and no state outside the test;
* the passphrase secrets provider with a throwaway passphrase (not a secret: the state it
  protects is deleted with the temporary directory);
* ``PULUMI_SKIP_UPDATE_CHECK`` and ``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``: nothing is
  downloaded; provider plugins are installed from the toolchain directory into a private
  ``PULUMI_HOME`` with ``pulumi plugin install resource NAME VERSION --file BINARY``, and
  ``PULUMI_IGNORE_AMBIENT_PLUGINS`` stops the CLI from taking any other copy from PATH;
* the project is copied first, so ``pulumi config set`` never edits the committed
  ``Pulumi.<stack>.yaml``.

Nothing here talks to a cloud or a cluster: alicloud's provider gets fake static keys and the
settings under which its configure step does no network I/O (``alicloud_offline_config``), and
Kubernetes previews use a kubeconfig that points at a closed local port, which the kubernetes
provider treats as an unreachable cluster (preview shows the inputs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The binaries tools/pulumi-toolchain/pulumi-toolchain.sh puts in one directory.
TOOLCHAIN_BINARIES = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-kubernetes",
    "pulumi-resource-alicloud",
)

#: Provider plugin versions: exactly the pip SDKs pinned in requirements.txt (the SDK asks the
#: engine for its own version; the toolchain builds that release).
PROVIDER_VERSIONS = {"kubernetes": "4.25.0", "alicloud": "3.95.0"}

#: Passphrase of the throwaway stacks' secrets provider (protects nothing that outlives a test).
TEST_PASSPHRASE = "offline-preview-test-passphrase"

#: Kubeconfig of a cluster that cannot be reached: port 1 on loopback is closed, so the
#: kubernetes provider previews from inputs without any server-side dry run.
UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: unreachable
  context: {cluster: unreachable, user: nobody}
current-context: unreachable
users:
- name: nobody
  user: {token: not-a-credential}
"""


@dataclass(frozen=True)
class Toolchain:
    """Where the engine binaries are, which are missing, and which are known to be blocked.

    ``blocked`` maps a binary name to the message tools/pulumi-toolchain/pulumi-toolchain.sh recorded in
    ``BLOCKED-<name>`` when the Go module proxy refused the module it is built from.
    """

    bin_dir: Path | None
    missing: tuple[str, ...]
    blocked: Mapping[str, str] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return self.bin_dir is not None and name not in self.missing


def find_toolchain(path: str | None = None) -> Toolchain:
    """Locate the toolchain through the ``pulumi`` on PATH (as scripts/test.sh sets it up)."""
    pulumi = shutil.which("pulumi", path=path)
    if pulumi is None:
        return Toolchain(None, TOOLCHAIN_BINARIES)
    bin_dir = Path(pulumi).parent
    missing = tuple(
        name
        for name in TOOLCHAIN_BINARIES
        if not (bin_dir / name).exists() and shutil.which(name, path=path) is None
    )
    blocked = {
        marker.name.removeprefix("BLOCKED-"): marker.read_text().strip()
        for marker in bin_dir.glob("BLOCKED-*")
    }
    return Toolchain(bin_dir, missing, blocked)


def alicloud_vendor_dir(repo: Path) -> Path | None:
    """The vendored pulumi-resource-alicloud sources the toolchain builds from, if present.

    Where tools/pulumi-toolchain/pulumi-toolchain.sh looks: ``$ALICLOUD_PROVIDER_VENDOR_DIR``,
    else ``../shared/vendor/alicloud-provider`` beside the checkout ``repo``. With them there the
    toolchain builds the provider even though the Go module proxy refuses its modules, so a
    ``BLOCKED-pulumi-resource-alicloud`` marker is a stale or broken toolchain, not a refusal.
    """
    named = os.environ.get("ALICLOUD_PROVIDER_VENDOR_DIR")
    vendor = Path(named) if named else repo.parent / "shared" / "vendor" / "alicloud-provider"
    return vendor if (vendor / "SHA256SUMS").is_file() else None


def alicloud_offline_config() -> dict[str, str]:
    """Provider config under which pulumi-resource-alicloud's configure does no network I/O.

    Static keys come from the environment when CI sets them (``ALICLOUD_ACCESS_KEY`` /
    ``ALICLOUD_SECRET_KEY``); otherwise obviously fake ones are used; preview never sends them
    anywhere. ``skipRegionValidation`` avoids the region check, ``accountType`` skips the
    account-type probe and ``accountId`` the caller-identity look-up.
    """
    return {
        "alicloud:accessKey": os.environ.get("ALICLOUD_ACCESS_KEY", "LTAIofflinepreviewfake"),
        "alicloud:secretKey": os.environ.get("ALICLOUD_SECRET_KEY", "offline-preview-fake-secret"),
        "alicloud:region": os.environ.get("ALICLOUD_REGION", "cn-hangzhou"),
        "alicloud:skipRegionValidation": "true",
        "alicloud:accountType": "Domestic",
        "alicloud:accountId": "1234567890123456",
    }


@dataclass
class PreviewResult:
    """One ``pulumi preview --json`` run: exit status, the parsed JSON and the raw streams."""

    returncode: int
    plan: dict[str, Any]
    stdout: str
    stderr: str

    @property
    def steps(self) -> list[dict[str, Any]]:
        return list(self.plan.get("steps", []))

    def resources(self, type_prefix: str = "") -> list[dict[str, Any]]:
        """The planned custom resources (component resources excluded), as their new state."""
        out = []
        for step in self.steps:
            state = step.get("newState") or {}
            rtype = state.get("type", "")
            if (
                state.get("custom")
                and rtype.startswith(type_prefix)
                and not rtype.startswith("pulumi:providers:")
            ):
                out.append(state)
        return out

    def type_counts(self) -> Counter[str]:
        return Counter(r["type"] for r in self.resources())

    def messages(self) -> str:
        """Every diagnostic message and both raw streams, for asserting on error output."""
        diags = "\n".join(d.get("message", "") for d in self.plan.get("diagnostics", []))
        return "\n".join([diags, self.stdout, self.stderr])

    def refused_output(self) -> str:
        """The messages of a preview the program refused before planning anything: it failed,
        printed no traceback (a ConfigError is a RunError) and planned no resource.

        Raises:
            AssertionError: when the preview did any of those.
        """
        assert self.returncode != 0
        output = self.messages()
        assert "Traceback" not in output, output
        assert self.resources() == []
        return output


#: A violation in the text output's "Policies:" section: ``- [mandatory]  NAME  (TYPE: NAME)``.
_VIOLATION = re.compile(r"^\s*- \[(?P<level>[a-z]+)\]\s+(?P<policy>\S+)\s+\((?P<resource>[^)]*)\)\s*$")


@dataclass
class PolicyPreview:
    """One text-mode ``pulumi preview --policy-pack`` run (``--json`` leaves the violations out
    of its document): exit status, the output, and each violation's lines."""

    returncode: int
    output: str

    def violations(self) -> list[dict[str, str]]:
        """``{"level", "policy", "resource", "message"}`` of each violation listed, in order;
        the message is the lines under its heading (the policy's description, then the rule's
        message)."""
        found: list[dict[str, str]] = []
        current: dict[str, str] | None = None
        for line in self.output.splitlines():
            heading = _VIOLATION.match(line)
            if heading:
                current = {**heading.groupdict(), "message": ""}
                found.append(current)
            elif current is not None and line.startswith(" " * 10) and line.strip():
                current["message"] += line.strip() + "\n"
            else:
                current = None
        return found


class PulumiProject:
    """A copy of a Pulumi project in ``workdir``, driven through the real CLI.

    ``policy_packs``: directories every ``preview`` runs with ``--policy-pack``.
    """

    def __init__(
        self,
        source: Path,
        workdir: Path,
        toolchain: Toolchain,
        *,
        include: Iterable[str],
        pulumi_home: Path,
        venv: Path | None = None,
    ) -> None:
        """Copy ``include`` (files and directories relative to ``source``) into ``workdir``.

        ``venv`` is linked into the copy under the same name (Pulumi.yaml's ``virtualenv``
        option is relative to the project), so the copy runs with the project's own packages.
        """
        assert toolchain.bin_dir is not None
        self.dir = workdir / "project"
        self.toolchain = toolchain
        self.dir.mkdir(parents=True)
        self.policy_packs: list[Path] = []
        # trainer/data/ travels too: a stack without images of its own sends its sample to the
        # cluster as ConfigMaps (infra/components/setup.py).
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        for name in include:
            src = source / name
            if src.is_dir():
                shutil.copytree(src, self.dir / name, ignore=ignore)
            elif src.exists():
                shutil.copy2(src, self.dir / name)
        if venv is not None:
            (self.dir / venv.name).symlink_to(venv)
        state = workdir / "state"
        state.mkdir()
        self.env = {
            **os.environ,
            "PATH": f"{toolchain.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PULUMI_HOME": str(pulumi_home),
            "PULUMI_BACKEND_URL": state.as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": TEST_PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            "PULUMI_LANGUAGE_HOST_PYTHON": str(venv / "bin" / "python") if venv else "python3",
            "NO_COLOR": "1",
        }
        self.env.pop("PULUMI_ACCESS_TOKEN", None)
        self.env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)

    def pulumi(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """Run the CLI in the project copy; raise with both streams when ``check`` and it fails."""
        proc = subprocess.run(
            [str(self.toolchain.bin_dir / "pulumi"), *args, "--non-interactive"],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"pulumi {' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
            )
        return proc

    def init_stack(self, stack: str) -> None:
        """Create ``stack`` in the file backend with the passphrase secrets provider."""
        self.pulumi("stack", "init", stack, "--secrets-provider", "passphrase")

    def set_config(self, key: str, value: str, *, path: bool = False, secret: bool = False) -> None:
        args = ["config", "set", key, value]
        if path:
            args.append("--path")
        if secret:
            args.append("--secret")
        self.pulumi(*args)

    def preview(self, timeout: float = 600) -> PreviewResult:
        """``pulumi preview --json``; the JSON document is parsed even when the preview fails."""
        packs = [arg for pack in self.policy_packs for arg in ("--policy-pack", str(pack))]
        proc = self.pulumi("preview", "--json", *packs, check=False, timeout=timeout)
        try:
            plan = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except json.JSONDecodeError:
            plan = {}
        return PreviewResult(proc.returncode, plan, proc.stdout, proc.stderr)

    def policy_preview(self, pack: Path, timeout: float = 600) -> PolicyPreview:
        """``pulumi preview --policy-pack PACK`` in text mode, for the violations it lists."""
        proc = self.pulumi("preview", "--policy-pack", str(pack), check=False, timeout=timeout)
        return PolicyPreview(proc.returncode, proc.stdout + proc.stderr)


def install_plugins(toolchain: Toolchain, pulumi_home: Path, names: Iterable[str]) -> None:
    """Install provider plugins from the toolchain directory into ``pulumi_home`` (no download)."""
    assert toolchain.bin_dir is not None
    env = {**os.environ, "PULUMI_HOME": str(pulumi_home), "PULUMI_SKIP_UPDATE_CHECK": "true"}
    for name in names:
        binary = toolchain.bin_dir / f"pulumi-resource-{name}"
        subprocess.run(
            [
                str(toolchain.bin_dir / "pulumi"),
                "plugin",
                "install",
                "resource",
                name,
                PROVIDER_VERSIONS[name],
                "--file",
                str(binary),
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
