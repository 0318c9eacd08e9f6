#!/usr/bin/env bash
# Builds (or finds in its cache) the binaries of the local single-machine Kubernetes cluster and
# prints, as its LAST stdout line, the absolute directory holding all of them:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl   (k8s.io/kubernetes)
#   etcd                                                                     (go.etcd.io/etcd)
#   coredns                           (our minimal CoreDNS, tools/local-cluster/go/coredns)
#   crictl                                                                   (sigs.k8s.io/cri-tools)
#   network-policies   (our NetworkPolicy agent, tools/local-cluster/go/network-policies, on the
#                       controller of sigs.k8s.io/kube-network-policies)
# Each comes from a wrapper module under tools/local-cluster/go/ through the Go module proxy.
# Progress goes to stderr, with each build's wall time, CPU seconds (user+sys) and peak RSS (the
# largest single process, from /usr/bin/time -v); one line per build is appended to
# <cache>/logs/build-times.txt.
#
# Cache: ${LOCAL_CLUSTER_CACHE:-$HOME/.cache/tf-mnist-local-cluster}/<name>/<version>/, e.g.
# kubernetes/v1.34.4/kube-apiserver. A cached binary is used only when its --version reports the
# pinned version (a wrong or broken one is rebuilt); new binaries are checked the same way before
# they are moved into place. <cache>/bin holds hard links (or copies), each replaced atomically.
# One run at a time per cache (flock): a second run waits and then finds the first one's builds.
#
# Exit status: 0 when every binary is ready; 3 when the Go module proxy refuses (or does not
# answer for) a module a build needs, with module@version printed; 1 for any other failure.
#
# Environment: LOCAL_CLUSTER_CACHE (above); LOCAL_CLUSTER_PROXY_TIMEOUT (s, default 300) bounds
# module downloads; LOCAL_CLUSTER_BUILD_TIMEOUT (s, default 3600) bounds each `go build`;
# LOCAL_CLUSTER_NICE (default 10).
set -euo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modules="$here/go"

# ---------------------------------------------------------------- versions
# Kubernetes 1.34.x: the newest release whose kubelet starts on this machine's cgroup v1 without
# --fail-cgroupv1=false (1.35+ defaults failCgroupV1 to true), and the last line that fits
# Debian's containerd 1.6 (CRI without RuntimeConfig; the kubelet falls back to its configured
# cgroupDriver). v1.34.4 is the newest 1.34 patch the proxy lists (v1.34.0, .2, .3, .4). The wrapper module
# replaces each k8s.io/* staging module with v0.34.4 (the same release).
KUBERNETES_VERSION=v1.34.4
KUBERNETES_BUILD_DATE=2026-02-10T12:53:36Z   # the v1.34.4 tag's time, as the module proxy reports it
# etcd 3.6.x: the line Kubernetes 1.34 runs on (kubeadm v1.34.4 defaults to etcd 3.6.5);
# v3.6.16 is the newest 3.6 patch the proxy lists.
ETCD_VERSION=v3.6.16
# CoreDNS: the newest release the proxy lists (`go list -m -versions github.com/coredns/coredns`).
# Our main.go compiles only the plugins a cluster DNS needs, so the version matters little.
COREDNS_VERSION=v1.15.0
# crictl follows the Kubernetes minor version (cri-tools v1.34.x talks the CRI of 1.34); v1.34.0 is
# the only 1.34 release the proxy lists (it refuses v1.26.x, e.g. v1.26.0: 403 not available).
CRICTL_VERSION=v1.34.0
# kube-network-policies: the newest release the proxy lists (v0.8.0, 2025); its controller is a
# library our main.go feeds through an NFQUEUE (see that file for why).
NETWORK_POLICIES_VERSION=v0.8.0

cache="${LOCAL_CLUSTER_CACHE:-$HOME/.cache/tf-mnist-local-cluster}"
mkdir -p "$cache/logs"
cache="$(cd "$cache" && pwd)"
# The agent is our own program around that library: its build is cached under the library's
# version and a digest of our module's files, so an edit of main.go builds it again.
NETWORK_POLICIES_SOURCE="$(cat "$modules/network-policies/go.mod" "$modules/network-policies/go.sum" \
  "$modules/network-policies/main.go" | sha256sum | cut -c1-12)"
network_policies_out="$cache/network-policies/$NETWORK_POLICIES_VERSION-$NETWORK_POLICIES_SOURCE"
proxy_timeout="${LOCAL_CLUSTER_PROXY_TIMEOUT:-300}"
build_timeout="${LOCAL_CLUSTER_BUILD_TIMEOUT:-3600}"
nice_level="${LOCAL_CLUSTER_NICE:-10}"

log() { printf '[local-cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- shared Go environment
# Static binaries, no VCS stamping, no debug information, less GC (tools/go-build/env.sh);
# -trimpath is passed to every build below.
# shellcheck source=../go-build/env.sh
source "$here/../go-build/env.sh"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

require_go() {
  command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build $1 (Go >= 1.26)"
}

# direct_requires DIR: the module@version pairs a wrapper module requires directly.
direct_requires() {
  (cd "$1" && go mod edit -json 2>/dev/null) |
    python3 -c 'import json,sys; print(" ".join(r["Path"]+"@"+r["Version"] for r in json.load(sys.stdin).get("Require") or [] if not r.get("Indirect")))' 2>/dev/null || true
}

# refused LOGFILE WHAT [FALLBACK]: when LOGFILE shows the module proxy refusing (or not answering
# for) a module, prints every module@version it names (FALLBACK when it names none, as after a
# timeout), loudly, and exits 3.
refused() {
  local logfile="$1" what="$2" fallback="${3:-}" mods
  grep -qE '(^|[[:space:]])(403|404|410)[[:space:]]|Forbidden|Not Found|Gone|not available|unrecognized import path|reading https?://|dial tcp|i/o timeout|TLS handshake timeout|connection refused|no such host|unexpected EOF|zip: not a valid zip file|timed out' "$logfile" || return 0
  mods="$(grep -oE '[A-Za-z0-9._~/-]+@v[0-9][A-Za-z0-9.+_-]*' "$logfile" | sort -u | tr '\n' ' ' || true)"
  log "************************************************************************"
  log "BLOCKED: $what cannot be built: the Go module proxy refused (or did not answer for)"
  log "  ${mods:-${fallback:-a module (see below)}}"
  grep -E '403|404|410|Forbidden|Not Found|not available|reading https?://|dial tcp|timeout|timed out|refused|no such host|EOF|zip' "$logfile" |
    head -n 10 | sed 's/^/[local-cluster]   /' >&2 || true
  log "full output: $logfile"
  log "************************************************************************"
  exit 3
}

# prepare BUILDNAME: a fresh copy of the wrapper module tools/local-cluster/go/BUILDNAME, with
# every module in its build list downloaded (bounded: a proxy that does not answer within
# $proxy_timeout s is reported like a refusal, never a hang). Prints the copy's directory.
prepare() {
  local name="$1" version="$2" dir="$cache/build/$1-$2" dl="$cache/logs/$1-$2-download.log"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$modules/$name/"* "$dir/"
  chmod -R u+w "$dir"
  log "$name $version: downloading modules (at most ${proxy_timeout}s) ..."
  local rc=0
  (cd "$dir" && timeout "$proxy_timeout" go mod download) >"$dl" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" != 124 ] || echo "go mod download timed out after ${proxy_timeout}s" >>"$dl"
    refused "$dl" "$name $version" "$(direct_requires "$dir")"
    tail -n 20 "$dl" | sed 's/^/[local-cluster]   /' >&2
    die "go mod download for $name $version failed; see $dl"
  fi
  printf '%s' "$dir"
}

# check_pin DIR MODULE VERSION: the wrapper module must require MODULE at VERSION (the variables
# above and go.mod are edited together).
check_pin() {
  local got
  got="$(cd "$1" && go list -m -f '{{.Version}}' "$2" 2>/dev/null || true)"
  [ "$got" = "$3" ] ||
    die "tools/local-cluster/go/$(basename "$1" | sed 's/-v[0-9].*//')/go.mod requires $2 ${got:-(nothing)}, build.sh expects $3: edit both together"
}

# timed_build NAME VERSION DIR OUTDIR -- GO-BUILD-ARGS...: runs `go build GO-BUILD-ARGS` in DIR
# under nice, /usr/bin/time -v and a timeout; logs wall, CPU, peak RSS and the size of OUTDIR.
timed_build() {
  local name="$1" version="$2" dir="$3" outdir="$4"
  shift 5
  local logfile="$cache/logs/$name-$version.log" tfile="$cache/logs/$name-$version.time"
  local start end rc=0 load
  load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"
  log "building $name $version (log: $logfile) ..."
  start="$(date +%s.%N)"
  if [ -x /usr/bin/time ]; then
    (cd "$dir" && nice -n "$nice_level" /usr/bin/time -v -o "$tfile" \
      timeout "$build_timeout" go build "$@") >"$logfile" 2>&1 || rc=$?
  else
    : >"$tfile"
    (cd "$dir" && nice -n "$nice_level" timeout "$build_timeout" go build "$@") >"$logfile" 2>&1 || rc=$?
  fi
  end="$(date +%s.%N)"
  local wall cpu rss_kib rss size
  wall="$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')"
  cpu="$(awk -F': ' '/User time \(seconds\)|System time \(seconds\)/{s+=$2} END{if (NR) printf "%.1f", s; else print "?"}' "$tfile")"
  rss_kib="$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tfile" | tail -n1)"
  rss="$([ -n "$rss_kib" ] && echo $((rss_kib / 1024)) || echo '?')"
  if [ "$rc" -ne 0 ]; then
    [ "$rc" != 124 ] || echo "go build timed out after ${build_timeout}s" >>"$logfile"
    refused "$logfile" "$name $version" "$(direct_requires "$dir")"
    tail -n 30 "$logfile" | sed 's/^/[local-cluster]   /' >&2
    die "building $name $version failed after ${wall}s (exit $rc); see $logfile"
  fi
  size="$(du -cb "$outdir"/* 2>/dev/null | awk 'END{printf "%.1f", $1/1e6}')"
  log "built $name $version in ${wall}s wall, ${cpu}s CPU, peak RSS ${rss} MiB, ${size} MB of binaries"
  printf '%s %s %s wall_s=%s cpu_s=%s peak_rss_mib=%s size_mb=%s load1_at_start=%s %s\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$version" "$wall" "$cpu" "$rss" "$size" "$load" \
    "$(go env GOVERSION)" >>"$cache/logs/build-times.txt"
}

# reports BINARY VERSION: true when BINARY runs and its version output names VERSION.
reports() {
  local bin="$1" want="$2" out
  [ -x "$bin" ] || return 1
  case "$(basename "$bin")" in
    kubectl) out="$(timeout 30 "$bin" version --client 2>&1)" || return 1
      grep -qx "Client Version: $want" <<<"$out" ;;
    etcd) out="$(timeout 30 "$bin" --version 2>&1)" || return 1
      grep -qx "etcd Version: ${want#v}" <<<"$out" ;;
    coredns) out="$(timeout 30 "$bin" -version 2>&1)" || return 1
      grep -qx "CoreDNS-${want#v}" <<<"$out" ;;
    crictl) out="$(timeout 30 "$bin" --version 2>&1)" || return 1
      grep -qx "crictl version $want" <<<"$out" ;;
    network-policies) out="$(timeout 30 "$bin" -version 2>&1)" || return 1
      grep -qx "sigs.k8s.io/kube-network-policies $want" <<<"$out" ;;
    *) out="$(timeout 30 "$bin" --version 2>&1)" || return 1
      grep -qx "Kubernetes $want" <<<"$out" ;;
  esac
}

# all_report DIR VERSION NAMES...: every DIR/NAME reports VERSION.
all_report() {
  local dir="$1" version="$2" n
  shift 2
  for n in "$@"; do reports "$dir/$n" "$version" || return 1; done
}

# install_built TMPDIR OUTDIR VERSION NAMES...: checks the new binaries, then moves each into
# OUTDIR (a rename: a reader sees the old file or the new one, never part of one).
install_built() {
  local tmp="$1" out="$2" version="$3" n
  shift 3
  for n in "$@"; do
    reports "$tmp/$n" "$version" ||
      die "the freshly built $n does not report $version: $("$tmp/$n" --version 2>&1 | head -n 2 | tr '\n' ' ')"
  done
  for n in "$@"; do mv -f "$tmp/$n" "$out/$n"; done
  rm -rf "$tmp"
}

built_any=0

# ---------------------------------------------------------------- Kubernetes
K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
build_kubernetes() {
  local v="$KUBERNETES_VERSION" out="$cache/kubernetes/$KUBERNETES_VERSION"
  if all_report "$out" "$v" "${K8S_BINARIES[@]}"; then
    log "kubernetes $v: cached ($out)"
    return
  fi
  require_go "Kubernetes $v"
  local dir tmp="$out/.build.tmp" pkgs=() n x="" minor
  dir="$(prepare kubernetes "$v")"
  check_pin "$dir" k8s.io/kubernetes "$v"
  minor="${v#v*.}"
  minor="${minor%%.*}"
  # What hack/lib/version.sh stamps, for both version packages. Without gitVersion the apiserver
  # reports v0.0.0-master and pulumi-kubernetes refuses it.
  local kv
  for kv in "gitVersion=$v" "gitMajor=$(echo "${v#v}" | cut -d. -f1)" "gitMinor=$minor" \
    "gitCommit=$v" "gitTreeState=clean" "buildDate=$KUBERNETES_BUILD_DATE"; do
    x="$x -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  for n in "${K8S_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
  rm -rf "$tmp" && mkdir -p "$tmp"
  # One `go build` for all five: shared packages are compiled once and links overlap.
  timed_build kubernetes "$v" "$dir" "$tmp" -- -trimpath -gcflags "$GO_NO_DEBUG_GCFLAGS" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS$x" -o "$tmp/" "${pkgs[@]}"
  install_built "$tmp" "$out" "$v" "${K8S_BINARIES[@]}"
  rm -rf "$dir"
  built_any=1
}

# ---------------------------------------------------------------- etcd
# The server alone: nothing starts etcdctl (the cluster's tools talk to etcd through the API
# server), so its link and its own packages are not built.
build_etcd() {
  local v="$ETCD_VERSION" out="$cache/etcd/$ETCD_VERSION"
  if all_report "$out" "$v" etcd; then
    log "etcd $v: cached ($out)"
    return
  fi
  require_go "etcd $v"
  local dir tmp="$out/.build.tmp"
  dir="$(prepare etcd "$v")"
  check_pin "$dir" go.etcd.io/etcd/server/v3 "$v"
  rm -rf "$tmp" && mkdir -p "$tmp"
  timed_build etcd "$v" "$dir" "$tmp" -- -trimpath -gcflags "$GO_NO_DEBUG_GCFLAGS" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
  install_built "$tmp" "$out" "$v" etcd
  rm -rf "$dir"
  built_any=1
}

# ---------------------------------------------------------------- CoreDNS (our minimal main)
# has_kubernetes_plugin BINARY: `coredns -plugins` (one registered plugin a line) lists kubernetes.
has_kubernetes_plugin() {
  local out
  out="$(timeout 30 "$1" -plugins 2>/dev/null)" || return 1
  grep -qx kubernetes <<<"$out"
}

build_coredns() {
  local v="$COREDNS_VERSION" out="$cache/coredns/$COREDNS_VERSION"
  # A cached binary must also be ours: the kubernetes plugin compiled in.
  if reports "$out/coredns" "$v" && has_kubernetes_plugin "$out/coredns"; then
    log "coredns $v: cached ($out)"
    return
  fi
  require_go "CoreDNS $v"
  local dir tmp="$out/.build.tmp"
  dir="$(prepare coredns "$v")"
  check_pin "$dir" github.com/coredns/coredns "$v"
  rm -rf "$tmp" && mkdir -p "$tmp"
  timed_build coredns "$v" "$dir" "$tmp" -- -trimpath \
    -gcflags "$GO_NO_DEBUG_GCFLAGS" -ldflags "$GO_NO_DEBUG_LDFLAGS" -o "$tmp/coredns" .
  has_kubernetes_plugin "$tmp/coredns" ||
    die "the freshly built coredns lacks the kubernetes plugin"
  install_built "$tmp" "$out" "$v" coredns
  rm -rf "$dir"
  built_any=1
}

# ---------------------------------------------------------------- crictl
build_crictl() {
  local v="$CRICTL_VERSION" out="$cache/crictl/$CRICTL_VERSION"
  if reports "$out/crictl" "$v"; then
    log "crictl $v: cached ($out)"
    return
  fi
  require_go "crictl $v"
  local dir tmp="$out/.build.tmp"
  dir="$(prepare crictl "$v")"
  check_pin "$dir" sigs.k8s.io/cri-tools "$v"
  rm -rf "$tmp" && mkdir -p "$tmp"
  timed_build crictl "$v" "$dir" "$tmp" -- -trimpath \
    -gcflags "$GO_NO_DEBUG_GCFLAGS" -ldflags "$GO_NO_DEBUG_LDFLAGS -X sigs.k8s.io/cri-tools/pkg/version.Version=$v" -o "$tmp/crictl" \
    sigs.k8s.io/cri-tools/cmd/crictl
  install_built "$tmp" "$out" "$v" crictl
  rm -rf "$dir"
  built_any=1
}

# ---------------------------------------------------------------- the NetworkPolicy agent (our main)
build_network_policies() {
  local v="$NETWORK_POLICIES_VERSION" out="$network_policies_out"
  if reports "$out/network-policies" "$v"; then
    log "network-policies $v: cached ($out)"
    return
  fi
  require_go "network-policies $v"
  local dir tmp="$out/.build.tmp"
  dir="$(prepare network-policies "$v")"
  check_pin "$dir" sigs.k8s.io/kube-network-policies "$v"
  rm -rf "$tmp" && mkdir -p "$tmp"
  timed_build network-policies "$v" "$dir" "$tmp" -- -trimpath \
    -gcflags "$GO_NO_DEBUG_GCFLAGS" -ldflags "$GO_NO_DEBUG_LDFLAGS" -o "$tmp/network-policies" .
  install_built "$tmp" "$out" "$v" network-policies
  rm -rf "$dir"
  built_any=1
}

# ---------------------------------------------------------------- main
total_start="$(date +%s.%N)"
bin="$cache/bin"
mkdir -p "$bin"
# One run at a time per cache: a second run waits for the first one's builds instead of
# repeating them, and never sees a half-updated bin directory.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.lock"
  if ! flock -n 9; then
    log "waiting for another build.sh using $cache ..."
    flock 9
  fi
fi

# One after another: the Kubernetes link alone needs about 2 GB, and the machine is shared.
build_kubernetes
build_etcd
build_coredns
build_crictl
build_network_policies

# put SRC NAME: replace bin/NAME atomically (a cluster may be running the old one).
put() {
  if [ "$1" -ef "$bin/$2" ] || cmp -s "$1" "$bin/$2" 2>/dev/null; then return 0; fi
  ln -f "$1" "$bin/.$2.tmp" 2>/dev/null || cp -f "$1" "$bin/.$2.tmp"
  mv -f "$bin/.$2.tmp" "$bin/$2"
}
for n in "${K8S_BINARIES[@]}"; do put "$cache/kubernetes/$KUBERNETES_VERSION/$n" "$n"; done
put "$cache/etcd/$ETCD_VERSION/etcd" etcd
put "$cache/coredns/$COREDNS_VERSION/coredns" coredns
put "$cache/crictl/$CRICTL_VERSION/crictl" crictl
put "$network_policies_out/network-policies" network-policies
[ "$built_any" = 0 ] || rm -rf "$cache/build"

log "local cluster binaries ready in $(awk -v a="$total_start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: $bin"
echo "$bin"
