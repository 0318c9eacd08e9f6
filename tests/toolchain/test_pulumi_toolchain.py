"""tools/pulumi-toolchain/pulumi-toolchain.sh choosing where pulumi-resource-alicloud comes from.

No real build: each test runs a copy of tools/pulumi-toolchain in a temporary "checkout" (so the
vendored sources' default place, ``../shared/vendor/alicloud-provider`` beside it, is the test's
own) with fakes on PATH that answer the way the real tools do here:

* ``pulumi`` v3.274.0 with a language host beside it (the script uses an installed CLI),
* a kubernetes plugin installed in ``PULUMI_HOME`` (the script links it, as it does a user's),
* ``go``: ``go mod download -json MODULE@VERSION`` answers with the proxy's 403 (what the proxy
  says for the alicloud module), the rest succeed quickly, and ``go build`` writes a provider
  that prints the version stamped by its ``-ldflags``,
* vendored sources: small ``.tar.xz`` archives with the layout of the real ones and their
  ``SHA256SUMS``.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALICLOUD = "pulumi-resource-alicloud"
VERSION = "3.95.0"
PROVIDER_ARCHIVE = f"pulumi-alicloud-v{VERSION}-provider.tar.xz"
TF_ARCHIVE = "terraform-provider-alicloud-v1.271.0.tar.xz"
SCHEMA_ARCHIVE = f"pulumi-alicloud-v{VERSION}-schema.json.xz"
REPLACE = "replace github.com/aliyun/terraform-provider-alicloud => ../../terraform-provider-alicloud"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the toolchain script and /proc are Linux's")

FAKE_GO = r"""#!/bin/bash
# Records each call (directory and arguments) in $FAKE_GO_CALLS.
printf '%s | go %s\n' "$PWD" "$*" >>"$FAKE_GO_CALLS"
if [ "$1 $2 $3" = "mod download -json" ]; then
  printf '{\n\t"Path": "%s",\n\t"Error": "%s: reading https://proxy.golang.org/...: 403 Forbidden"\n}\n' "${4%@*}" "$4"
  exit 1
fi
case "$1" in
  mod) exit 0 ;;
  build)
    grep -qxF "__REPLACE__" go.mod || { echo "go.mod lacks the replace directive" >&2; exit 1; }
    grep -q '"version":"3.95.0"' cmd/pulumi-resource-alicloud/schema-embed.json ||
      { echo "no schema-embed.json with the version set" >&2; exit 1; }
    out="" version=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -o) out="$2"; shift ;;
        -ldflags) version="${2##*pkg/version.Version=}"; shift ;;
      esac
      shift
    done
    /bin/sleep "${FAKE_GO_BUILD_SECONDS:-0}"
    printf '#!/bin/sh\n[ "$1" = -version ] && echo %s\n' "$version" >"$out" && chmod +x "$out" ;;
  *) echo "fake go: unexpected: $*" >&2; exit 2 ;;
esac
""".replace("__REPLACE__", REPLACE)


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _tar_xz(path: Path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:xz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def write_vendor(vendor: Path) -> Path:
    """The three vendored files, with the layout the script extracts, and their SHA256SUMS."""
    vendor.mkdir(parents=True)
    _tar_xz(
        vendor / PROVIDER_ARCHIVE,
        {
            "pulumi-alicloud/LICENSE": "Apache-2.0\n",
            "pulumi-alicloud/provider/go.mod": "module github.com/pulumi/pulumi-alicloud/provider/v3\n",
            f"pulumi-alicloud/provider/cmd/{ALICLOUD}/generate.go": "package main\n",
            f"pulumi-alicloud/provider/cmd/{ALICLOUD}/main.go": "package main\n",
        },
    )
    _tar_xz(
        vendor / TF_ARCHIVE,
        {"terraform-provider-alicloud/go.mod": "module github.com/aliyun/terraform-provider-alicloud\n"},
    )
    (vendor / SCHEMA_ARCHIVE).write_bytes(lzma.compress(b'{"name": "alicloud"}'))
    sums = "".join(
        f"{hashlib.sha256((vendor / f).read_bytes()).hexdigest()}  {f}\n"
        for f in (PROVIDER_ARCHIVE, SCHEMA_ARCHIVE, TF_ARCHIVE)
    )
    (vendor / "SHA256SUMS").write_text(sums)
    return vendor


@dataclass
class Sandbox:
    """A checkout holding a copy of tools/pulumi-toolchain, with its cache, fakes and environment."""

    root: Path
    env: dict[str, str]

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def default_vendor(self) -> Path:
        return self.root / "shared" / "vendor" / "alicloud-provider"

    def go_calls(self) -> list[str]:
        calls = self.root / "go-calls.txt"
        return calls.read_text().splitlines() if calls.exists() else []

    def run(self, **env: str) -> subprocess.CompletedProcess:
        """Runs the script to its exit, then fails if any process it started is still alive: a
        progress ticker left running would hold its stderr for up to its 30 s period. Asked of
        /proc at the exit, not timed: a loaded machine may take long over the script itself."""
        script = self.root / "checkout" / "tools" / "pulumi-toolchain" / "pulumi-toolchain.sh"
        out_path, err_path = self.root / "script.stdout", self.root / "script.stderr"
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen(["bash", str(script)], env={**self.env, **env}, stdout=out, stderr=err)
            proc.wait()  # the script ends by itself: its own steps are bounded
        left = processes_with(str(self.cache))
        assert left == [], (
            f"processes outlived the script (a progress ticker?): {left}\n{err_path.read_text()}"
        )
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, out_path.read_text(), err_path.read_text()
        )


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    for tool in ("pulumi-toolchain", "go-build"):
        shutil.copytree(REPO / "tools" / tool, tmp_path / "checkout" / "tools" / tool)
    fakes = tmp_path / "fakebin"
    _executable(fakes / "pulumi", '#!/bin/sh\n[ "$1" = version ] && echo v3.274.0\n')
    _executable(fakes / "pulumi-language-python", "#!/bin/sh\n")
    _executable(fakes / "pulumi-language-python-exec", "#!/bin/sh\n")
    _executable(fakes / "go", FAKE_GO)
    home = tmp_path / "pulumi-home"
    _executable(
        home / "plugins" / "resource-kubernetes-v4.25.0" / "pulumi-resource-kubernetes",
        '#!/bin/sh\n[ "$1" = -version ] && echo 4.25.0\n',
    )
    env = {
        "PATH": f"{fakes}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PULUMI_HOME": str(home),
        "PULUMI_TOOLCHAIN_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_CALLS": str(tmp_path / "go-calls.txt"),
    }
    return Sandbox(tmp_path, env)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment contains ``marker`` (the sandbox's cache path)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_vendored_sources_build_the_provider_when_the_proxy_refuses_it(sandbox: Sandbox) -> None:
    write_vendor(sandbox.default_vendor)
    result = sandbox.run(PULUMI_TOOLCHAIN_PROGRESS_S="1", FAKE_GO_BUILD_SECONDS="2.5")
    assert result.returncode == 0, result.stderr
    bin_dir = Path(result.stdout.splitlines()[-1])
    assert bin_dir == sandbox.cache / "bin"
    provider = bin_dir / ALICLOUD
    assert subprocess.run([provider, "-version"], capture_output=True, text=True).stdout == f"{VERSION}\n"
    assert provider.samefile(sandbox.cache / ALICLOUD / f"v{VERSION}" / ALICLOUD)
    assert not (bin_dir / f"BLOCKED-{ALICLOUD}").exists()
    assert not (sandbox.cache / ALICLOUD / f"v{VERSION}" / f"{ALICLOUD}.tmp").exists()
    assert list((sandbox.cache / "build").iterdir()) == [], "the extracted sources are removed"
    assert (
        f"vendored alicloud provider sources: 3 files match {sandbox.default_vendor.resolve()}/SHA256SUMS"
        in result.stderr
    )

    build_dir = sandbox.cache / "build" / f"{ALICLOUD}-{VERSION}-vendored" / "pulumi-alicloud" / "provider"
    calls = sandbox.go_calls()
    assert calls[-2:] == [
        f"{build_dir} | go mod download",
        f"{build_dir} | go build -trimpath -gcflags all=-dwarf=false -l -c=1 -gcflags std=-dwarf=false -c=1 -ldflags -s -w -X "
        f"github.com/pulumi/pulumi-alicloud/provider/v3/pkg/version.Version={VERSION} "
        f"-o {sandbox.cache}/{ALICLOUD}/v{VERSION}/{ALICLOUD}.tmp ./cmd/{ALICLOUD}",
    ]
    steps = [
        line.split()[0] for line in (sandbox.cache / "logs" / "build-times.txt").read_text().splitlines()
    ]
    assert steps == [f"{ALICLOUD}:go-mod-download", ALICLOUD]

    log = sandbox.cache / "logs" / f"{ALICLOUD}-v{VERSION}.log"
    progress = [
        line
        for line in result.stderr.splitlines()
        if line.startswith(f"[pulumi-toolchain] ... building {ALICLOUD} {VERSION}: ")
    ]
    assert progress and all(line.endswith(f" s elapsed (log: {log})") for line in progress), result.stderr
    assert processes_with(str(sandbox.cache)) == [], "a progress ticker outlived the script"

    again = sandbox.run()
    assert again.returncode == 0, again.stderr
    assert f"{ALICLOUD} {VERSION}: cached ({sandbox.cache}/{ALICLOUD}/v{VERSION})" in again.stderr
    assert sandbox.go_calls() == calls, "a cached provider that prints its version is not rebuilt"

    cached = sandbox.cache / ALICLOUD / f"v{VERSION}" / ALICLOUD
    cached.unlink()
    _executable(cached, "#!/bin/sh\necho 3.94.0\n")
    stale = sandbox.run()
    assert stale.returncode == 0, stale.stderr
    assert f"the cached {cached} does not print {VERSION} for -version; replacing it" in stale.stderr
    assert len([call for call in sandbox.go_calls() if " | go build " in call]) == 2
    assert (
        subprocess.run([bin_dir / ALICLOUD, "-version"], capture_output=True, text=True).stdout
        == f"{VERSION}\n"
    )


def test_a_checksum_mismatch_fails_naming_the_file_before_anything_is_extracted(sandbox: Sandbox) -> None:
    vendor = write_vendor(sandbox.root / "elsewhere")
    damaged = vendor / TF_ARCHIVE
    damaged.write_bytes(damaged.read_bytes() + b"\0")
    result = sandbox.run(ALICLOUD_PROVIDER_VENDOR_DIR=str(vendor))
    assert result.returncode == 1
    assert f"[pulumi-toolchain] ERROR: checksum mismatch for {vendor}/{TF_ARCHIVE}" in result.stderr
    assert f"SHA256SUMS says {hashlib.sha256(damaged.read_bytes()[:-1]).hexdigest()}" in result.stderr
    assert not (sandbox.cache / "build" / f"{ALICLOUD}-{VERSION}-vendored").exists()
    assert not [call for call in sandbox.go_calls() if " | go build " in call]
    assert not (sandbox.cache / "bin" / ALICLOUD).exists()
    assert not (sandbox.cache / "bin" / f"BLOCKED-{ALICLOUD}").exists()


def test_a_vendored_file_missing_fails_naming_it(sandbox: Sandbox) -> None:
    vendor = write_vendor(sandbox.default_vendor)
    (vendor / SCHEMA_ARCHIVE).unlink()
    result = sandbox.run()
    assert result.returncode == 1
    assert (
        f"ERROR: vendored alicloud provider sources: {vendor.resolve()}/{SCHEMA_ARCHIVE} is missing"
        in result.stderr
    )


def test_without_vendored_sources_the_refusal_is_recorded_as_blocked(sandbox: Sandbox) -> None:
    result = sandbox.run()
    assert result.returncode == 0, result.stderr
    bin_dir = sandbox.cache / "bin"
    marker = (bin_dir / f"BLOCKED-{ALICLOUD}").read_text()
    assert marker.startswith(
        f"BLOCKED: {ALICLOUD} {VERSION} cannot be built: the Go module proxy refused "
        "github.com/pulumi/pulumi-alicloud/provider/v3@v3.0.0-20260212042644-1124c9f72f1b"
    )
    assert f"no vendored sources in {sandbox.default_vendor}" in marker
    assert not (bin_dir / ALICLOUD).exists()
    assert (bin_dir / "pulumi-resource-kubernetes").exists()
    assert sandbox.run(PULUMI_TOOLCHAIN_STRICT="1").returncode == 3


def test_a_vendor_dir_named_but_absent_fails_naming_it(sandbox: Sandbox) -> None:
    absent = sandbox.root / "no-such-dir"
    result = sandbox.run(ALICLOUD_PROVIDER_VENDOR_DIR=str(absent))
    assert result.returncode == 1
    assert f"ERROR: ALICLOUD_PROVIDER_VENDOR_DIR={absent} is not a directory" in result.stderr


def test_preview_tests_expect_the_alicloud_provider_where_its_vendored_sources_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.preview.conftest import require_binary
    from tests.preview.engine import Toolchain

    blocked = Toolchain(tmp_path, (ALICLOUD,), {ALICLOUD: "BLOCKED: the Go module proxy refused it"})
    vendor = write_vendor(tmp_path / "vendor")
    monkeypatch.setenv("ALICLOUD_PROVIDER_VENDOR_DIR", str(vendor))
    monkeypatch.setenv("REQUIRE_PULUMI_ENGINE", "1")
    with pytest.raises(pytest.fail.Exception, match=f"its vendored sources are in {vendor}: run "):
        require_binary(blocked, ALICLOUD)
    monkeypatch.delenv("REQUIRE_PULUMI_ENGINE")
    with pytest.raises(pytest.skip.Exception, match="its vendored sources are in"):
        require_binary(blocked, ALICLOUD)

    monkeypatch.setenv("REQUIRE_PULUMI_ENGINE", "1")
    monkeypatch.setenv("ALICLOUD_PROVIDER_VENDOR_DIR", str(tmp_path / "absent"))
    with pytest.raises(pytest.skip.Exception, match="BLOCKED: the Go module proxy refused it"):
        require_binary(blocked, ALICLOUD)
