"""The pull-request workflow (.github/workflows/preview.yml) and the rules its preview job keeps.

The preview job runs `pulumi preview` on a live stack with real credentials, so these are the
properties a careless edit would break without any run failing: one operation per stack at a
time, secrets only in the steps that use them, nothing installed that a preview does not run,
provider plugins at the SDK pins, the policy pack run with the preview, the test job running
the engine and checker tests, and a state-backend example that the pinned CLI accepts.
tests/test_workflow_oidc.py has the OIDC credentials' rules.
"""

from __future__ import annotations

import os
import re
import shlex
import socketserver
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from _pytest.mark.expression import Expression  # pytest's own -m parser (not re-exported)

from tests.preview.engine import find_toolchain

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "preview.yml"

#: A `secrets` context reference in an expression (`secrets.NAME` or `secrets['NAME']`).
SECRET_REF = re.compile(r"\bsecrets\s*[.\[]")

#: Query parameters an s3:// backend URL may carry with Pulumi CLI 3.274 (gocloud.dev v0.46,
#: AWS SDK v2): those blob/s3blob's URLOpener takes, those aws.V2ConfigFromURLParams takes
#: (any other is "unknown query parameter"), and disableSSL, which the CLI's own
#: translateLegacyS3Params rewrites to disable_https.
S3_BACKEND_PARAMS = frozenset(
    {
        "ssetype",
        "kmskeyid",
        "accelerate",
        "use_path_style",
        "s3ForcePathStyle",
        "disable_https",
        "region",
        "endpoint",
        "profile",
        "hostname_immutable",
        "dualstack",
        "fips",
        "rate_limiter_capacity",
        "anonymous",
        "role",
        "request_checksum_calculation",
        "response_checksum_validation",
        "awssdk",
        "disableSSL",
    }
)

#: What the preview job must not run: the test suite and its tools, or a Go build.
NOT_FOR_PREVIEW = re.compile(
    r"pytest|scripts/test\.sh|hypothesis|tensorflow|pulumi-toolchain|\bgo (build|install|run|test)\b"
    r"|pip install[^\n]*-r\s+requirements\.txt"
)


def _workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _pins(path: Path = REPO / "requirements.txt") -> dict[str, str]:
    """``{name: version}`` of every ``name==version`` line in a requirements file."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def _strings(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Every string in the parsed workflow, with its path of keys and list indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, path + (index,))
    elif isinstance(node, str):
        yield path, node


def _step(job: dict[str, Any], *, uses: str = "", name: str = "", with_command: str = "") -> dict[str, Any]:
    for step in job.get("steps", []):
        if uses and not step.get("uses", "").startswith(uses):
            continue
        if name and step.get("name") != name:
            continue
        if with_command and (step.get("with") or {}).get("command") != with_command:
            continue
        return step
    raise AssertionError(f"no step with uses={uses!r} name={name!r} command={with_command!r} in the job")


def _preview_job() -> dict[str, Any]:
    return _workflow()["jobs"]["preview"]


def test_preview_job_runs_one_operation_per_stack():
    job = _preview_job()
    stacks = job.get("strategy", {}).get("matrix", {}).get("stack")
    assert stacks == ["dev"], f"the preview job's matrix of stacks is {stacks!r}, expected ['dev']"
    for stack in stacks:
        assert (REPO / f"Pulumi.{stack}.yaml").is_file(), f"stack {stack!r} has no Pulumi.{stack}.yaml"
    concurrency = job.get("concurrency")
    assert isinstance(concurrency, dict), f"the preview job has no concurrency group: {concurrency!r}"
    assert "${{ matrix.stack }}" in concurrency.get("group", ""), (
        f"the concurrency group {concurrency.get('group')!r} is not keyed by the stack"
    )
    assert concurrency.get("cancel-in-progress") is False, (
        "cancel-in-progress must be false: a cancelled operation leaves the stack locked or pending"
    )
    preview = _step(job, uses="pulumi/actions", with_command="preview")
    assert preview["with"]["stack-name"] == "${{ matrix.stack }}", (
        "the previewed stack is not the one the concurrency group is keyed by"
    )


def test_no_environment_above_a_step_holds_secrets():
    wf = _workflow()
    holders = [("env", wf.get("env") or {})]
    holders += [(f"jobs.{name}.env", job.get("env") or {}) for name, job in wf["jobs"].items()]
    leaks = [
        f"{where}.{key}"
        for where, env in holders
        for key, value in env.items()
        if SECRET_REF.search(str(value))
    ]
    assert leaks == [], f"secrets in a workflow- or job-level env reach every step: {leaks}"


def test_every_secret_reference_is_in_a_step_env_or_with():
    misplaced = []
    found = 0
    for path, value in _strings(_workflow()):
        if not SECRET_REF.search(value):
            continue
        found += 1
        in_step = len(path) == 6 and path[0] == "jobs" and path[2] == "steps" and path[4] in ("env", "with")
        if not in_step:
            misplaced.append(".".join(map(str, path)))
    assert found > 0, "the workflow references no secrets at all: the preview cannot log in"
    assert misplaced == [], f"secrets referenced outside a step's env or with: {misplaced}"


#: What the credentials check may be given: whether a secret or variable is set, and whether the
#: pull request comes from this repository (a fork's run gets no secrets and no OIDC token).
_PRESENCE_TERM = r"(?:(?:secrets|vars)\.\w+ != ''|github\.event\.pull_request\.head\.repo\.full_name == github\.repository)"
PRESENCE = re.compile(rf"\$\{{\{{\s*{_PRESENCE_TERM}(?:\s*(?:&&|\|\|)\s*{_PRESENCE_TERM})*\s*\}}\}}")


def test_credentials_check_sees_only_whether_secrets_are_set():
    job = _preview_job()
    check = next((s for s in job["steps"] if s.get("id") == "creds"), None)
    assert check is not None, "the preview job has no credentials check step (id: creds)"
    env = check.get("env") or {}
    assert env, "the credentials check step gets nothing to check"
    exposed = {key: value for key, value in env.items() if not PRESENCE.fullmatch(str(value))}
    assert exposed == {}, f"the credentials check step gets secret values, not their presence: {exposed}"


@pytest.mark.parametrize(
    "value, allowed",
    [
        ("${{ secrets.A != '' && secrets.B != '' }}", True),
        ("${{ vars.A != '' && github.event.pull_request.head.repo.full_name == github.repository }}", True),
        ("${{ secrets.A }}", False),
        ("${{ secrets.A != '' && secrets.B }}", False),
        ("${{ vars.A == 'x' }}", False),
        ("${{ secrets.A != '' || format('{0}', secrets.B) != '' }}", False),
    ],
)
def test_presence_pattern_lets_no_value_through(value: str, allowed: bool):
    assert bool(PRESENCE.fullmatch(value)) is allowed


def test_preview_job_installs_only_what_a_preview_runs():
    job = _preview_job()
    for index, step in enumerate(job["steps"]):
        uses = step.get("uses", "")
        assert not uses.startswith("actions/setup-go"), f"preview step {index} sets up Go"
        text = f"{uses}\n{step.get('run', '')}"
        found = NOT_FOR_PREVIEW.search(text)
        assert found is None, f"preview step {index} ({step.get('name') or uses}) runs {found.group(0)!r}"


def test_preview_job_installs_exactly_the_pulumi_sdk_and_policy_pins(tmp_path: Path):
    """The SDK install's selection line, run here against requirements.txt, picks the three SDK
    pins and pulumi-policy's, which the policy pack runs on."""
    step = _step(_preview_job(), name="Install the Pulumi SDKs")
    selection = [line for line in step["run"].splitlines() if line.strip().startswith("grep ")]
    assert len(selection) == 1, f"expected one grep line selecting the pins, found {selection}"
    subprocess.run(["bash", "-euc", selection[0]], cwd=REPO, check=True, env={"RUNNER_TEMP": str(tmp_path)})
    written = list(tmp_path.iterdir())
    assert len(written) == 1, f"the selection wrote {written}"
    chosen = _pins(written[0])
    pins = _pins()
    want = {name: pins[name] for name in ("pulumi", "pulumi-alicloud", "pulumi-kubernetes", "pulumi-policy")}
    assert chosen == want, f"the preview job installs {chosen}, expected the SDK and policy pins {want}"


def _policy_packs(step: dict[str, Any]) -> list[str]:
    """The policy pack paths of a pulumi/actions step, split as the action splits its
    ``policyPacks`` input (pulumi/actions v6 src/config.ts: one a line, or separated by ``;``)."""
    text = str((step.get("with") or {}).get("policyPacks") or "")
    return [part.strip() for line in text.splitlines() for part in line.split(";") if part.strip()]


def test_preview_runs_the_policy_pack_in_the_venv_it_installs():
    job = _preview_job()
    preview = _step(job, uses="pulumi/actions", with_command="preview")
    assert _policy_packs(preview) == ["policy"], (
        f"the preview runs the policy packs {_policy_packs(preview)}, expected the directory ['policy']"
    )
    pack = yaml.safe_load((REPO / "policy" / "PulumiPolicy.yaml").read_text())
    # The pack runs in the virtualenv its PulumiPolicy.yaml names, relative to policy/: the
    # repository's .venv, the one the SDK step creates.
    assert (REPO / "policy" / pack["runtime"]["options"]["virtualenv"]).resolve() == REPO / ".venv"
    install = _step(job, name="Install the Pulumi SDKs")
    assert "python -m venv .venv" in install["run"]
    steps = job["steps"]
    assert steps.index(install) < steps.index(preview), "the preview runs before the pack's venv exists"
    assert (install.get("if"), preview.get("if")) == ("steps.creds.outputs.present == 'true'",) * 2


def _marker_expression(run: str) -> str:
    """The ``-m`` expression of a ``bash scripts/test.sh ...`` command line."""
    argv = shlex.split(run)
    assert argv[:2] == ["bash", "scripts/test.sh"], f"the test job runs {argv}, not scripts/test.sh"
    values = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m"]
    values += [arg[2:] for arg in argv if arg.startswith("-m") and arg != "-m"]
    assert len(values) == 1, f"expected one -m marker expression in {argv}"
    return values[0]


def _selects(expression: str, *markers: str) -> bool:
    """Whether pytest's ``-m expression`` selects a test carrying exactly ``markers``."""
    return Expression.compile(expression).evaluate(lambda name, **_: name in markers)


def test_test_job_runs_the_engine_and_checker_tests():
    """The marker expression, evaluated as pytest does, selects the engine and checkers tests
    (scripts/test.sh then builds both and requires them) and leaves the cluster tests out."""
    job = _workflow()["jobs"]["test"]
    tests = _step(job, name="Tests")
    expression = _marker_expression(tests["run"])
    declared = {m.split(":")[0] for m in _pyproject()["tool"]["pytest"]["ini_options"]["markers"]}
    assert {"engine", "checkers", "cluster"} <= declared
    for markers in [(), ("engine",), ("checkers",), ("slow",), ("engine", "slow")]:
        assert _selects(expression, *markers), f"-m {expression!r} leaves out tests marked {markers}"
    for markers in [("cluster",), ("cluster", "engine")]:
        assert not _selects(expression, *markers), f"-m {expression!r} selects tests marked {markers}"
    # kube-score, a checker, is built with `go install` (tools/checkers/checkers.sh).
    steps = job["steps"]
    go = _step(job, uses="actions/setup-go")
    assert steps.index(go) < steps.index(tests), "the tests run before Go is set up for the checkers"


@pytest.mark.parametrize(
    "expression, markers, selected",
    [
        ("not cluster", ("checkers",), True),
        ("not cluster and not checkers", ("checkers",), False),
        ("not engine", ("engine",), False),
        ("engine or checkers", (), False),
    ],
)
def test_marker_evaluation_is_pytests(expression: str, markers: tuple[str, ...], selected: bool):
    assert _selects(expression, *markers) is selected


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_provider_plugins_are_the_sdk_pins():
    wf = _workflow()
    pins = _pins()
    env = wf["env"]
    assert env["PULUMI_ALICLOUD_VERSION"] == pins["pulumi-alicloud"]
    assert env["PULUMI_KUBERNETES_VERSION"] == pins["pulumi-kubernetes"]
    toolchain = (REPO / "tools" / "pulumi-toolchain" / "pulumi-toolchain.sh").read_text()
    cli = re.search(r"^PULUMI_CLI_VERSION=(\S+)", toolchain, re.M).group(1)
    assert env["PULUMI_VERSION"] == cli, (
        f"the workflow's CLI {env['PULUMI_VERSION']} is not the toolchain's {cli}"
    )
    for name in ("test", "preview"):
        steps = wf["jobs"][name]["steps"]
        runs = [step.get("run", "") for step in steps]
        for plugin, var in (
            ("alicloud", "PULUMI_ALICLOUD_VERSION"),
            ("kubernetes", "PULUMI_KUBERNETES_VERSION"),
        ):
            line = f'pulumi plugin install resource {plugin} "${var}"'
            assert any(line in run for run in runs), f"job {name} does not run `{line}`"
    preview_steps = wf["jobs"]["preview"]["steps"]
    install = next(i for i, s in enumerate(preview_steps) if "pulumi plugin install" in s.get("run", ""))
    preview = preview_steps.index(_step(wf["jobs"]["preview"], uses="pulumi/actions", with_command="preview"))
    assert install < preview, "the preview runs before the pinned plugins are installed"


def _backend_examples(text: str) -> set[str]:
    return {match.rstrip(".,;)") for match in re.findall(r"s3://[^\s'\"`]+", text)}


def _backend_problems(example: str, region: str) -> list[str]:
    """What is wrong with an OSS state backend URL for the pinned CLI; [] when nothing is."""
    url = urlsplit(example)
    if url.scheme != "s3":
        return [f"scheme {url.scheme!r}: Pulumi reaches OSS through its S3 backend (s3://)"]
    problems = []
    if url.netloc != "<bucket>":
        problems.append(f"bucket {url.netloc!r} is not the placeholder <bucket>")
    query = parse_qs(url.query)
    unknown = sorted(set(query) - S3_BACKEND_PARAMS)
    if unknown:
        problems.append(f"the CLI's S3 backend rejects the parameters {unknown}")
    if query.get("region") != [region]:
        problems.append(f"region {query.get('region')} is not the dev stack's {region}")
    endpoint = query.get("endpoint", [""])[0]
    if endpoint != f"s3.oss-{region}.aliyuncs.com":
        problems.append(f"endpoint {endpoint!r} is not OSS's S3-compatible endpoint of {region}")
    # OSS serves virtual-hosted-style requests only (the bucket in the host name).
    if query.get("s3ForcePathStyle", []) + query.get("use_path_style", []) not in ([], ["false"]):
        problems.append("path-style requests, which OSS refuses")
    return problems


def test_oss_state_backend_example_is_one_the_cli_accepts():
    examples = _backend_examples(WORKFLOW.read_text())
    assert len(examples) == 1, (
        f"expected one s3:// (OSS) state backend example in the workflow, found {examples}"
    )
    example = examples.pop()
    region = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]["alicloud:region"]
    assert _backend_problems(example, region) == [], example
    assert example in (REPO / "docs" / "deploying.md").read_text(), (
        f"docs/deploying.md does not give the same example {example}"
    )


@pytest.mark.parametrize(
    "example, problem",
    [
        ("oss://<bucket>", "scheme 'oss'"),
        ("s3://<bucket>?endpoint=oss-cn-hangzhou.aliyuncs.com&region=cn-hangzhou", "endpoint"),
        (
            "s3://<bucket>?endpoint=s3.oss-cn-hangzhou.aliyuncs.com&region=cn-hangzhou&s3ForcePathStyle=true",
            "path-style",
        ),
        (
            "s3://<bucket>?endpoint=s3.oss-cn-hangzhou.aliyuncs.com&region=cn-hangzhou&forcePathStyle=false",
            "rejects the parameters ['forcePathStyle']",
        ),
        ("s3://<bucket>?endpoint=s3.oss-cn-hangzhou.aliyuncs.com", "region None"),
    ],
)
def test_backend_check_finds_each_mistake(example: str, problem: str):
    problems = _backend_problems(example, "cn-hangzhou")
    assert len(problems) == 1 and problem in problems[0], problems


class _ConnectRecorder(socketserver.ThreadingTCPServer):
    """An HTTP proxy on 127.0.0.1 that notes each CONNECT target and refuses it (403)."""

    daemon_threads = True

    def __init__(self) -> None:
        self.targets: list[str] = []
        super().__init__(("127.0.0.1", 0), self._Handler)

    class _Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(10)
            request_line = self.rfile.readline(8192).decode("latin-1").split()
            while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                pass
            if len(request_line) >= 2:
                self.server.targets.append(f"{request_line[0]} {request_line[1]}")
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def _hosts_the_cli_contacts(pulumi: Path, backend_url: str, workdir: Path) -> tuple[list[str], str]:
    """``pulumi login URL`` behind a refusing proxy: the requests it tried, and its output.

    The S3 client gets fake keys and no config file or metadata service; the proxy refuses
    every request (the SDK retries three times, a few seconds), so nothing leaves this machine.
    A CONNECT target is the host and port of an https request; a plain-http request shows as
    its method and full URL.
    """
    proxy = _ConnectRecorder()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(workdir),
            "PULUMI_HOME": str(workdir / "pulumi-home"),
            "PULUMI_SKIP_UPDATE_CHECK": "1",
            "HTTPS_PROXY": proxy_url,
            "HTTP_PROXY": proxy_url,
            "NO_PROXY": "",
            "AWS_ACCESS_KEY_ID": "LTAIworkflowtestfake",
            "AWS_SECRET_ACCESS_KEY": "workflow-test-fake",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": str(workdir / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "none"),
        }
        proc = subprocess.run(
            [str(pulumi), "login", backend_url, "--non-interactive"],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
        )
    finally:
        proxy.shutdown()
        proxy.server_close()
    return proxy.targets, proc.stdout + proc.stderr


@pytest.mark.engine
def test_pinned_cli_sends_the_oss_example_to_the_bucket_host(tmp_path: Path):
    """The example reaches https://<bucket>.s3.oss-<region>.aliyuncs.com (virtual-hosted, TLS).

    Run with the CLI the workflow pins, whose S3 backend is the one that parses the URL.
    """
    found = find_toolchain()
    if found.bin_dir is None or "pulumi" in found.missing:
        message = "the Pulumi CLI is not on PATH (run `bash tools/pulumi-toolchain/pulumi-toolchain.sh`)"
        if os.environ.get("REQUIRE_PULUMI_ENGINE") == "1":
            pytest.fail(message + "; REQUIRE_PULUMI_ENGINE=1")
        pytest.skip(message)
    examples = _backend_examples(WORKFLOW.read_text())
    assert len(examples) == 1, (
        f"expected one s3:// (OSS) state backend example in the workflow, found {examples}"
    )
    example = examples.pop()
    bucket = "tf-mnist-state"
    targets, output = _hosts_the_cli_contacts(
        found.bin_dir / "pulumi", example.replace("<bucket>", bucket), tmp_path
    )
    region = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]["alicloud:region"]
    oss = [target for target in targets if "aliyuncs.com" in target]
    assert oss and set(oss) == {f"CONNECT {bucket}.s3.oss-{region}.aliyuncs.com:443"}, (
        f"pulumi login {example} tried {targets}\n{output}"
    )
