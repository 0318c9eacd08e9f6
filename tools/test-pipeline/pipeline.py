"""The whole test run as a pipeline of phases, each started once what it needs is ready.

    python3 tools/test-pipeline/pipeline.py [PYTEST ARGS...]     (scripts/test.sh runs it)

Why: on a fresh machine the Pulumi engine (the CLI and two providers) and the local cluster's
binaries build from Go modules for about half an hour, and most of the suite needs neither.
So the phases run as soon as what they need is there, instead of one after another:

    venv ─┬─ build:cluster (Kubernetes, etcd, ...) ─┬─ tests:cluster-base (the cluster's own tests)
          │                                         └┄ build:engine (CLI + kubernetes provider) ─┐
          │        ┌─────────────────────────────────────────────────────────────────────────┘
          │        ├─ build:alicloud ─ tests:engine, tests:engine-live
          │        └─ tests:cluster (the stack on the cluster; also needs build:images)
          ├─ build:images (the local cluster's images, for both cluster phases)
          ├─ build:wheels (the base-image tests' wheel index) ┄ tests:cluster
          ├─ build:checkers (checkov, kube-score) ─ tests:checkers
          └─ tests (none of engine, cluster, checkers)

``build:engine`` starts once ``build:cluster`` has ended: the kubernetes provider and the
cluster's Kubernetes, CoreDNS and NetworkPolicy agent build from one Go module
(tools/go-build/kubernetes-programs) with the same flags, so the engine's build finds the
packages they share (k8s.io/*, protobuf, grpc, ...) compiled in the Go build cache instead of
compiling them a second time beside the cluster's build. The cluster builds first because its
own tests need no engine: they run (mostly waiting for pods) while the engine compiles, instead
of holding the cluster between the engine's build and the stack's cluster tests. A dotted line
(``after``) is an order, not a need: the engine builds after a failed cluster build too, and
the tests that use the wheel index download it themselves when ``build:wheels`` failed.

The builds and the cluster tests are the longest chain, so they keep the normal priority;
``build:alicloud``, which feeds only the engine tests, ``build:wheels``, mostly downloads, and
``build:checkers``, which feeds only their tests, run at nice 5, and ``tests`` at nice 10, taking
the cores the builds leave idle (linking, module downloads) and every core once they are done.
The cluster tests mostly wait for pods, which need a core when they train: they keep the normal
priority.

Every pytest gets ``PYTEST ARGS`` (only options, e.g. ``-ra``; a selection such as ``-m`` or a
path runs one pytest instead, after building only what the selected tests need). A phase whose
need failed does not run and counts as failed. Output: the ``tests`` phase streams; the others
write logs that are printed after it, in the order above. At the end one line gives each phase's
wall and CPU seconds (its own processes and their children that it waited for: the local
cluster's pods and servers are not its children) and the machine's CPU over the whole run.

Exit status: 0 when every phase passed; otherwise the first failed pytest's status (5 when a
pytest collected nothing), or 1 for a failed build; 130 after Ctrl-C or SIGTERM, once the
cluster tests have taken their cluster down.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
#: The cluster tests that need no Pulumi engine (the local cluster itself).
ENGINE_FREE_CLUSTER_TESTS = "tests/cluster/test_local_cluster.py"
#: Engine tests that mostly wait: each preview of a live cloud stack ends at a call that
#: pulumi-resource-alicloud retries for 2 minutes offline (Alibaba's location service), after the
#: engine has planned every other step, which is what they assert on.
WAITING_ENGINE_TESTS = "tests/preview/test_live_cloud_stack.py"
#: The module that downloads the base-image cluster tests' wheel index into the cache.
WHEEL_INDEX = "tests.cluster.wheel_index"
#: Where scripts/test.sh's pytest plugin writes which markers the selected tests carry.
NEEDS_ENV = "TF_MNIST_NEEDS_FILE"


@dataclass
class Phase:
    """One step of the run: a command, what it needs, and what it did.

    Attributes:
        name: shown in the summary line, e.g. ``build:engine``.
        argv: the command (run in the repository root).
        needs: names of phases that must have passed before it starts.
        after: names of phases that must have ended, passed or not, before it starts: an order
            between phases that compete for the cores or share a cache, not a need.
        env: variables added to the environment (after those the needs export).
        nice: the niceness it runs at (0: normal).
        stream: its output goes to this terminal as it comes; else to a log printed later.
        rc: exit status once ended (None while pending or running; -1 when a need failed).
        wall_s, cpu_s: wall and CPU seconds (user + system, its waited-for children included).
    """

    name: str
    argv: list[str]
    needs: Sequence[str] = ()
    after: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    nice: int = 0
    stream: bool = False
    is_pytest: bool = False
    rc: int | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    log: Path | None = None
    proc: subprocess.Popen | None = None
    started: float = 0.0


class CpuAccounting:
    """CPU seconds of each phase's whole process tree, from a cgroup v1 ``cpuacct`` group per
    phase (as root, where the hierarchy is mounted): a TensorFlow task that its launcher forked
    into its own session counts for its phase too. Elsewhere each phase's own rusage is used
    instead, which counts only the children that it waited for."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.base: Path | None = None
        if os.geteuid() == 0 and (self.ROOT / "cgroup.procs").is_file():
            # Under this process's own group, so that a group above it (tools/slow-machine's
            # CPU quota, where cpu and cpuacct share a hierarchy) still holds every phase.
            base = self.ROOT / own_cgroup("cpuacct").lstrip("/") / f"tf-mnist-test-pipeline-{os.getpid()}"
            try:
                base.mkdir()
                self.base = base
            except OSError:
                self.base = None

    def group(self, name: str) -> Path | None:
        """A new group for the phase ``name``, or None without cgroups."""
        if self.base is None:
            return None
        group = self.base / name.replace(":", "-")
        group.mkdir(exist_ok=True)
        return group

    @staticmethod
    def usage_s(group: Path) -> float:
        return int((group / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        """Removes the groups; a process still in one (none should be) moves to their parent first."""
        if self.base is None:
            return
        for group in [*self.base.iterdir(), self.base]:
            if not group.is_dir():
                continue
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (self.base.parent / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            try:
                group.rmdir()
            except OSError:
                pass


def own_cgroup(controller: str, proc_cgroup: Path = Path("/proc/self/cgroup")) -> str:
    """This process's cgroup path in the v1 hierarchy of ``controller`` ("/" when none)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


def machine_cpu_s() -> float:
    """CPU seconds (user + nice + system) all cores spent since boot, from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def is_selection(args: Sequence[str]) -> bool:
    """True when ``args`` select tests (a marker or keyword expression, a path or node id)."""
    for arg in args:
        if arg.startswith(("-m", "-k", "--deselect", "--lf", "--last-failed")):
            return True
        if not arg.startswith("-"):
            return True  # a path or node id (or an option's separate value: one pytest, as ever)
    return False


def selected_markers(args: Sequence[str]) -> set[str]:
    """The markers among ``engine``, ``cluster`` and ``checkers`` that the tests ``args`` select carry
    (pytest --collect-only with tests/conftest.py's hook writing them to a file)."""
    with tempfile.NamedTemporaryFile("r", prefix="tf-mnist-needs-", suffix=".txt") as out:
        proc = subprocess.run(
            [str(VENV_PYTHON), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, NEEDS_ENV: out.name},
        )
        found = set(Path(out.name).read_text().split())
    if proc.returncode not in (0, 5):
        return {"engine", "cluster", "checkers"}  # collection failed: build everything, pytest will say why
    return found


class Pipeline:
    """Runs phases as their needs pass; stops them all on SIGINT/SIGTERM."""

    def __init__(self, phases: list[Phase]) -> None:
        self.phases = {p.name: p for p in phases}
        self.exported: dict[str, str] = {}
        self.interrupted = False
        self.logdir = Path(tempfile.mkdtemp(prefix="tf-mnist-test-logs-"))
        self.cpu = CpuAccounting()
        self.groups: dict[str, Path] = {}

    def _start(self, phase: Phase) -> None:
        env = {
            **os.environ,
            "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
            **self.exported,
            **phase.env,
        }
        argv = phase.argv if phase.nice == 0 else ["nice", "-n", str(phase.nice), *phase.argv]
        if phase.stream:
            out = None
        else:
            phase.log = self.logdir / f"{phase.name.replace(':', '-')}.log"
            out = open(phase.log, "w")
            print(f"test.sh: {phase.name} started (log: {phase.log})", file=sys.stderr, flush=True)
        # Each phase its own process group: a signal reaches its whole tree, and a terminal's
        # Ctrl-C reaches only this script, which then decides what each phase gets.
        group = self.cpu.group(phase.name)
        if group is not None:
            self.groups[phase.name] = group

        def join_group() -> None:  # in the child, after setsid, before exec
            if group is not None:  # every descendant starts in it
                (group / "cgroup.procs").write_text(str(os.getpid()))
            # With the kernel's autogroups each session is scheduled as one unit at its group's
            # nice, whatever its processes' own: the new session's group gets the phase's.
            autogroup = Path("/proc/self/autogroup")
            if phase.nice and autogroup.exists():
                try:
                    autogroup.write_text(str(phase.nice))
                except OSError:
                    pass

        phase.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,
            preexec_fn=join_group,
        )
        phase.started = time.monotonic()
        if out is not None:
            out.close()

    def _reap(self) -> Phase | None:
        """Waits for any running phase to end; records its status, wall and CPU time."""
        pid, status, usage = os.wait4(-1, 0)
        for phase in self.phases.values():
            if phase.proc is not None and phase.proc.pid == pid and phase.rc is None:
                phase.proc.returncode = os.waitstatus_to_exitcode(status)
                phase.rc = phase.proc.returncode
                phase.wall_s = time.monotonic() - phase.started
                phase.cpu_s = usage.ru_utime + usage.ru_stime
                if phase.name in self.groups:
                    phase.cpu_s = self.cpu.usage_s(self.groups[phase.name])
                self._after(phase)
                return phase
        return None

    def _after(self, phase: Phase) -> None:
        if phase.rc == 0 and phase.name == "build:engine" and phase.log is not None:
            bin_dir = phase.log.read_text().rstrip().splitlines()[-1].strip()
            self.exported["PATH"] = f"{bin_dir}:{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"
        state = "passed" if phase.rc == 0 else f"FAILED (exit {phase.rc})"
        print(f"test.sh: {phase.name} {state} after {phase.wall_s:.0f} s", file=sys.stderr, flush=True)

    def _stop_all(self, signum: int, _frame: object) -> None:
        """SIGINT or SIGTERM: the cluster tests get SIGINT (their fixtures take the cluster
        down), every other running phase SIGTERM; the run then waits for them."""
        self.interrupted = True
        for phase in self.phases.values():
            if phase.proc is not None and phase.rc is None:
                sig = signal.SIGINT if phase.name.startswith("tests:cluster") else signal.SIGTERM
                try:
                    os.killpg(phase.proc.pid, sig)
                except ProcessLookupError:
                    pass

    def run(self, summary: bool = True) -> int:
        """Runs every phase not yet run; prints the logs and (``summary``) the times line.

        Returns the exit status described in the module docstring."""
        signal.signal(signal.SIGINT, self._stop_all)
        signal.signal(signal.SIGTERM, self._stop_all)
        start_wall, start_cpu = time.monotonic(), machine_cpu_s()
        while True:
            for phase in self.phases.values():
                if phase.rc is not None or phase.proc is not None:
                    continue
                needs = [self.phases[n] for n in phase.needs if n in self.phases]
                if self.interrupted or any(n.rc not in (None, 0) for n in needs):
                    phase.rc = -1
                elif all(n.rc == 0 for n in needs) and all(
                    self.phases[a].rc is not None for a in phase.after if a in self.phases
                ):
                    self._start(phase)
            if not any(p.proc is not None and p.rc is None for p in self.phases.values()):
                break
            try:
                self._reap()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
        self.cpu.close()
        self._print_logs()
        if summary:
            self._print_summary(time.monotonic() - start_wall, machine_cpu_s() - start_cpu)
        if self.interrupted:
            return 130
        for phase in self.phases.values():
            if phase.is_pytest and phase.rc not in (0, None):
                return phase.rc if phase.rc > 0 else 1
        return 0 if all(p.rc == 0 for p in self.phases.values()) else 1

    def _print_logs(self) -> None:
        for phase in self.phases.values():
            if phase.log is None:
                continue
            text = phase.log.read_text(errors="replace")
            if phase.is_pytest or phase.rc not in (0, None):
                print(
                    f"==================== {phase.name}: {shlex.join(phase.argv[-3:])} ===================="
                )
                print(text if phase.is_pytest else "\n".join(text.splitlines()[-40:]), flush=True)
            if phase.rc == 0:
                phase.log.unlink()
                phase.log = None
        if not any(self.logdir.iterdir()):
            self.logdir.rmdir()

    def _print_summary(self, wall_s: float, cpu_s: float) -> None:
        parts = []
        for phase in self.phases.values():
            if phase.rc == -1:
                parts.append(f"{phase.name} not run")
            elif phase.rc is not None:
                parts.append(
                    f"{phase.name} {phase.wall_s:.0f}s/{phase.cpu_s:.0f}cpu"
                    + ("" if phase.rc == 0 else f" exit {phase.rc}")
                )
        parts.append(f"whole run {wall_s:.0f}s, machine CPU {cpu_s:.0f}s")
        print("test.sh phases (wall s / CPU s): " + "; ".join(parts), flush=True)


def build_phases(pytest_args: list[str], as_root: bool) -> list[Phase]:
    """The phases for ``pytest_args`` (see the module docstring)."""
    python = str(VENV_PYTHON)
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "--durations=15"]
    toolchain = ["bash", "tools/pulumi-toolchain/pulumi-toolchain.sh"]
    checkers = ["bash", "tools/checkers/checkers.sh"]
    checkers_env = {"CHECKERS_NICE": "0"}
    builds_env = {"PULUMI_TOOLCHAIN_NICE": "0", "LOCAL_CLUSTER_NICE": "0"}
    engine_env = {"REQUIRE_PULUMI_ENGINE": "1"}
    venv = Phase("venv", ["bash", "scripts/bootstrap.sh"])
    phases = [venv]
    if is_selection(pytest_args):
        # One pytest, after building only what the selected tests need: the venv first, to
        # collect them.
        if Pipeline([venv]).run(summary=False) != 0:
            return [venv]
        wanted = selected_markers(pytest_args)
        needs = []
        if wanted & {"engine", "cluster"}:
            providers = "kubernetes alicloud" if "engine" in wanted else "kubernetes"
            phases.append(
                Phase("build:engine", toolchain, env={**builds_env, "PULUMI_TOOLCHAIN_PROVIDERS": providers})
            )
            needs.append("build:engine")
        if "cluster" in wanted and as_root:
            # After the kubernetes provider, whose compiled packages it reuses (module
            # docstring): "cluster" always brings build:engine.
            phases.append(
                Phase(
                    "build:cluster",
                    ["bash", "tools/local-cluster/build.sh"],
                    needs=["build:engine"],
                    env=builds_env,
                )
            )
            phases.append(Phase("build:images", ["bash", "tools/local-cluster/local-cluster", "images"]))
            needs += ["build:cluster", "build:images"]
        if "checkers" in wanted:
            phases.append(Phase("build:checkers", checkers, env=checkers_env))
            needs.append("build:checkers")
        env = {**engine_env, "REQUIRE_CHECKERS": "1", **({"REQUIRE_LOCAL_CLUSTER": "1"} if as_root else {})}
        phases.append(
            Phase("tests", [*pytest, *pytest_args], needs=needs, env=env, stream=True, is_pytest=True)
        )
        return phases
    engine = Phase(
        "build:engine",
        toolchain,
        needs=["venv"],
        after=["build:cluster"] if as_root else [],
        env={**builds_env, "PULUMI_TOOLCHAIN_PROVIDERS": "kubernetes"},
    )
    if as_root:
        # The cluster first, so that its own tests run while the engine builds (module docstring).
        phases += [
            Phase("build:cluster", ["bash", "tools/local-cluster/build.sh"], needs=["venv"], env=builds_env),
            # The images (debootstrap, pip inside buildah: downloads more than CPU) build with the
            # cluster down, beside the Go builds; the cluster tests' first `up` then imports them.
            Phase("build:images", ["bash", "tools/local-cluster/local-cluster", "images"], needs=["venv"]),
            Phase("build:wheels", [python, "-m", WHEEL_INDEX], needs=["venv"], nice=5),
        ]
    phases += [
        engine,
        # Off the longest chain: the engine tests it feeds are not on it.
        Phase("build:alicloud", toolchain, needs=["build:engine"], env={**builds_env}, nice=5),
        # Off the longest chain too: it feeds only tests:checkers.
        Phase("build:checkers", checkers, needs=["venv"], env=checkers_env, nice=5),
        Phase(
            "tests",
            [*pytest, "-m", "not engine and not cluster and not checkers", *pytest_args],
            needs=["venv"],
            nice=10,
            stream=True,
            is_pytest=True,
        ),
        Phase(
            "tests:checkers",
            [*pytest, "-m", "checkers and not engine and not cluster", *pytest_args],
            needs=["build:checkers"],
            env={"REQUIRE_CHECKERS": "1"},
            is_pytest=True,
        ),
        Phase(
            "tests:engine",
            [*pytest, "-m", "engine and not cluster", *pytest_args, f"--ignore={WAITING_ENGINE_TESTS}"],
            needs=["build:alicloud"],
            env=engine_env,
            is_pytest=True,
        ),
        # Beside tests:engine: its previews spend minutes waiting, not computing.
        Phase(
            "tests:engine-live",
            [*pytest, "-m", "engine and not cluster", *pytest_args, WAITING_ENGINE_TESTS],
            needs=["build:alicloud"],
            env=engine_env,
            is_pytest=True,
        ),
    ]
    if as_root:
        # The cluster's own tests need no engine: they run while the engine builds; the stack's
        # cluster tests then wait for the cluster's lock (tests/cluster/conftest.py), not for
        # them to pass.
        cluster_env = {"REQUIRE_LOCAL_CLUSTER": "1"}
        phases += [
            Phase(
                "tests:cluster-base",
                [*pytest, "-m", "cluster", *pytest_args, ENGINE_FREE_CLUSTER_TESTS],
                needs=["build:cluster", "build:images"],
                env=cluster_env,
                is_pytest=True,
            ),
            Phase(
                "tests:cluster",
                [*pytest, "-m", "cluster", *pytest_args, f"--ignore={ENGINE_FREE_CLUSTER_TESTS}"],
                needs=["build:engine", "build:cluster", "build:images"],
                after=["build:wheels"],
                env={**engine_env, **cluster_env},
                is_pytest=True,
            ),
        ]
    return phases


def main(argv: list[str]) -> int:
    as_root = os.geteuid() == 0 and sys.platform.startswith("linux")
    return Pipeline(build_phases(argv, as_root)).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
