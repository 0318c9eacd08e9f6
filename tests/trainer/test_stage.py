"""``python -m trainer.stage``: checksum-verified, atomic, idempotent staging."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from trainer_test_helpers import write_mnist

from trainer import data
from trainer.contract.exit_codes import EXIT_VOLUME_NOT_WRITABLE
from trainer.flags import BUNDLED_DATA_DIR
from trainer.stage import KNOWN_SHA256, StageError, VolumeNotWritable, hide_url_secrets, sha256_of, stage
from trainer.stage import main as stage_main

REPO = Path(__file__).resolve().parents[2]


def _quiet(*_):
    pass


def test_bundled_checksums_match_the_readme():
    for name in data.ALL_IDX_FILES:
        digest = sha256_of(BUNDLED_DATA_DIR / name)
        assert KNOWN_SHA256[name][digest] == "mnist-10k"
        assert digest in (BUNDLED_DATA_DIR / "README.md").read_text()


def _recompressed_and_raw(tmp_path: Path) -> tuple[Path, Path]:
    """The bundled sample gzip-recompressed (other .gz bytes) and unpacked (raw files)."""
    import gzip

    recompressed, raw = tmp_path / "recompressed", tmp_path / "raw"
    recompressed.mkdir()
    raw.mkdir()
    for name in data.ALL_IDX_FILES:
        content = gzip.decompress((BUNDLED_DATA_DIR / name).read_bytes())
        (recompressed / name).write_bytes(gzip.compress(content, compresslevel=1, mtime=0))
        (raw / data.raw_name(name)).write_bytes(content)
    return recompressed, raw


def test_any_faithful_copy_is_recognised_by_its_decompressed_sha256(tmp_path):
    recompressed, raw = _recompressed_and_raw(tmp_path)
    assert sha256_of(recompressed / data.ALL_IDX_FILES[0]) not in KNOWN_SHA256[data.ALL_IDX_FILES[0]]
    names = stage(tmp_path / "a", str(recompressed), log=_quiet)
    assert names == list(data.ALL_IDX_FILES)
    names = stage(tmp_path / "b", str(raw), log=_quiet)
    assert names == [data.raw_name(n) for n in data.ALL_IDX_FILES]
    lines = []
    stage(tmp_path / "b", str(raw), log=lines.append)
    assert all("already staged (mnist-10k" in line for line in lines) and len(lines) == 4
    for where in ("a", "b"):
        loaded = data.load(tmp_path / where)
        assert loaded.known_as == "mnist-10k" and len(loaded.x_train) == 8000
    (tmp_path / "b" / "train-images-idx3-ubyte.gz").write_bytes(b"x")
    with pytest.raises(StageError, match="holds train-images-idx3-ubyte.gz, the other form"):
        stage(tmp_path / "b", str(raw), log=_quiet)


def test_stage_from_the_bundled_sample_then_no_op(tmp_path):
    dest = tmp_path / "mnist"
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.stage", "--dest", str(dest)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("staged from") == 4
    assert len(data.load(dest).x_train) == 8000
    mtimes = {p.name: p.stat().st_mtime_ns for p in dest.iterdir()}
    again = subprocess.run(
        [sys.executable, "-m", "trainer.stage", "--dest", str(dest)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and again.stdout.count("already staged") == 4
    assert {p.name: p.stat().st_mtime_ns for p in dest.iterdir()} == mtimes


def test_a_corrupted_staged_file_is_replaced(tmp_path):
    stage(tmp_path, log=_quiet)
    target = tmp_path / "t10k-labels-idx1-ubyte.gz"
    target.write_bytes(b"<html>oops</html>")
    stage(tmp_path, log=_quiet)
    assert sha256_of(target) == sha256_of(BUNDLED_DATA_DIR / target.name)


def test_unknown_checksum_is_refused_and_nothing_is_staged(tmp_path):
    write_mnist(tmp_path / "src")
    with pytest.raises(
        StageError,
        match=r"sha256 [0-9a-f]{64} is not a known checksum of "
        r"train-images-idx3-ubyte\.gz",
    ):
        stage(tmp_path / "dest", str(tmp_path / "src"), log=_quiet)
    assert not (tmp_path / "dest").exists()  # refused before anything was written
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.stage",
            "--dest",
            str(tmp_path / "d2"),
            "--source",
            str(tmp_path / "src"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "is not a known checksum" in proc.stderr


def test_allow_unknown_stages_files_that_pass_the_data_checks(tmp_path):
    write_mnist(tmp_path / "src")
    stage(tmp_path / "dest", str(tmp_path / "src"), allow_unknown=True, log=_quiet)
    assert len(data.load(tmp_path / "dest").x_train) == 80
    (tmp_path / "src" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"<html></html>")
    with pytest.raises(data.DataError, match="not a gzip file"):
        stage(tmp_path / "bad", str(tmp_path / "src"), allow_unknown=True, log=_quiet)


def test_missing_source_file(tmp_path):
    shutil.copytree(BUNDLED_DATA_DIR, tmp_path / "src")
    (tmp_path / "src" / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(StageError, match=r"train-labels-idx1-ubyte\.gz: file is missing"):
        stage(tmp_path / "dest", str(tmp_path / "src"), log=_quiet)


def test_mixing_two_data_sets_is_refused(tmp_path):
    fashion = Path("/usr/share/datasets/fashion-mnist")
    if not (fashion / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("dataset-fashion-mnist is not installed")
    src = tmp_path / "src"
    shutil.copytree(BUNDLED_DATA_DIR, src)
    shutil.copy(fashion / "t10k-labels-idx1-ubyte.gz", src)
    with pytest.raises(StageError, match="files from different data sets would end up together"):
        stage(tmp_path / "dest", str(src), log=_quiet)


@pytest.fixture()
def http_source():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(BUNDLED_DATA_DIR))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_stage_from_a_url(tmp_path, http_source):
    names = stage(tmp_path, http_source + "/", log=_quiet)
    assert names == list(data.ALL_IDX_FILES)
    assert len(data.load(tmp_path).x_test) == 2000
    with pytest.raises(StageError, match=r"mnist\.npz: not found \(HTTP 404\); not tried again"):
        stage(tmp_path / "npz", http_source + "/mnist.npz", log=_quiet)


def test_two_stagers_at_once_leave_whole_files(tmp_path):
    dest = tmp_path / "shared"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "trainer.stage", "--dest", str(dest)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, err
    assert sorted(p.name for p in dest.iterdir()) == sorted(data.ALL_IDX_FILES)  # no temporaries
    for name in data.ALL_IDX_FILES:
        assert sha256_of(dest / name) == sha256_of(BUNDLED_DATA_DIR / name)


def test_a_missing_source_file_stages_nothing(tmp_path):
    # Every source file is checked before any is renamed into place: a half-staged
    # directory would mix this run's files with whatever comes next.
    shutil.copytree(BUNDLED_DATA_DIR, tmp_path / "src")
    (tmp_path / "src" / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(StageError, match=r"train-labels-idx1-ubyte\.gz: file is missing"):
        stage(tmp_path / "dest", str(tmp_path / "src"), log=_quiet)
    assert not (tmp_path / "dest").exists()


def test_allow_unknown_with_a_bad_file_leaves_the_destination_unchanged(tmp_path):
    write_mnist(tmp_path / "src")
    (tmp_path / "src" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"<html></html>")
    with pytest.raises(
        data.DataError, match=r"^" + str(tmp_path / "src") + r"/t10k-labels-idx1-ubyte\.gz: not a gzip file"
    ):
        stage(tmp_path / "dest", str(tmp_path / "src"), allow_unknown=True, log=_quiet)
    assert list((tmp_path / "dest").iterdir()) == []
    # A destination that already held a valid set keeps it.
    stage(tmp_path / "good", log=_quiet)
    before = {p.name: sha256_of(p) for p in (tmp_path / "good").iterdir()}
    with pytest.raises(data.DataError):
        stage(tmp_path / "good", str(tmp_path / "src"), allow_unknown=True, log=_quiet)
    assert {p.name: sha256_of(p) for p in (tmp_path / "good").iterdir()} == before


def test_dest_that_is_a_file_names_the_flag(tmp_path):
    (tmp_path / "afile").write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.stage", "--dest", str(tmp_path / "afile")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: --dest {tmp_path / 'afile'}: not a directory")


def test_stage_from_a_list_of_file_urls(tmp_path, http_source):
    # The files may sit under any paths (here with a query); each is named by its last segment.
    urls = [f"{http_source}/{name}?v=1" for name in reversed(data.ALL_IDX_FILES)]
    logged = []
    names = stage(tmp_path / "dest", urls, log=logged.append)
    assert names == list(data.ALL_IDX_FILES)
    for name in data.ALL_IDX_FILES:
        assert sha256_of(tmp_path / "dest" / name) == sha256_of(BUNDLED_DATA_DIR / name)
    assert f"staged from {http_source}/train-images-idx3-ubyte.gz?v=1 (mnist-10k" in logged[0]
    assert len(data.load(tmp_path / "dest").x_train) == 8000


def test_a_one_item_list_is_that_source(tmp_path):
    assert stage(tmp_path, [str(BUNDLED_DATA_DIR)], log=_quiet) == list(data.ALL_IDX_FILES)


@pytest.mark.parametrize(
    "urls,message",
    [
        (
            ["https://m.example/train-images-idx3-ubyte.gz", "https://m.example/train-labels-idx1-ubyte.gz"],
            "--source: the list of URLs lacks t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz",
        ),
        (
            ["https://m.example/train-images-idx3-ubyte.gz", "https://m.example/mnist.npz"],
            "--source https://m.example/mnist.npz: in a list of sources, each must be an http(s) URL of one of "
            "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz",
        ),
        (
            ["/data/train-images-idx3-ubyte.gz", "https://m.example/train-labels-idx1-ubyte.gz"],
            "--source /data/train-images-idx3-ubyte.gz: in a list of sources, each must be an http(s) URL",
        ),
        (
            ["https://a.example/train-images-idx3-ubyte.gz", "https://b.example/train-images-idx3-ubyte.gz"],
            "--source https://b.example/train-images-idx3-ubyte.gz: train-images-idx3-ubyte.gz is already given by "
            "https://a.example/train-images-idx3-ubyte.gz",
        ),
    ],
)
def test_a_bad_url_list_is_refused_before_anything_is_written(tmp_path, urls, message):
    with pytest.raises(StageError) as caught:
        stage(tmp_path / "dest", urls, log=_quiet)
    assert str(caught.value).startswith(message)
    assert not (tmp_path / "dest").exists()


def test_the_command_takes_one_source_per_file(tmp_path, http_source):
    argv = [sys.executable, "-m", "trainer.stage", "--dest", str(tmp_path / "dest")]
    for name in data.ALL_IDX_FILES:
        argv += ["--source", f"{http_source}/{name}"]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == sorted(data.ALL_IDX_FILES)


#: A presigned URL's query as OSS writes one (not a real key or signature).
PRESIGNED = "?Expires=1798761600&OSSAccessKeyId=LTAI5tFakeKeyId&Signature=c2lnbmF0dXJl%3D"


def test_the_command_prints_no_url_credentials(tmp_path, http_source):
    argv = [sys.executable, "-m", "trainer.stage", "--dest", str(tmp_path / "dest")]
    for name in data.ALL_IDX_FILES:
        argv += ["--source", f"{http_source}/{name}{PRESIGNED}"]
    staged = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert staged.returncode == 0, staged.stderr
    assert f"staged from {http_source}/train-images-idx3-ubyte.gz?<hidden> (mnist-10k" in staged.stdout
    # A download that fails: the pod's termination message.
    failed = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.stage",
            "--dest",
            str(tmp_path / "npz"),
            "--source",
            f"{http_source}/mnist.npz{PRESIGNED}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1
    assert (
        failed.stderr
        == f"error: {http_source}/mnist.npz?<hidden>: not found (HTTP 404); not tried again (a permanent error: check data.source)\n"
    )
    for output in (staged.stdout, staged.stderr, failed.stdout, failed.stderr):
        assert "LTAI5tFakeKeyId" not in output and "c2lnbmF0dXJl" not in output


@pytest.mark.parametrize(
    "text,shown",
    [
        (
            "https://b.oss-cn-hangzhou.aliyuncs.com/d/mnist.npz?Expires=1&Signature=a%2Bb: download failed",
            "https://b.oss-cn-hangzhou.aliyuncs.com/d/mnist.npz?<hidden>: download failed",
        ),
        (
            "files https://h/a.gz?x=1, https://h/b.gz?y=2 (two)",
            "files https://h/a.gz?<hidden>, https://h/b.gz?<hidden> (two)",
        ),
        ("from https://u:p@h/mnist.npz.", "from https://<hidden>@h/mnist.npz."),
        (
            "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz: ok",
            "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz: ok",
        ),
        ("/data/mnist/abc: already staged", "/data/mnist/abc: already staged"),
    ],
)
def test_url_credentials_are_hidden_and_the_rest_kept(text, shown):
    assert hide_url_secrets(text) == shown


def test_sources_from_the_environment_stage_and_are_never_printed(tmp_path, http_source):
    # How the stack passes a presigned data.source: a JSON list in an environment variable
    # (from a Kubernetes Secret); the query is the signature, which nothing prints.
    signed = [f"{http_source}/{name}?Expires=1&Signature=s3cr3t" for name in data.ALL_IDX_FILES]
    env = {**os.environ, "DATA_SOURCES": json.dumps(signed)}
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.stage",
            "--dest",
            str(tmp_path / "ok"),
            "--sources_env",
            "DATA_SOURCES",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert len(data.load(tmp_path / "ok").x_test) == 2000
    assert "s3cr3t" not in ok.stdout + ok.stderr and "?<hidden>" in ok.stdout
    for value, says in [
        (None, "the environment variable DATA_SOURCES is not set"),
        (
            '{"url": "s3cr3t"}',
            "the environment variable DATA_SOURCES must hold a JSON list of strings (its value is not shown)",
        ),
    ]:
        bad_env = {k: v for k, v in env.items() if k != "DATA_SOURCES"}
        bad_env.update({} if value is None else {"DATA_SOURCES": value})
        bad = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.stage",
                "--dest",
                str(tmp_path / "bad"),
                "--sources_env",
                "DATA_SOURCES",
            ],
            cwd=REPO,
            env=bad_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (bad.returncode, bad.stderr.strip()) == (1, f"error: --sources_env DATA_SOURCES: {says}")
        assert not (tmp_path / "bad").exists()


def test_a_directory_on_the_volume_is_a_source(tmp_path):
    # The stack's data.source may name a directory under mountPath: staged like any directory,
    # into the source's own destination, which the stack keys by the source.
    volume = tmp_path / "data"
    shutil.copytree(BUNDLED_DATA_DIR, volume / "uploads" / "mnist")
    stage(volume / "mnist" / "0123456789ab", str(volume / "uploads" / "mnist"), log=_quiet)
    assert len(data.load(volume / "mnist" / "0123456789ab").x_test) == 2000


# --- a volume the stager's uid cannot write (a fresh NFS export or node directory: root, 0755) ---
# Tests run as root here, whom no mode bit stops, so the kernel's refusal is stood in for: mkdir
# raising EACCES, or access() saying no. The real refusal is tests/cluster/test_volume_ownership.py.


def _refuse_mkdir(monkeypatch) -> None:
    def mkdir(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_an_unwritable_volume_names_the_directory_its_owner_mode_and_uid(tmp_path, monkeypatch):
    volume = tmp_path / "volume"
    volume.mkdir(mode=0o755)
    volume.chmod(0o755)
    info = volume.stat()
    _refuse_mkdir(monkeypatch)
    with pytest.raises(VolumeNotWritable) as raised:
        stage(volume / "mnist" / "sample", log=_quiet, volume_hint="Fix: chown it.")
    assert str(raised.value) == (
        f"--dest {volume}/mnist/sample: cannot create it: {volume} belongs to uid {info.st_uid}, gid "
        f"{info.st_gid}, mode 0755 (drwxr-xr-x), and this process runs as uid {os.getuid()}, gid {os.getgid()}, "
        "which may not create files in it. Fix: chown it."
    )
    assert not (volume / "mnist").exists()


def test_an_existing_destination_it_cannot_write_is_named_itself(tmp_path, monkeypatch):
    dest = tmp_path / "mnist"
    dest.mkdir()
    dest.chmod(0o750)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != dest)
    with pytest.raises(
        VolumeNotWritable,
        match=rf"^--dest {dest}: cannot write there: {dest} belongs to uid "
        r"\d+, gid \d+, mode 0750 \(drwxr-x---\), and this process",
    ):
        stage(dest, log=_quiet)
    assert list(dest.iterdir()) == []


def test_the_command_exits_6_with_the_message_as_its_last_line(tmp_path, monkeypatch, capsys):
    volume = tmp_path / "volume"
    volume.mkdir()
    _refuse_mkdir(monkeypatch)
    code = stage_main(["--dest", str(volume / "mnist"), "--volume_hint", "The volume is hostPath.path /x."])
    assert code == EXIT_VOLUME_NOT_WRITABLE == 6
    err = capsys.readouterr().err
    assert err.startswith(f"error: --dest {volume}/mnist: cannot create it: {volume} belongs to uid "), err
    assert err.endswith("which may not create files in it. The volume is hostPath.path /x.\n"), err
    assert err.count("\n") == 1, err


def test_the_run_directory_is_made_once_the_data_is_in_place_and_named_when_it_cannot_be(
    tmp_path, monkeypatch, capsys
):
    # The stack's task pods mount the run directory alone (by subPath): staging makes it first.
    volume = tmp_path / "volume"
    run_dir = volume / "runs" / "dev-ns-mnist" / "0123456789ab"
    missing = ["--source", str(tmp_path / "nothing")]
    assert stage_main(["--dest", str(volume / "mnist"), *missing, "--run_dir", str(run_dir)]) == 1
    assert not run_dir.exists()  # a run that cannot start leaves no directory
    assert stage_main(["--dest", str(volume / "mnist"), "--run_dir", str(run_dir)]) == 0
    assert run_dir.is_dir() and capsys.readouterr().out.endswith(f"; run directory {run_dir}\n")
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if "other" in self.parts:
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    other = volume / "runs" / "other" / "key"
    assert stage_main(["--dest", str(volume / "mnist"), "--run_dir", str(other)]) == EXIT_VOLUME_NOT_WRITABLE
    err = capsys.readouterr().err
    assert err.startswith(f"error: --run_dir {other}: cannot create it: {volume / 'runs'} belongs to uid "), (
        err
    )
