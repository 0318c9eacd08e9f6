#!/usr/bin/env bash
# Finds or builds the real Pulumi engine for this project and prints, as its LAST stdout line,
# the absolute directory holding:
#   pulumi                       the CLI (an installed one on PATH, or built from pkg/v3)
#   pulumi-language-python       Python language host (installed one, or tools/pulumi-toolchain/pulumi_language_python.py)
#   pulumi-language-python-exec  the Python SDK's program runner, beside the language host
#   pulumi-resource-kubernetes   provider, built from the Go module at the pinned release in the
#                                wrapper module tools/go-build/kubernetes-programs (see below)
#   pulumi-resource-alicloud     provider, built from the Go module at the pinned release, or from
#                                its vendored sources where the proxy refuses that module
# Progress and the time of each build go to stderr, with a line at least every
# $PULUMI_TOOLCHAIN_PROGRESS_S (30) seconds while a long step runs (elapsed time, step, log).
# Idempotent: binaries are cached outside the repo in
# ${PULUMI_TOOLCHAIN_CACHE:-$HOME/.cache/tf-mnist-pulumi}, one directory per name and version,
# the CLI and the alicloud provider checked by the version they print, so a second run only
# re-links them. Each build's wall time, CPU time and peak memory are appended to
# <cache>/logs/build-times.txt.
#
# Versions: the Python SDKs in requirements.txt are pinned to the provider versions built here
# (pulumi-kubernetes==4.25.0, pulumi-alicloud==3.95.0) because a provider answers with the schema
# of its own release. The CLI is v3.274.0 because the Go module proxy refuses pkg/v3 v3.271.0,
# v3.272.0 and v3.273.0 (403); the engine speaks the same protocol to the 3.272.0 Python SDK.
# The Go language host (module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
# is refused in every form, so without an installed CLI the language host is
# tools/pulumi-toolchain/pulumi_language_python.py, running the SDK's own pulumi-language-python-exec.
#
# The alicloud provider: the proxy refuses the two modules it is built from
# (github.com/pulumi/pulumi-alicloud/provider/v3 at the v3.95.0 release commit, and
# github.com/aliyun/terraform-provider-alicloud v1.271.0) and serves the rest of its graph. So,
# in this order: a cached build; a plugin installed with `pulumi plugin install resource alicloud
# 3.95.0` (what users with internet have); the module from the proxy; the two modules' sources
# vendored beside the checkout, in ../shared/vendor/alicloud-provider (or
# $ALICLOUD_PROVIDER_VENDOR_DIR), checked against their SHA256SUMS before anything is read, then
# extracted and built under <cache>/build (never in the repo) the way upstream builds it
# (docs/building.md gives its time and memory); its 304 modules take 1.6 GB of the module cache
# (1.5 GB of them not shared with the CLI's).
#
# PULUMI_TOOLCHAIN_PROVIDERS (default "kubernetes alicloud") names the providers to find or
# build; scripts/test.sh asks for kubernetes alone first, so that the tests needing only the CLI
# and that provider start while the alicloud provider builds. A provider left out is neither
# built nor unlinked from the bin directory.
#
# Exit status: non-zero, naming the module and version or the file, when a build fails, the
# proxy refuses a module the CLI or the kubernetes provider needs, or a vendored file is missing
# or fails its checksum. Only where the proxy refuses the alicloud module AND there are no
# vendored sources is that refusal printed loudly and recorded in the bin directory as
# BLOCKED-pulumi-resource-alicloud (tests read it); the script then still exits 0 so the rest of
# the test suite runs. Set PULUMI_TOOLCHAIN_STRICT=1 to make it fatal.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="$repo/tools/pulumi-toolchain"   # this tool's folder: its Go wrapper modules and language host
# The kubernetes provider's wrapper module, shared with tools/local-cluster/build.sh (same flags,
# env.sh): the packages both need (k8s.io/*, protobuf, grpc, ...) compile once in the build cache.
kubernetes_programs="$repo/tools/go-build/kubernetes-programs"

PULUMI_CLI_VERSION=3.274.0
PULUMI_MIN_INSTALLED_CLI=3.272.0          # an installed CLI at least as new as the Python SDK
PULUMI_SDK_MODULE=github.com/pulumi/pulumi/sdk/v3
PULUMI_SDK_VERSION=3.272.0                # = pulumi in requirements.txt; source of the exec script
KUBERNETES_VERSION=4.25.0
KUBERNETES_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
KUBERNETES_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199   # the v4.25.0 release commit
ALICLOUD_VERSION=3.95.0
ALICLOUD_MODULE=github.com/pulumi/pulumi-alicloud/provider/v3
ALICLOUD_MODULE_VERSION=v3.0.0-20260212042644-1124c9f72f1b     # the v3.95.0 release commit
ALICLOUD_TF_VERSION=1.271.0   # terraform-provider-alicloud, as the v3.95.0 provider's go.mod requires
# The vendored sources' directory: beside the checkout (CI copies shared/ next to its clone).
alicloud_vendor_default="$(cd "$repo/.." && pwd)/shared/vendor/alicloud-provider"

cache="${PULUMI_TOOLCHAIN_CACHE:-$HOME/.cache/tf-mnist-pulumi}"
mkdir -p "$cache/logs"
cache="$(cd "$cache" && pwd)"
# The kubernetes provider's cache directory: its version and a digest of its main.go and of the
# shared module's go.mod and go.sum, so that a new build list (a k8s.io/* release) rebuilds it.
kubernetes_out="$cache/pulumi-resource-kubernetes/v$KUBERNETES_VERSION-$(cd "$kubernetes_programs" &&
  cat go.mod go.sum cmd/pulumi-resource-kubernetes/main.go | sha256sum | cut -c1-12)"

log() { printf '[pulumi-toolchain] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Go builds: static, no VCS stamping, no debug information, less GC (tools/go-build/env.sh).
# shellcheck source=../go-build/env.sh
source "$repo/tools/go-build/env.sh"

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

require_go() {
  command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build $1 (Go >= 1.26)"
}

# module_dir MODULE VERSION: downloads MODULE@VERSION and prints its directory in the module
# cache, or fails naming the module and version the proxy refused.
module_dir() {
  local out rc=0 logfile
  logfile="$cache/logs/go-mod-download-$(printf '%s' "$1@$2" | tr -c 'A-Za-z0-9._@-' '_').log"
  start_ticker "go mod download $1@$2" "$logfile"
  # Bounded: a proxy that does not answer is reported like a refusal, never a hang.
  timeout "${PULUMI_TOOLCHAIN_PROXY_TIMEOUT:-300}" go mod download -json "$1@$2" >"$logfile" 2>&1 || rc=$?
  stop_ticker
  out="$(cat "$logfile")"
  if [ "$rc" -ne 0 ]; then
    if printf '%s' "$out" | grep -q '"Dir"'; then :; else
      log "the Go module proxy refused (or did not answer for) $1@$2:"
      { printf '%s\n' "$out" | grep -E '"Error"' || printf '%s\n' "$out" | tail -n 5; } |
        sed 's/^/[pulumi-toolchain]   /' >&2
      return 3
    fi
  fi
  printf '%s' "$out" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# start_ticker STEP LOG: until stop_ticker, a line on stderr every $PULUMI_TOOLCHAIN_PROGRESS_S
# (30) seconds, so that a compile that prints nothing for 15 minutes never looks like a hang.
# The ticker is one subshell with no child process (it waits in `read -t` on a FIFO that never
# delivers), so killing its pid leaves nothing behind; it also ends by itself once the shell that
# started it is gone. One ticker at a time per shell.
ticker_pid=""
start_ticker() {
  local step="$1" logfile="$2" owner="$BASHPID" start fifo
  start="$(date +%s)"
  fifo="$cache/.ticker.$owner.fifo"
  rm -f "$fifo" && mkfifo "$fifo"
  (
    exec 8<>"$fifo"
    rm -f "$fifo"
    while kill -0 "$owner" 2>/dev/null; do
      if ! read -r -t "${PULUMI_TOOLCHAIN_PROGRESS_S:-30}" -u 8 _; then
        kill -0 "$owner" 2>/dev/null || break
        log "... $step: $(($(date +%s) - start)) s elapsed (log: $logfile)"
      fi
    done
  ) >&2 &
  ticker_pid=$!
  trap stop_ticker EXIT
  trap 'stop_ticker; exit 130' INT
  trap 'stop_ticker; exit 143' TERM
}

stop_ticker() {
  trap - EXIT INT TERM
  [ -n "$ticker_pid" ] || return 0
  kill "$ticker_pid" 2>/dev/null || true
  wait "$ticker_pid" 2>/dev/null || true
  ticker_pid=""
}

# timed_build STEP VERSION LOG -- CMD...: runs a build step at low priority, its output in LOG,
# with progress lines while it runs; prints its wall time, CPU time and peak memory and appends
# them to <cache>/logs/build-times.txt; exits naming STEP and LOG when it fails.
timed_build() {
  local name="$1" version="$2" logfile="$3"; shift 4
  local start end rc=0
  start="$(date +%s)"
  log "building $name $version (log: $logfile) ..."
  start_ticker "building $name $version" "$logfile"
  if [ -x /usr/bin/time ]; then
    nice -n "${PULUMI_TOOLCHAIN_NICE:-10}" /usr/bin/time -v "$@" >"$logfile" 2>&1 || rc=$?
  else
    nice -n "${PULUMI_TOOLCHAIN_NICE:-10}" "$@" >"$logfile" 2>&1 || rc=$?
  fi
  stop_ticker
  end="$(date +%s)"
  local rss cpu
  rss="$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$logfile" | tail -n1)"
  cpu="$(awk -F': ' '/^[[:space:]]*(User|System) time \(seconds\)/ {t += $2; n++} END {if (n) printf "%.0f", t}' "$logfile")"
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$logfile" | sed 's/^/[pulumi-toolchain]   /' >&2
    die "building $name $version failed after $((end - start)) s (exit $rc); see $logfile"
  fi
  log "built $name $version in $((end - start)) s${cpu:+, CPU $cpu s}${rss:+, peak RSS $((rss / 1024)) MiB}"
  printf '%s %s wall_s=%s cpu_s=%s peak_rss_kib=%s\n' "$name" "$version" "$((end - start))" "${cpu:-?}" \
    "${rss:-?}" >>"$cache/logs/build-times.txt"
}

# provider_version_is NAME BIN VERSION: BIN -version prints VERSION, the pkg/version ldflag that
# the provider also reports to the engine. Bridged providers (tfbridge.Main: alicloud) answer
# -version; pulumi-resource-kubernetes's main has no such flag, so for it the version of the
# cache directory is taken as it is.
provider_version_is() {
  [ "$1" != pulumi-resource-kubernetes ] || return 0
  local got
  got="$(timeout 60 "$2" -version 2>/dev/null | head -n 1)" || true
  [ "$got" = "$3" ]
}

# prepare_build_dir NAME VERSION [MODULE]: a fresh copy of the wrapper module MODULE (default:
# tools/pulumi-toolchain/go/NAME).
prepare_build_dir() {
  local dir="$cache/build/$1-$2"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -R "${3:-$tools/go/$1}/." "$dir/"
  chmod -R u+w "$dir"
  printf '%s' "$dir"
}

# embed_schema SRC DEST VERSION: the provider's schema.json with "version" set, compacted (what
# the providers' own `go generate` step writes to schema-embed.json).
embed_schema() { python3 "$tools/embed_schema.py" "$1" "$2" "$3"; }

# ---------------------------------------------------------------- the CLI and language host
build_cli() {
  local out="$cache/pulumi/v$PULUMI_CLI_VERSION"
  if [ -x "$out/pulumi" ] && [ "$("$out/pulumi" version 2>/dev/null)" = "v$PULUMI_CLI_VERSION" ]; then
    log "pulumi v$PULUMI_CLI_VERSION: cached ($out)"
    return
  fi
  require_go "the Pulumi CLI"
  local dir
  dir="$(prepare_build_dir pulumi "$PULUMI_CLI_VERSION")"
  (cd "$dir" && module_dir github.com/pulumi/pulumi/pkg/v3 "v$PULUMI_CLI_VERSION" >/dev/null) ||
    die "cannot build pulumi: module github.com/pulumi/pulumi/pkg/v3@v$PULUMI_CLI_VERSION refused"
  mkdir -p "$out"
  (cd "$dir" && timed_build pulumi "v$PULUMI_CLI_VERSION" "$cache/logs/pulumi-v$PULUMI_CLI_VERSION.log" -- \
    go build "${GO_COMPILE_FLAGS[@]}" -tags osusergo,grpcnotrace \
    -ldflags "$GO_NO_DEBUG_LDFLAGS -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_CLI_VERSION" \
    -o "$out/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  [ "$("$out/pulumi.tmp" version 2>/dev/null)" = "v$PULUMI_CLI_VERSION" ] ||
    die "the pulumi just built ($out/pulumi.tmp) does not print v$PULUMI_CLI_VERSION for 'pulumi version'"
  mv -f "$out/pulumi.tmp" "$out/pulumi"
  rm -rf "$dir"
}

# Our Python language host (see tools/pulumi-toolchain/pulumi_language_python.py for why) plus the SDK's own
# pulumi-language-python-exec, copied from the sdk/v3 module of the pinned SDK release.
install_language_host() {
  local out="$cache/pulumi-language-python/v$PULUMI_SDK_VERSION"
  mkdir -p "$out"
  if [ ! -f "$out/pulumi-language-python-exec" ]; then
    require_go "the Python language host's exec script"
    local sdk
    sdk="$(cd "$tools/go/pulumi" && module_dir "$PULUMI_SDK_MODULE" "v$PULUMI_SDK_VERSION")" ||
      die "cannot get pulumi-language-python-exec: module $PULUMI_SDK_MODULE@v$PULUMI_SDK_VERSION refused"
    install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$out/pulumi-language-python-exec.tmp"
    mv -f "$out/pulumi-language-python-exec.tmp" "$out/pulumi-language-python-exec"
    log "pulumi-language-python-exec: copied from $PULUMI_SDK_MODULE@v$PULUMI_SDK_VERSION"
  fi
  # The host's source is ours and small: refresh it every run so edits take effect.
  install -m 0644 "$tools/pulumi_language_python.py" "$out/pulumi_language_python.py"
  printf '%s\n' "$PULUMI_SDK_VERSION" >"$out/pulumi-language-python.version"
  if [ -x "$repo/.venv/bin/python" ]; then
    printf '%s\n' "$repo/.venv/bin/python" >"$out/pulumi-language-python.python"
  fi
  cat >"$out/pulumi-language-python.tmp" <<'EOF'
#!/bin/sh
# Pulumi Python language host (tools/pulumi-toolchain/pulumi_language_python.py). It needs a Python with the
# pulumi SDK and grpcio, found in this order: $PULUMI_LANGUAGE_HOST_PYTHON; the virtualenv that
# ./Pulumi.yaml names (the CLI starts plugins in the project directory); ./.venv; the Python of
# the project that last ran tools/pulumi-toolchain/pulumi-toolchain.sh; python3 on PATH.
here="$(dirname "$(readlink -f "$0")")"
py="${PULUMI_LANGUAGE_HOST_PYTHON:-}"
if [ -z "$py" ] && [ -f Pulumi.yaml ]; then
  venv="$(sed -n 's/^[[:space:]]*virtualenv:[[:space:]]*//p' Pulumi.yaml | head -n 1 | tr -d "\"' ")"
  if [ -n "$venv" ] && [ -x "$venv/bin/python" ]; then py="$venv/bin/python"; fi
fi
if [ -z "$py" ] && [ -x ./.venv/bin/python ]; then py=./.venv/bin/python; fi
if [ -z "$py" ] && [ -f "$here/pulumi-language-python.python" ]; then
  py="$(cat "$here/pulumi-language-python.python")"
  [ -x "$py" ] || py=""
fi
exec "${py:-python3}" "$here/pulumi_language_python.py" "$@"
EOF
  chmod 0755 "$out/pulumi-language-python.tmp"
  mv -f "$out/pulumi-language-python.tmp" "$out/pulumi-language-python"
}

# ---------------------------------------------------------------- providers
# build_provider NAME VERSION MODULE MODULE_VERSION: builds (or finds) a provider. When the proxy
# refuses MODULE@MODULE_VERSION it sets refused=MODULE@MODULE_VERSION and returns 0, so that it
# is never called in an `||` list (which would switch off `set -e` inside it).
refused=""
build_provider() {
  local name="$1" version="$2" module="$3" modver="$4"
  local plugin="${name#pulumi-resource-}"
  local out="$cache/$name/v$version" wrapper="" pkg=.   # pkg: the main package in the wrapper
  if [ "$plugin" = kubernetes ]; then out="$kubernetes_out" wrapper="$kubernetes_programs" pkg="./cmd/$name"; fi
  if [ -x "$out/$name" ]; then
    if provider_version_is "$name" "$out/$name" "$version"; then
      log "$name $version: cached ($out)"
      return 0
    fi
    log "$name: the cached $out/$name does not print $version for -version; replacing it"
  fi
  local installed="${PULUMI_HOME:-$HOME/.pulumi}/plugins/resource-$plugin-v$version/$name"
  if [ -x "$installed" ]; then
    log "$name $version: using installed plugin $installed"
    mkdir -p "$out" && ln -sf "$installed" "$out/$name"
    return 0
  fi
  require_go "$name"
  local dir src
  dir="$(prepare_build_dir "$name" "$version" "$wrapper")"
  if ! src="$(cd "$dir" && module_dir "$module" "$modver")"; then
    refused="$module@$modver"
    rm -rf "$dir"
    return 0
  fi
  if [ ! -f "$dir/go.sum" ]; then
    (cd "$dir" && go mod tidy >"$cache/logs/$name-v$version-tidy.log" 2>&1) ||
      die "go mod tidy for $name $version failed: $(grep -m3 -E 'refused|403|not available|error' \
        "$cache/logs/$name-v$version-tidy.log" || tail -n3 "$cache/logs/$name-v$version-tidy.log")"
  fi
  embed_schema "$src/cmd/$name/schema.json" "$dir/$pkg/schema-embed.json" "$version"
  if [ "$plugin" = kubernetes ]; then
    embed_schema "$src/cmd/$name/terraform-mapping.json" "$dir/$pkg/terraform-mapping-embed.json" ""
  fi
  mkdir -p "$out"
  # The flags of tools/local-cluster/build.sh (its -X differ: they change only the link).
  (cd "$dir" && timed_build "$name" "$version" "$cache/logs/$name-v$version.log" -- \
    go build "${GO_COMPILE_FLAGS[@]}" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS -X $module/pkg/version.Version=$version" -o "$out/$name.tmp" "$pkg")
  provider_version_is "$name" "$out/$name.tmp" "$version" ||
    die "the $name just built ($out/$name.tmp) does not print $version for -version"
  mv -f "$out/$name.tmp" "$out/$name"
  rm -rf "$dir"
}

# ---------------------------------------------------------------- alicloud from vendored sources
# The files build_alicloud_vendored reads, each checked against the directory's SHA256SUMS.
ALICLOUD_PROVIDER_ARCHIVE="pulumi-alicloud-v$ALICLOUD_VERSION-provider.tar.xz"
ALICLOUD_TF_ARCHIVE="terraform-provider-alicloud-v$ALICLOUD_TF_VERSION.tar.xz"
ALICLOUD_SCHEMA_ARCHIVE="pulumi-alicloud-v$ALICLOUD_VERSION-schema.json.xz"

# loud MESSAGE...: a banner on stderr, then exit 1.
loud() {
  log "************************************************************************"
  local line
  for line in "$@"; do log "$line"; done
  log "************************************************************************"
  exit 1
}

# verify_vendor DIR: each file the build reads exists and matches its line in DIR/SHA256SUMS;
# otherwise exits naming the file (nothing has been extracted yet).
verify_vendor() {
  local dir="$1" f want got
  [ -f "$dir/SHA256SUMS" ] ||
    loud "ERROR: $dir/SHA256SUMS is missing: the vendored alicloud provider sources cannot be verified"
  for f in "$ALICLOUD_PROVIDER_ARCHIVE" "$ALICLOUD_TF_ARCHIVE" "$ALICLOUD_SCHEMA_ARCHIVE"; do
    [ -f "$dir/$f" ] || loud "ERROR: vendored alicloud provider sources: $dir/$f is missing"
    want="$(awk -v f="$f" '$2 == f || $2 == "*" f { print $1; exit }' "$dir/SHA256SUMS")"
    [ -n "$want" ] || loud "ERROR: vendored alicloud provider sources: $f has no line in $dir/SHA256SUMS"
    got="$(sha256sum "$dir/$f" | cut -d ' ' -f 1)"
    [ "$got" = "$want" ] || loud "ERROR: checksum mismatch for $dir/$f" \
      "  sha256 $got" "  SHA256SUMS says $want" \
      "the vendored alicloud provider sources are damaged or of another release; nothing was built"
  done
  log "vendored alicloud provider sources: 3 files match $dir/SHA256SUMS"
}

# build_alicloud_vendored DIR: pulumi-resource-alicloud built from the vendored sources in DIR,
# as upstream's Makefile builds it: both archives extracted under <cache>/build, schema.json
# beside cmd/pulumi-resource-alicloud, a replace directive pointing the terraform provider's
# module at its extracted source, schema-embed.json as upstream's generate.go writes it, and every
# other module from the proxy (-mod=mod: go.sum as vendored, verified, unchanged in practice).
build_alicloud_vendored() {
  local vendor="$1" name=pulumi-resource-alicloud version="$ALICLOUD_VERSION"
  local out="$cache/$name/v$version" dir="$cache/build/$name-$version-vendored"
  local logs="$cache/logs/$name-v$version"
  verify_vendor "$vendor"
  require_go "$name"
  log "$name $version: building from the vendored sources in $vendor (in $dir)"
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -xJf "$vendor/$ALICLOUD_PROVIDER_ARCHIVE" -C "$dir" --no-same-owner
  tar -xJf "$vendor/$ALICLOUD_TF_ARCHIVE" -C "$dir" --no-same-owner
  chmod -R u+w "$dir"
  local src="$dir/pulumi-alicloud/provider"
  [ -f "$src/go.mod" ] && [ -d "$src/cmd/$name" ] ||
    die "$vendor/$ALICLOUD_PROVIDER_ARCHIVE has no pulumi-alicloud/provider/go.mod or cmd/$name"
  [ -f "$dir/terraform-provider-alicloud/go.mod" ] ||
    die "$vendor/$ALICLOUD_TF_ARCHIVE has no terraform-provider-alicloud/go.mod"
  xz -dc "$vendor/$ALICLOUD_SCHEMA_ARCHIVE" >"$src/cmd/$name/schema.json"
  printf '\nreplace github.com/aliyun/terraform-provider-alicloud => ../../terraform-provider-alicloud\n' \
    >>"$src/go.mod"
  mkdir -p "$out"
  (
    cd "$src"
    export GOFLAGS="$GOFLAGS -mod=mod"
    timed_build "$name:go-mod-download" "$version" "$logs-download.log" -- go mod download
    # What upstream's `go run generate.go` writes, without compiling it (with flags of its own,
    # none of its packages would be shared with the provider's compile).
    embed_schema "cmd/$name/schema.json" "cmd/$name/schema-embed.json" "$version"
    timed_build "$name" "$version" "$logs.log" -- go build "${GO_COMPILE_FLAGS[@]}" \
      -ldflags "$GO_NO_DEBUG_LDFLAGS -X $ALICLOUD_MODULE/pkg/version.Version=$version" -o "$out/$name.tmp" "./cmd/$name"
  )
  provider_version_is "$name" "$out/$name.tmp" "$version" ||
    die "the $name built from $vendor ($out/$name.tmp) does not print $version for -version"
  mv -f "$out/$name.tmp" "$out/$name"
  rm -rf "$dir"
}

# ---------------------------------------------------------------- main
total_start="$(date +%s)"
bin="$cache/bin"
mkdir -p "$bin"
# One run at a time per cache (test runs may start together; tools/go-build/env.sh), with
# progress lines while it waits.
lock_wait_ticker() {
  if [ "$1" = start ]; then start_ticker "waiting for the other run's lock" "$cache/logs"; else stop_ticker; fi
}
hold_build_lock "$cache/.lock" "another run holds $cache/.lock (building, perhaps); waiting for it to finish" \
  lock_wait_ticker

# 1. CLI + language host: an installed CLI of a suitable version (what users have) wins.
installed_cli="$(command -v pulumi 2>/dev/null || true)"
if [ -n "$installed_cli" ] && [ "$(readlink -f "$installed_cli")" != "$(readlink -f "$bin/pulumi" 2>/dev/null)" ]; then
  installed_version="$("$installed_cli" version 2>/dev/null | sed 's/^v//')"
  host_dir="$(dirname "$(readlink -f "$installed_cli")")"
  if [ -n "$installed_version" ] && version_ge "$installed_version" "$PULUMI_MIN_INSTALLED_CLI" &&
    [ -x "$host_dir/pulumi-language-python" ] && [ -e "$host_dir/pulumi-language-python-exec" ]; then
    log "using installed pulumi v$installed_version ($installed_cli)"
    cli_dir="$host_dir"
    lang_dir="$host_dir"
  fi
fi
if [ -z "${cli_dir:-}" ]; then
  build_cli
  install_language_host
  cli_dir="$cache/pulumi/v$PULUMI_CLI_VERSION"
  lang_dir="$cache/pulumi-language-python/v$PULUMI_SDK_VERSION"
fi

# 2. Providers, one after another (the alicloud build alone needs several GB of memory).
providers=" ${PULUMI_TOOLCHAIN_PROVIDERS:-kubernetes alicloud} "
for wanted in $providers; do
  case "$wanted" in kubernetes|alicloud) ;; *)
    die "PULUMI_TOOLCHAIN_PROVIDERS=${PULUMI_TOOLCHAIN_PROVIDERS:-}: '$wanted' is not a provider this script builds (kubernetes, alicloud)" ;;
  esac
done
want_provider() { [[ "$providers" == *" $1 "* ]]; }
if want_provider kubernetes; then
  build_provider pulumi-resource-kubernetes "$KUBERNETES_VERSION" "$KUBERNETES_MODULE" "$KUBERNETES_MODULE_VERSION"
  [ -z "$refused" ] || die "cannot build pulumi-resource-kubernetes $KUBERNETES_VERSION: the Go module proxy refused $refused"
fi
alicloud_rc=0
if want_provider alicloud; then
  build_provider pulumi-resource-alicloud "$ALICLOUD_VERSION" "$ALICLOUD_MODULE" "$ALICLOUD_MODULE_VERSION"
  if [ -n "$refused" ]; then
    # Named explicitly, the directory must be there; the default one is optional.
    vendor="${ALICLOUD_PROVIDER_VENDOR_DIR:-$alicloud_vendor_default}"
    if [ -n "${ALICLOUD_PROVIDER_VENDOR_DIR:-}" ] && [ ! -d "$vendor" ]; then
      die "ALICLOUD_PROVIDER_VENDOR_DIR=$vendor is not a directory (it should hold the vendored alicloud provider sources and their SHA256SUMS)"
    fi
    if [ -d "$vendor" ]; then
      vendor="$(cd "$vendor" && pwd)"
      log "the proxy refused $refused; the vendored sources are in $vendor"
      build_alicloud_vendored "$vendor"
      refused=""
    fi
  fi
  if [ -n "$refused" ]; then
    alicloud_rc=3
    msg="BLOCKED: pulumi-resource-alicloud $ALICLOUD_VERSION cannot be built: the Go module proxy refused $refused (the v$ALICLOUD_VERSION release commit), and there are no vendored sources in $alicloud_vendor_default"
    log "************************************************************************"
    log "$msg"
    log "previews that create alicloud resources cannot run until it is served or installed"
    log "(pulumi plugin install resource alicloud $ALICLOUD_VERSION puts it in \$PULUMI_HOME/plugins;"
    log "or set ALICLOUD_PROVIDER_VENDOR_DIR to the vendored sources)."
    log "************************************************************************"
    [ "${PULUMI_TOOLCHAIN_STRICT:-0}" = 1 ] && exit 3
  fi
fi

# 3. One directory with all five names (hard links where possible: the CLI resolves its own
# path through symlinks when it looks for plugins beside itself).
# put SRC NAME: replace bin/NAME atomically (a test may be running the old one).
put() {
  # Already this file (a hard link from an earlier run) or an identical copy: nothing to do.
  if [ "$1" -ef "$bin/$2" ] || cmp -s "$1" "$bin/$2" 2>/dev/null; then return 0; fi
  ln -f "$1" "$bin/.$2.tmp" 2>/dev/null || cp -f "$1" "$bin/.$2.tmp"
  mv -f "$bin/.$2.tmp" "$bin/$2"
}
put "$cli_dir/pulumi" pulumi
# The language host shim and its sources must stay together; copy them side by side.
for f in pulumi-language-python pulumi-language-python-exec pulumi_language_python.py \
  pulumi-language-python.version pulumi-language-python.python; do
  if [ -e "$lang_dir/$f" ]; then cp -f "$lang_dir/$f" "$bin/.$f.tmp" && mv -f "$bin/.$f.tmp" "$bin/$f"; fi
done
if want_provider kubernetes; then
  put "$(readlink -f "$kubernetes_out/pulumi-resource-kubernetes")" pulumi-resource-kubernetes
fi
if ! want_provider alicloud; then
  :
elif [ "$alicloud_rc" -eq 0 ]; then
  put "$(readlink -f "$cache/pulumi-resource-alicloud/v$ALICLOUD_VERSION/pulumi-resource-alicloud")" pulumi-resource-alicloud
  rm -f "$bin/BLOCKED-pulumi-resource-alicloud"
else
  rm -f "$bin/pulumi-resource-alicloud"
  printf '%s\n' "$msg" >"$bin/.BLOCKED.tmp"
  mv -f "$bin/.BLOCKED.tmp" "$bin/BLOCKED-pulumi-resource-alicloud"
fi

log "toolchain ready in $(($(date +%s) - total_start)) s: $bin"
echo "$bin"
