"""The local cluster's safety rules without a cluster: whose directories it takes and empties,
which cgroups it removes, the modes of its keys and kubeconfigs, and the flags that close etcd
and anonymous access to the API server. The same rules on the real cluster are asserted in
tests/cluster/test_local_cluster.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from localcluster import cgroups, cluster, components, config_files, dirs, layout, pki

OWN = layout.CGROUP_ROOT.lstrip("/")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# ---------------------------------------------------------------- directories
def test_a_new_directory_is_claimed_0700_with_a_marker(tmp_path: Path) -> None:
    state = tmp_path / "a" / "state"
    dirs.claim(state, "state")
    assert _mode(state) == 0o700
    assert (state / dirs.MARKER).read_text() == "tf-mnist local-cluster state directory\n"
    assert _mode(state / dirs.MARKER) == 0o600
    assert dirs.owned(state, "state") is True
    dirs.claim(state, "state")  # again: still ours, nothing else changes
    assert sorted(p.name for p in state.iterdir()) == [dirs.MARKER]


def test_an_empty_directory_is_taken_and_tightened(tmp_path: Path) -> None:
    d = tmp_path / "empty"
    d.mkdir(mode=0o755)
    dirs.claim(d, "run")
    assert _mode(d) == 0o700 and dirs.owned(d, "run")


def test_a_foreign_directory_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    foreign = tmp_path / "home"
    foreign.mkdir(mode=0o755)
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(dirs.DirectoryError) as err:
        dirs.claim(foreign, "state")
    message = str(err.value)
    assert f"LOCAL_CLUSTER_STATE={foreign} is refused as the state directory" in message
    assert (
        "not empty and has no marker" in message
        and "fix: point LOCAL_CLUSTER_STATE at a new or empty" in message
    )
    with pytest.raises(dirs.DirectoryError, match="LOCAL_CLUSTER_RUN=.* has no marker"):
        dirs.owned(foreign, "run")
    assert sorted(p.name for p in foreign.iterdir()) == ["precious.txt"] and _mode(foreign) == 0o755


def test_the_state_directory_is_not_taken_as_the_run_directory(tmp_path: Path) -> None:
    d = tmp_path / "state"
    dirs.claim(d, "state")
    with pytest.raises(dirs.DirectoryError, match="it is this tool's state directory"):
        dirs.claim(d, "run")
    with pytest.raises(dirs.DirectoryError, match="has no marker"):
        dirs.owned(d, "run")


def test_a_file_or_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    for p in (tmp_path / "file", tmp_path / "link"):
        with pytest.raises(dirs.DirectoryError, match="it is not a directory"):
            dirs.claim(p, "state")
        with pytest.raises(dirs.DirectoryError, match="it is not a directory"):
            dirs.owned(p, "state")
    assert not any((tmp_path / "target").iterdir())
    assert dirs.owned(tmp_path / "absent", "state") is False


@pytest.mark.parametrize(
    "state, run, rule",
    [
        ("relative/state", "/run/x", "must be an absolute path"),
        ("/var/lib/x", "/var/lib/x", "two separate directories"),
        ("/", "/run/tf-mnist-local-cluster", "two separate directories"),
        ("/var/lib/x", "/var/lib/x/run", "two separate directories"),
    ],
)
def test_state_and_run_must_be_absolute_and_apart(state: str, run: str, rule: str) -> None:
    with pytest.raises(dirs.DirectoryError, match=rule):
        dirs.check_paths(Path(state), Path(run))


def test_down_and_up_refuse_a_foreign_state_directory_before_doing_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data").write_text("x")
    monkeypatch.setenv("LOCAL_CLUSTER_STATE", str(foreign))
    monkeypatch.setenv("LOCAL_CLUSTER_RUN", str(tmp_path / "run"))

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("got past the directory check")

    monkeypatch.setattr(cluster, "_down", must_not_run)
    monkeypatch.setattr(cluster, "ensure_packages", must_not_run)
    for command in (cluster.down, cluster.up, cluster.status):
        with pytest.raises(dirs.DirectoryError, match="LOCAL_CLUSTER_STATE=.*refused"):
            command()
    assert sorted(p.name for p in foreign.iterdir()) == ["data"] and not (tmp_path / "run").exists()
    # A new state directory with a foreign run directory: up checks both before it creates either.
    monkeypatch.setenv("LOCAL_CLUSTER_STATE", str(tmp_path / "new-state"))
    monkeypatch.setenv("LOCAL_CLUSTER_RUN", str(foreign))
    with pytest.raises(dirs.DirectoryError, match="LOCAL_CLUSTER_RUN=.*refused as the run directory"):
        cluster.up()
    assert not (tmp_path / "new-state").exists()


def test_clearing_state_keeps_logs_images_lock_and_marker(tmp_path: Path) -> None:
    p = layout.Paths(state=tmp_path / "state", run=tmp_path / "run", cache=tmp_path / "cache")
    dirs.claim(p.state, "state")
    for d in (p.logs, p.containerd_root, p.pki, p.etc):
        d.mkdir()
    p.lock.write_text("")
    p.kubeconfig.write_text("x")
    cluster._clear_state(p)
    assert sorted(e.name for e in p.state.iterdir()) == sorted([dirs.MARKER, ".lock", "logs", "containerd"])
    (p.state / dirs.MARKER).unlink()
    with pytest.raises(dirs.DirectoryError):
        cluster._clear_state(p)
    assert (p.state / "logs").is_dir()


def test_private_files_are_0600_even_when_they_existed(tmp_path: Path) -> None:
    f = tmp_path / "kubeconfig"
    f.write_text("old")
    f.chmod(0o644)
    dirs.write_private(f, "new")
    assert (f.read_text(), _mode(f)) == ("new", 0o600)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        dirs.write_private(tmp_path / "link", "x")
    assert not (tmp_path / "elsewhere").exists()


# ---------------------------------------------------------------- cgroups
def _fake_cgroup_fs(root: Path) -> Path:
    fs = root / "cgroup"
    for h in ("memory", "pids", "unified"):
        (fs / h).mkdir(parents=True)
        (fs / h / "cgroup.procs").write_text("")
    (fs / "not-a-hierarchy").mkdir()
    return fs


def test_down_removes_only_the_tools_cgroup_subtree(tmp_path: Path) -> None:
    fs = _fake_cgroup_fs(tmp_path)
    cgroups.create_roots(fs)
    assert sorted(p.relative_to(fs).as_posix() for p in fs.glob(f"*/{OWN}")) == [
        f"memory/{OWN}",
        f"pids/{OWN}",
        f"unified/{OWN}",
    ]
    (fs / "memory" / OWN / "kubepods" / "besteffort" / "podabc").mkdir(parents=True)
    foreign = fs / "memory" / "kubepods" / "besteffort" / "podother"
    foreign.mkdir(parents=True)
    assert cgroups.remove_own(fs) == []
    assert not list(fs.glob(f"*/{OWN}"))
    assert foreign.is_dir()


def test_only_processes_under_the_tools_cgroup_root_are_ours(tmp_path: Path) -> None:
    ours = f"12:pids:/{OWN}/kubepods/besteffort/pod1/abc\n11:memory:/{OWN}/kubepods\n0::/\n"
    other_kubelet = "12:pids:/kubepods/besteffort/pod1/abc\n11:memory:/kubepods/burstable\n0::/\n"
    lookalike = f"12:pids:/{OWN}-other/kubepods\n0::/\n"
    assert cgroups.in_own_cgroup(ours)
    assert not cgroups.in_own_cgroup(other_kubelet) and not cgroups.in_own_cgroup(lookalike)
    proc = tmp_path / "proc"
    for pid, text in (("10", ours), ("11", other_kubelet), ("12", lookalike)):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cgroup").write_text(text)
    (proc / "self").mkdir()
    assert cgroups.own_processes(proc) == [10]


def test_the_kubelet_puts_pods_under_the_tools_cgroup_root(tmp_path: Path) -> None:
    p = layout.Paths(state=tmp_path / "s", run=tmp_path / "r", cache=tmp_path / "c")
    parent = os.environ.get("LOCAL_CLUSTER_CGROUP_PARENT", "").rstrip("/")  # tools/slow-machine's
    assert (
        json.loads(config_files.kubelet_config(p))["cgroupRoot"]
        == layout.CGROUP_ROOT
        == f"{parent}/tf-mnist-local-cluster"
    )


# ---------------------------------------------------------------- keys, etcd, API server
@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("state") / "pki"
    pki.make_pki(d)
    return d


def test_every_pki_file_is_0600_in_a_0700_directory(pki_dir: Path) -> None:
    assert _mode(pki_dir) == 0o700
    files = sorted(pki_dir.iterdir())
    assert {f.name for f in files} >= {
        "ca.key",
        "sa.key",
        "admin.key",
        "etcd-ca.key",
        "etcd-server.key",
        "apiserver-etcd-client.key",
        "etcd-healthcheck-client.key",
    }
    assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}


def test_kubeconfigs_are_written_0600(pki_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "admin.kubeconfig"
    pki.write_kubeconfig(path, pki_dir, "admin", components.APISERVER_URL)
    assert _mode(path) == 0o600 and "client-key-data:" in path.read_text()


def _verify(pki_dir: Path, ca: str, cert: str) -> bool:
    return (
        subprocess.run(
            ["openssl", "verify", "-CAfile", str(pki_dir / ca), str(pki_dir / cert)], capture_output=True
        ).returncode
        == 0
    )


def test_etcd_trusts_only_its_own_ca(pki_dir: Path) -> None:
    for cert in (
        "etcd-server.crt",
        "etcd-peer.crt",
        "apiserver-etcd-client.crt",
        "etcd-healthcheck-client.crt",
    ):
        assert _verify(pki_dir, "etcd-ca.crt", cert), cert
        assert not _verify(pki_dir, "ca.crt", cert), cert
    # No cluster client (admin, kubelet, ...) is signed by the CA etcd trusts.
    for client in pki.CLIENTS:
        assert not _verify(pki_dir, "etcd-ca.crt", f"{client}.crt"), client


def test_etcd_serves_tls_and_requires_client_certificates(tmp_path: Path) -> None:
    p = layout.Paths(state=tmp_path / "s", run=tmp_path / "r", cache=tmp_path / "c")
    argv = components.etcd(p, Path("/bin")).argv
    for url_flag in (
        "--listen-client-urls",
        "--advertise-client-urls",
        "--listen-peer-urls",
        "--initial-advertise-peer-urls",
    ):
        assert argv[argv.index(url_flag) + 1].startswith("https://127.0.0.1:"), url_flag
    assert "--client-cert-auth" in argv and "--peer-client-cert-auth" in argv
    assert argv[argv.index("--trusted-ca-file") + 1] == str(p.pki / "etcd-ca.crt")
    api = components.kube_apiserver(p, Path("/bin")).argv
    assert "--anonymous-auth=false" in api
    assert f"--etcd-servers=https://127.0.0.1:{layout.port('etcd', 'client')}" in api
    assert f"--etcd-certfile={p.pki / 'apiserver-etcd-client.crt'}" in api


# ---------------------------------------------------------------- machine-wide names
def test_a_down_without_its_states_up_record_leaves_the_shared_names_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second `down` of a checkout (its state kept logs, lock and marker) while a cluster of
    other directories runs must not kill that cluster's containers, remove its cgroup root,
    its bridge or its nftables table: only a state whose `up` recorded them may."""
    p = layout.Paths(state=tmp_path / "state", run=tmp_path / "run", cache=tmp_path / "cache")
    dirs.claim(p.state, "state")
    touched: list[str] = []
    monkeypatch.setattr(cgroups, "own_processes", lambda root=None: touched.append(f"kill {root}") or [])
    monkeypatch.setattr(cgroups, "remove_own", lambda root=None: touched.append(f"rmdir {root}") or [])
    monkeypatch.setattr(cluster.network, "teardown", lambda host_state: touched.append("bridge") or [])
    cluster._down(p, quiet=True)
    assert touched == []

    # After an `up` of this state: its record names the root it made, and `down` removes the
    # record with the rest, so a second `down` is again harmless.
    p.shared_names.write_text(
        json.dumps({"cgroup_root": "/parent/tf-mnist-local-cluster", "bridge": "tf-mnist0"})
    )
    cluster._down(p, quiet=True)
    assert touched == [
        "kill /parent/tf-mnist-local-cluster",
        "rmdir /parent/tf-mnist-local-cluster",
        "bridge",
    ]
    assert not p.shared_names.exists()
    touched.clear()
    cluster._down(p, quiet=True)
    assert touched == []
