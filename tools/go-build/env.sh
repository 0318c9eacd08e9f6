# shellcheck shell=bash
# The Go build settings every build script of the project shares (tools/pulumi-toolchain,
# tools/local-cluster, tools/checkers): sourced, it exports the environment and sets an array
# and a variable for `go build` / `go install`:
#   go build "${GO_COMPILE_FLAGS[@]}" -ldflags "$GO_NO_DEBUG_LDFLAGS ..." ...
#
# - CGO_ENABLED=0, -buildvcs=false: static binaries that run in any container or on the host,
#   built from module zips (no VCS to stamp); -trimpath.
# - No debug information: these binaries are run, never debugged. The compiler emits no DWARF
#   (-dwarf=false, for every package) and the linker writes no symbol table or DWARF (-s -w).
#   One set of flags everywhere, so that a package two builds share at one version compiles
#   once in the one Go build cache (the kubernetes provider and the local cluster's Kubernetes,
#   CoreDNS and NetworkPolicy agent share one module for that: kubernetes-programs/ here).
# - No inlining (-l) outside the standard library: the compiler's inliner and the optimisation
#   passes it feeds are the largest share of compiling the big dependency graphs these builds
#   have, and the programs spend their time in tests waiting on I/O, not in those packages. The
#   standard library (the runtime, the garbage collector, sync, encoding) keeps its inlining: the
#   later -gcflags pattern wins for the packages it matches (a cold build of the etcd server
#   measures it: docs/benchmarks.md).
# - One backend goroutine per compile (-c=1; Go's default on 2 cores is 2): `go build` already
#   compiles two packages at once (-p 2), so the second one buys little wall time and costs the
#   compiler's coordination (the etcd server's cold build again: docs/benchmarks.md).
# - No garbage collection in the compiler and linker until a process reaches GOMEMLIMIT=3GiB,
#   past which it collects as often as it must (GOGC=off: most compile processes end long before;
#   the alicloud provider's link, about 6 GiB at Go's default, stays near the limit); fewer
#   collections, less CPU (the etcd server's build again: docs/benchmarks.md).
#
# A caller's own GOGC or GOMEMLIMIT wins.
#
# It also defines hold_build_lock, the one-build-at-a-time lock of a build cache.
export CGO_ENABLED=0
case " ${GOFLAGS:-} " in *" -buildvcs=false "*) ;; *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false" ;; esac
export GOGC="${GOGC:-off}"
export GOMEMLIMIT="${GOMEMLIMIT:-3GiB}"
# shellcheck disable=SC2034  # used by the scripts that source this file
GO_COMPILE_FLAGS=(-trimpath -gcflags "all=-dwarf=false -l -c=1" -gcflags "std=-dwarf=false -c=1")
GO_NO_DEBUG_LDFLAGS="-s -w"

# hold_build_lock FILE MESSAGE [HOOK]: one run at a time per build cache. Takes FILE's flock(1)
# on fd 9 and keeps it until the script exits (the kernel drops it however the script ends), so
# a second run waits for the first one's builds instead of repeating them and never sees a
# half-updated bin directory. When another run holds it: logs MESSAGE (the caller's `log`),
# calls `HOOK start`, waits, then `HOOK stop` (a progress ticker, say). Without flock(1): nothing.
hold_build_lock() {
  local file="$1" message="$2" hook="${3:-}"
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$file"
  flock -n 9 && return 0
  log "$message"
  [ -z "$hook" ] || "$hook" start
  flock 9
  [ -z "$hook" ] || "$hook" stop
}
