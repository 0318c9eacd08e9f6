# shellcheck shell=bash
# The Go build settings every build script of the project shares (tools/pulumi-toolchain,
# tools/local-cluster, tools/checkers): sourced, it exports the environment and sets two
# variables for `go build` / `go install`:
#   go build -trimpath -gcflags "$GO_NO_DEBUG_GCFLAGS" -ldflags "$GO_NO_DEBUG_LDFLAGS ..." ...
#
# - CGO_ENABLED=0, -buildvcs=false: static binaries that run in any container or on the host,
#   built from module zips (no VCS to stamp).
# - No debug information: these binaries are run, never debugged. The compiler emits no DWARF
#   (-dwarf=false, for every package) and the linker writes no symbol table or DWARF (-s -w).
#   One set of flags everywhere, so that a package two builds share at one version compiles
#   once in the one Go build cache.
# - Less garbage collection in the compiler and linker: GOGC=400 (the collector runs when the
#   heap has grown 4x instead of 2x), bounded by GOMEMLIMIT=3GiB per process, past which it
#   collects as often as it must. A cold build of the etcd server took 132 CPU seconds at
#   Go's default and 100 at GOGC=400 (docs/building.md); the largest link (the alicloud
#   provider's, about 6 GiB at the default) stays near its old peak under the limit.
#
# A caller's own GOGC or GOMEMLIMIT wins.
export CGO_ENABLED=0
case " ${GOFLAGS:-} " in *" -buildvcs=false "*) ;; *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false" ;; esac
export GOGC="${GOGC:-400}"
export GOMEMLIMIT="${GOMEMLIMIT:-3GiB}"
GO_NO_DEBUG_GCFLAGS="all=-dwarf=false"
GO_NO_DEBUG_LDFLAGS="-s -w"
