"""A Pulumi language host for Python programs, used where the Go one cannot be built.

Why this exists: the Go language host (module
github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is never tagged and the Go
module proxy reachable from our build machines refuses every version of it (403 "This module
version is not available"), so tools/pulumi-toolchain/pulumi-toolchain.sh cannot build it. Users with a real
Pulumi install never run this file: their CLI ships the Go host.

What it does: it serves Pulumi's LanguageRuntime gRPC service (stubs from the Python SDK,
pulumi.runtime.proto) the way the Go host's Run does: it starts
`<python> -u pulumi-language-python-exec --monitor ... --engine ... --project ... --stack ...
--pwd ... --dry_run ... --parallel ... [--organization ...] <entry point> [args]` with
PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS set to the JSON of the request's config. The exec
script is the SDK's own (copied from the sdk/v3 module of the release the Python SDK is pinned
to), so the program, its imports under `main:`, RunError handling (exit code 32 = message
already shown, no traceback) and the resource monitor calls are the real ones. `<python>` is
the program's virtualenv (Pulumi.yaml runtime option `virtualenv`, relative to the project root)
or `python3` on PATH.

Policy packs (`pulumi preview --policy-pack DIR` with PulumiPolicy.yaml `runtime: python`): the
CLI (v3.274.0) starts them through this host's RunPlugin, kind "analyzer", as the Go host does:
`<python> -u -m pulumi.policy ENGINE DIR` in DIR, where `<python>` is the pack's `virtualenv`
runtime option (relative to DIR) or `python3`; the pack's stdout and stderr stream back to the
CLI, which reads the analyzer's port from its first stdout line.

Protocol (as pulumi's plugin loader expects): started as `pulumi-language-python [ENGINE]`,
it prints the port it listens on as the first stdout line, then serves until the CLI kills it.
Out of scope (answer UNIMPLEMENTED): debugging, typecheckers, poetry/uv toolchains,
InstallDependencies, code generation, packing and linking, RunPlugin of any other plugin kind.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

#: Exit code the exec script uses after it has shown the user an actionable message (a
#: RunError); the Go host answers Bail so the CLI prints no second error. Source:
#: pulumi-language-python-exec, PYTHON_PROCESS_EXITED_AFTER_SHOWING_USER_ACTIONABLE_MESSAGE_CODE.
EXIT_AFTER_USER_MESSAGE = 32

HERE = Path(__file__).resolve().parent


def _plugin_version() -> str:
    """The version this host reports: the pulumi SDK release its exec script comes from."""
    stamp = HERE / "pulumi-language-python.version"
    return stamp.read_text().strip() if stamp.exists() else "0.0.0"


def _options(info: language_pb2.ProgramInfo) -> dict[str, Any]:
    """Runtime options from Pulumi.yaml (`runtime.options`), as the engine forwards them."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(info.options) if info.HasField("options") else {}


def resolve_python(info: language_pb2.ProgramInfo) -> tuple[str, dict[str, str]]:
    """Pick the interpreter that runs the program and the environment additions it needs.

    Returns (python executable, env additions). A `virtualenv` option is taken relative to the
    project root (as the Go host does); a missing virtualenv is an error naming the path,
    because silently running the system Python would import the wrong SDK.
    """
    venv = _options(info).get("virtualenv")
    if not venv:
        return os.environ.get("PULUMI_PYTHON_CMD", "python3"), {}
    venv_dir = Path(venv)
    if not venv_dir.is_absolute():
        venv_dir = Path(info.root_directory) / venv_dir
    python = venv_dir / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(
            f"The virtual environment {venv_dir} (Pulumi.yaml runtime option virtualenv={venv!r}) "
            f"has no bin/python; create it and install requirements.txt"
        )
    path = f"{venv_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return str(python), {"VIRTUAL_ENV": str(venv_dir), "PATH": path}


def plugin_command(request: language_pb2.RunPluginRequest) -> tuple[list[str], dict[str, str], str]:
    """The command, environment and working directory of a policy pack (RunPlugin, kind analyzer).

    Returns ``([<python>, "-u", "-m", "pulumi.policy", *request.args, <pack dir>], env, <pack
    dir>)``: request.args is the engine's address, the pack directory is the request's program
    directory, and env is the request's ``KEY=VALUE`` list (the host's own environment when the
    list is empty) with the virtualenv's additions (``resolve_python``).

    Raises:
        ValueError: for a plugin kind other than ``analyzer``.
        FileNotFoundError: when the pack's ``virtualenv`` option names a directory without bin/python.
    """
    if request.kind != "analyzer":
        raise ValueError(
            f"RunPlugin of a {request.kind or 'nameless'} plugin is not implemented here (only "
            "policy packs, kind analyzer)"
        )
    python, env_add = resolve_python(request.info)
    pack = request.info.program_directory or request.info.root_directory
    env = dict(item.split("=", 1) for item in request.env if "=" in item) if request.env else dict(os.environ)
    env.update(env_add)
    return [python, "-u", "-m", "pulumi.policy", *request.args, pack], env, pack


def _pump(stream, field: str, out: queue.Queue) -> None:
    """Put each chunk of ``stream`` on ``out`` as ``(field, bytes)``, then None at its end."""
    for chunk in iter(lambda: stream.read1(65536), b""):
        out.put((field, chunk))
    out.put(None)


_LIST_PLUGINS = r"""
import json, importlib.metadata as md
out = []
for dist in md.distributions():
    for f in dist.files or []:
        if f.name == "pulumi-plugin.json":
            try:
                out.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                pass
print(json.dumps(out))
"""


class PythonLanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    """LanguageRuntime service: required packages, plugin info and Run (see module docstring)."""

    def __init__(self, exec_script: Path, engine_address: str) -> None:
        self.exec_script = exec_script
        self.engine_address = engine_address
        self._children: set[subprocess.Popen[bytes]] = set()

    def Handshake(self, request, context):  # noqa: N802 (gRPC method names)
        self.engine_address = request.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request, context):  # noqa: N802
        return plugin_pb2.PluginInfo(version=_plugin_version())

    def GetRequiredPackages(self, request, context):  # noqa: N802
        """Resource packages of the program's environment, from their pulumi-plugin.json files."""
        python, env_add = resolve_python(request.info)
        proc = subprocess.run(
            [python, "-c", _LIST_PLUGINS],
            capture_output=True,
            text=True,
            env={**os.environ, **env_add},
            check=False,
        )
        if proc.returncode != 0:
            context.abort(grpc.StatusCode.INTERNAL, f"listing pulumi plugins failed: {proc.stderr}")
        packages = []
        for spec in json.loads(proc.stdout or "[]"):
            if not spec.get("resource") or not spec.get("name"):
                continue
            version = spec.get("version", "")
            packages.append(
                plugin_pb2.PackageDependency(
                    kind="resource",
                    name=spec["name"],
                    version=version[1:] if version.startswith("v") else version,
                    server=spec.get("server", ""),
                )
            )
        return language_pb2.GetRequiredPackagesResponse(packages=packages)

    def GetRequiredPlugins(self, request, context):  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "method GetRequiredPlugins not implemented")

    def RuntimeOptionsPrompts(self, request, context):  # noqa: N802
        return language_pb2.RuntimeOptionsResponse()

    def About(self, request, context):  # noqa: N802
        python, env_add = resolve_python(request.info)
        version = subprocess.run(
            [python, "--version"], capture_output=True, text=True, env={**os.environ, **env_add}, check=False
        ).stdout.strip()
        return language_pb2.AboutResponse(executable=python, version=version.removeprefix("Python "))

    def Run(self, request, context):  # noqa: N802
        try:
            python, env_add = resolve_python(request.info)
        except FileNotFoundError as err:
            return language_pb2.RunResponse(error=str(err))
        args = [python, "-u", str(self.exec_script)]

        def opt(name: str, value: str) -> None:
            if value:
                args.extend([f"--{name}", value])

        opt("monitor", request.monitor_address)
        opt("engine", self.engine_address)
        opt("project", request.project)
        opt("root_directory", request.info.root_directory)
        opt("stack", request.stack)
        opt("pwd", request.pwd)
        opt("dry_run", "true" if request.dryRun else "false")
        opt("parallel", str(request.parallel))
        opt("organization", request.organization)
        args.append(request.info.entry_point or ".")
        args.extend(request.args)

        env = {**os.environ, **env_add}
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        try:
            child = subprocess.Popen(args, env=env)  # stdout/stderr go to the CLI, as in the Go host
        except OSError as err:
            return language_pb2.RunResponse(
                error=f"problem executing program (could not run language executor): {err}"
            )
        self._children.add(child)
        try:
            code = child.wait()
        finally:
            self._children.discard(child)
        if code == 0:
            return language_pb2.RunResponse()
        if code == EXIT_AFTER_USER_MESSAGE:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"program exited with non-zero exit code: {code}")

    def RunPlugin(self, request, context):  # noqa: N802
        """Run a policy pack (``plugin_command``), streaming its stdout and stderr, then its exit
        code. The CLI cancels the call when it is done with the pack: the pack is then stopped."""
        try:
            args, env, cwd = plugin_command(request)
        except ValueError as err:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, str(err))
        except FileNotFoundError as err:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))
        child = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._children.add(child)
        context.add_callback(lambda: child.poll() is None and child.send_signal(signal.SIGINT))
        chunks: queue.Queue = queue.Queue()
        for stream, field in ((child.stdout, "stdout"), (child.stderr, "stderr")):
            threading.Thread(target=_pump, args=(stream, field, chunks), daemon=True).start()
        try:
            open_streams = 2
            while open_streams:
                item = chunks.get()
                if item is None:
                    open_streams -= 1
                else:
                    yield language_pb2.RunPluginResponse(**{item[0]: item[1]})
            yield language_pb2.RunPluginResponse(exitcode=child.wait())
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            self._children.discard(child)

    def Cancel(self, request, context):  # noqa: N802
        for child in list(self._children):
            child.send_signal(signal.SIGINT)
        return empty_pb2.Empty()


def _exit_when_orphaned() -> None:
    """Stop when the CLI that started us is gone (the Go host health-checks the engine)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def main(argv: list[str]) -> int:
    """Serve the language host; argv[0] (optional) is the engine address."""
    if argv[:1] == ["-version"] or argv[:1] == ["--version"]:
        print(_plugin_version())
        return 0
    exec_script = HERE / "pulumi-language-python-exec"
    if not exec_script.exists():
        print(f"missing executor {exec_script}", file=sys.stderr)
        return 1
    # Flags the CLI may pass (Go flag syntax, one or two dashes): -tracing ADDR, -use-executor PATH.
    positional: list[str] = []
    skip_next = False
    for arg in argv:
        if skip_next:
            skip_next = False
        elif arg.lstrip("-") in ("tracing", "use-executor"):
            skip_next = True
        elif not arg.startswith("-"):
            positional.append(arg)
    host = None  # set below; the signal handler needs it

    def stop(signum: int, frame: object) -> None:
        # The CLI interrupts its plugins when it is done: stop quietly (no KeyboardInterrupt
        # traceback in the user's output), passing the signal on to a running program.
        if host is not None:
            for child in list(host._children):
                child.send_signal(signal.SIGINT)
        os._exit(0)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
    )
    host = PythonLanguageHost(exec_script, positional[0] if positional else "")
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    threading.Thread(target=_exit_when_orphaned, daemon=True).start()
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
