#!/usr/bin/env bash
# Builds (or finds in its cache) the binaries of the local single-machine Kubernetes cluster and
# prints, as its LAST stdout line, the absolute directory holding all of them:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl   (k8s.io/kubernetes)
#   etcd                                                                     (go.etcd.io/etcd)
#   coredns                           (our minimal CoreDNS, cmd/coredns of the shared module)
#   crictl                                                                   (sigs.k8s.io/cri-tools)
#   network-policies   (our NetworkPolicy agent, cmd/network-policies of the shared module, on the
#                       controller of sigs.k8s.io/kube-network-policies)
# Each comes from a wrapper module through the Go module proxy: Kubernetes, CoreDNS and the agent
# from tools/go-build/kubernetes-programs, the module that tools/pulumi-toolchain/pulumi-toolchain.sh
# builds the kubernetes provider from (one `go build` of the three here, with that script's flags,
# so the packages they share compile once in the Go build cache); etcd and crictl from their own
# under tools/local-cluster/go/.
# Progress goes to stderr, with each build's wall time, CPU seconds (user+sys) and peak RSS (the
# largest single process, from /usr/bin/time -v); one line per build is appended to
# <cache>/logs/build-times.txt.
#
# Cache: ${LOCAL_CLUSTER_CACHE:-$HOME/.cache/tf-mnist-local-cluster}/<name>/<version>/, e.g.
# kubernetes/v1.33.13/kube-apiserver. A cached binary is used only when its --version reports the
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
# The shared module (see the header): Kubernetes, CoreDNS and the agent are built from it.
programs="$here/../go-build/kubernetes-programs"
# Kubernetes 1.33.x: the release line of the kubernetes provider's client libraries (k8s.io
# v0.33), so that one module graph holds both; it is also ACK's (cluster.version 1.33.3-aliyun.1).
# Its kubelet starts on this machine's cgroup v1 (1.35+ refuse it without --fail-cgroupv1=false)
# and fits Debian's containerd 1.6 (CRI without RuntimeConfig; the kubelet falls back to its
# configured cgroupDriver). v1.33.13: the proxy lists v1.33.6 and v1.33.13 and refuses
# k8s.io/cri-client v0.33.6. The module replaces each k8s.io/* staging module with v0.33.13.
KUBERNETES_VERSION=v1.33.13
KUBERNETES_BUILD_DATE=2026-06-11T16:59:07Z   # the v1.33.13 tag's time, as the module proxy reports it
# etcd 3.6.x (kubeadm v1.33 defaults to 3.5.24; the API server's etcd client, v3.6.2 in the shared
# graph, speaks the same v3 API to both); v3.6.16 is the newest 3.6 patch the proxy lists.
ETCD_VERSION=v3.6.16
# CoreDNS v1.12.3: the newest release whose module graph stays at k8s.io v0.33 (v1.12.4 and later
# require client-go v0.34). Our main.go compiles only the plugins a cluster DNS needs.
COREDNS_VERSION=v1.12.3
# crictl: cri-tools v1.34.0, the oldest release the proxy lists (v1.34.0, v1.37.0; it refuses
# v1.33.x and v1.26.x: 403 not available). It talks to containerd only (the CRI v1 API that 1.6
# serves), for `down`, so one minor past the kubelet is fine. It keeps a module of its own: it needs
# structured-merge-diff v6, which client-go 0.33 cannot use.
CRICTL_VERSION=v1.34.0
# kube-network-policies: the newest release the proxy lists (v0.8.0, 2025); its controller is a
# library our main.go feeds through an NFQUEUE (see that file for why).
NETWORK_POLICIES_VERSION=v0.8.0

cache="${LOCAL_CLUSTER_CACHE:-$HOME/.cache/tf-mnist-local-cluster}"
mkdir -p "$cache/logs"
cache="$(cd "$cache" && pwd)"
# The agent is our own program around that library: its build is cached under the library's
# version and a digest of the shared module's go.mod and go.sum and of its main.go, so an edit of
# main.go (or a new build list) builds it again.
NETWORK_POLICIES_SOURCE="$(cat "$programs/go.mod" "$programs/go.sum" \
  "$programs/cmd/network-policies/main.go" | sha256sum | cut -c1-12)"
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

# prepare BUILDNAME VERSION [MODULE]: a fresh copy of the wrapper module MODULE (default
# tools/local-cluster/go/BUILDNAME), with every module in its build list downloaded (bounded: a
# proxy that does not answer within $proxy_timeout s is reported like a refusal, never a hang).
# Prints the copy's directory.
prepare() {
  local name="$1" version="$2" dir="$cache/build/$1-$2" dl="$cache/logs/$1-$2-download.log"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -R "${3:-$modules/$name}/." "$dir/"
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

# check_pin DIR MODULE VERSION: the wrapper module copied to DIR must require MODULE at VERSION
# (the variables above and its go.mod are edited together).
check_pin() {
  local got
  got="$(cd "$1" && go list -m -f '{{.Version}}' "$2" 2>/dev/null || true)"
  [ "$got" = "$3" ] ||
    die "the go.mod of the wrapper module copied to $1 requires $2 ${got:-(nothing)}, build.sh expects $3: edit both together"
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
  mkdir -p "$out"
  for n in "$@"; do mv -f "$tmp/$n" "$out/$n"; done
}

built_any=0

# ---------------------------------------------------------------- Kubernetes, CoreDNS, the agent
K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# has_kubernetes_plugin BINARY: `coredns -plugins` (one registered plugin a line) lists kubernetes.
has_kubernetes_plugin() {
  local out
  out="$(timeout 30 "$1" -plugins 2>/dev/null)" || return 1
  grep -qx kubernetes <<<"$out"
}

# One `go build` from the shared module for those of the three not cached: the packages they share
# compile once (and were compiled already where pulumi-toolchain.sh built the provider first).
build_programs() {
  local k8s_out="$cache/kubernetes/$KUBERNETES_VERSION" dns_out="$cache/coredns/$COREDNS_VERSION"
  local pkgs=() n
  if all_report "$k8s_out" "$KUBERNETES_VERSION" "${K8S_BINARIES[@]}"; then
    log "kubernetes $KUBERNETES_VERSION: cached ($k8s_out)"
  else
    for n in "${K8S_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
  fi
  # A cached CoreDNS must also be ours: the kubernetes plugin compiled in.
  if reports "$dns_out/coredns" "$COREDNS_VERSION" && has_kubernetes_plugin "$dns_out/coredns"; then
    log "coredns $COREDNS_VERSION: cached ($dns_out)"
  else
    pkgs+=(./cmd/coredns)
  fi
  if reports "$network_policies_out/network-policies" "$NETWORK_POLICIES_VERSION"; then
    log "network-policies $NETWORK_POLICIES_VERSION: cached ($network_policies_out)"
  else
    pkgs+=(./cmd/network-policies)
  fi
  [ "${#pkgs[@]}" -gt 0 ] || return 0
  require_go "${pkgs[*]}"
  local v="$KUBERNETES_VERSION" dir tmp="$cache/build/programs-bin" x="" minor kv
  dir="$(prepare kubernetes-programs "$v" "$programs")"
  check_pin "$dir" k8s.io/kubernetes "$v"
  check_pin "$dir" github.com/coredns/coredns "$COREDNS_VERSION"
  check_pin "$dir" sigs.k8s.io/kube-network-policies "$NETWORK_POLICIES_VERSION"
  minor="${v#v*.}"
  minor="${minor%%.*}"
  # What hack/lib/version.sh stamps, for both version packages. Without gitVersion the apiserver
  # reports v0.0.0-master and pulumi-kubernetes refuses it. CoreDNS and the agent, linked with the
  # same client-go, get its stamp too. (-X changes only the link: the compiled packages stay
  # those of pulumi-toolchain.sh's build.)
  for kv in "gitVersion=$v" "gitMajor=$(echo "${v#v}" | cut -d. -f1)" "gitMinor=$minor" \
    "gitCommit=$v" "gitTreeState=clean" "buildDate=$KUBERNETES_BUILD_DATE"; do
    x="$x -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "kubernetes-programs: building ${pkgs[*]}"
  # The flags of pulumi-toolchain.sh's provider build (tools/go-build/env.sh).
  timed_build kubernetes-programs "$v" "$dir" "$tmp" -- "${GO_COMPILE_FLAGS[@]}" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS$x" -o "$tmp/" "${pkgs[@]}"
  if [ -e "$tmp/kubelet" ]; then install_built "$tmp" "$k8s_out" "$v" "${K8S_BINARIES[@]}"; fi
  if [ -e "$tmp/coredns" ]; then
    has_kubernetes_plugin "$tmp/coredns" || die "the freshly built coredns lacks the kubernetes plugin"
    install_built "$tmp" "$dns_out" "$COREDNS_VERSION" coredns
  fi
  if [ -e "$tmp/network-policies" ]; then
    install_built "$tmp" "$network_policies_out" "$NETWORK_POLICIES_VERSION" network-policies
  fi
  rm -rf "$dir" "$tmp"
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
  timed_build etcd "$v" "$dir" "$tmp" -- "${GO_COMPILE_FLAGS[@]}" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
  install_built "$tmp" "$out" "$v" etcd
  rm -rf "$dir" "$tmp"
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
  timed_build crictl "$v" "$dir" "$tmp" -- "${GO_COMPILE_FLAGS[@]}" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS -X sigs.k8s.io/cri-tools/pkg/version.Version=$v" -o "$tmp/crictl" \
    sigs.k8s.io/cri-tools/cmd/crictl
  install_built "$tmp" "$out" "$v" crictl
  rm -rf "$dir" "$tmp"
  built_any=1
}

# ---------------------------------------------------------------- main
total_start="$(date +%s.%N)"
bin="$cache/bin"
mkdir -p "$bin"
# One run at a time per cache (tools/go-build/env.sh).
hold_build_lock "$cache/.lock" "waiting for another build.sh using $cache ..."

# One after another: the Kubernetes link alone needs about 2 GB, and the machine is shared.
build_programs
build_etcd
build_crictl

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
