#!/usr/bin/env bash
# Installs or builds the two Kubernetes checkers that platform teams run on what they deploy,
# pinned, outside the repository, and prints their paths, the LAST two stdout lines being:
#   checkov=<cache>/checkov/<version>/venv/bin/checkov
#   kube-score=<cache>/kube-score/<version>/kube-score
#
#   checkov 3.3.30      from PyPI, in a virtualenv of its own: its ~80 dependency pins (boto3,
#                       networkx, pydantic, ...) must not touch the project's .venv
#   kube-score v1.20.0  built with `go install github.com/zegl/kube-score/cmd/kube-score@v1.20.0`
#                       from the Go module proxy
#
# Idempotent: each lives in ${CHECKERS_CACHE:-$HOME/.cache/tf-mnist-checkers}/<name>/<version>
# and is checked by the version it prints, so a second run only asks each for its version.
# An interrupted install leaves nothing that a later run would trust: kube-score is built into a
# temporary directory renamed into place once it works, and checkov's virtualenv counts only
# once pip has finished in it.
# Progress and the time of each install go to stderr and to <cache>/logs/install-times.txt.
#
# With --cached it installs nothing: it prints the paths when both are cached and exits 3
# otherwise (what the tests use to skip, or fail, without installing).
#
# Exit status: non-zero, naming the step and its log, when pip or go fails (a registry that
# refuses the version, no Go on PATH) or a result does not print its pinned version.
set -euo pipefail

CHECKOV_VERSION=3.3.30
KUBE_SCORE_VERSION=v1.20.0
KUBE_SCORE_MODULE=github.com/zegl/kube-score

cache="${CHECKERS_CACHE:-$HOME/.cache/tf-mnist-checkers}"
mkdir -p "$cache/logs"
cache="$(cd "$cache" && pwd)"

log() { printf '[checkers] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# timed STEP VERSION LOG -- CMD...: runs CMD at low priority (other engineers share the cores),
# its output in LOG; records the wall time; exits naming STEP and LOG when it fails.
timed() {
  local name="$1" version="$2" logfile="$3"; shift 4
  local start rc=0
  start="$(date +%s)"
  log "installing $name $version (log: $logfile) ..."
  nice -n "${CHECKERS_NICE:-10}" "$@" >"$logfile" 2>&1 || rc=$?
  local wall=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$logfile" | sed 's/^/[checkers]   /' >&2
    die "installing $name $version failed after $wall s (exit $rc); see $logfile"
  fi
  log "installed $name $version in $wall s"
  printf '%s %s wall_s=%s\n' "$name" "$version" "$wall" >>"$cache/logs/install-times.txt"
}

# The installed distribution's version, read from its metadata: `checkov --version` would say
# the same but imports all of checkov, which takes seconds.
checkov_ok() {
  [ -f "$1/../installed" ] && [ -x "$1/bin/checkov" ] && [ "$("$1/bin/python" -c 'from importlib.metadata import version as v; print(v("checkov"))' \
    2>/dev/null)" = "$CHECKOV_VERSION" ]
}

install_checkov() {
  local out="$cache/checkov/$CHECKOV_VERSION"
  if checkov_ok "$out/venv"; then
    log "checkov $CHECKOV_VERSION: cached ($out)"
    return
  fi
  local python="${CHECKERS_PYTHON:-python3}"
  command -v "$python" >/dev/null 2>&1 || die "$python is not on PATH; checkov needs Python >= 3.9"
  # A virtualenv cannot be moved (its scripts name their own path), so it is made in place and
  # counts as complete only once pip has finished and written the file `installed` beside it.
  rm -rf "$out"
  mkdir -p "$out"
  timed checkov "$CHECKOV_VERSION" "$cache/logs/checkov-$CHECKOV_VERSION.log" -- \
    bash -c "'$python' -m venv '$out/venv' && '$out/venv/bin/python' -m pip install --no-input -q 'checkov==$CHECKOV_VERSION'"
  : >"$out/installed"
  checkov_ok "$out/venv" || die "checkov in $out/venv does not have version $CHECKOV_VERSION"
}

# kube-score version prints "kube-score version: 1.20.0, commit: ..., built: ...".
kube_score_ok() {
  [ -x "$1" ] && timeout 60 "$1" version 2>/dev/null | grep -q "version: ${KUBE_SCORE_VERSION#v},"
}

install_kube_score() {
  local out="$cache/kube-score/$KUBE_SCORE_VERSION"
  if kube_score_ok "$out/kube-score"; then
    log "kube-score $KUBE_SCORE_VERSION: cached ($out)"
    return
  fi
  command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build kube-score $KUBE_SCORE_VERSION"
  local tmp="$out.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # The release's version and commit are ldflags of goreleaser; set the version the same way
  # so that `kube-score version` names the pin this script checks.
  # The project's Go settings (static, no debug information, less GC): tools/go-build/env.sh.
  # shellcheck source=../go-build/env.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../go-build/env.sh"
  GOBIN="$tmp" timed kube-score "$KUBE_SCORE_VERSION" \
    "$cache/logs/kube-score-$KUBE_SCORE_VERSION.log" -- \
    go install "${GO_COMPILE_FLAGS[@]}" \
    -ldflags "$GO_NO_DEBUG_LDFLAGS -X main.version=${KUBE_SCORE_VERSION#v} -X main.commit=module-proxy" \
    "$KUBE_SCORE_MODULE/cmd/kube-score@$KUBE_SCORE_VERSION"
  kube_score_ok "$tmp/kube-score" || die "the kube-score built in $tmp does not print version ${KUBE_SCORE_VERSION#v}"
  rm -rf "$out"
  mv "$tmp" "$out"
}

if [ "${1:-}" = --cached ]; then
  checkov_ok "$cache/checkov/$CHECKOV_VERSION/venv" &&
    kube_score_ok "$cache/kube-score/$KUBE_SCORE_VERSION/kube-score" || {
    log "checkov $CHECKOV_VERSION or kube-score $KUBE_SCORE_VERSION is not in $cache: run bash tools/checkers/checkers.sh"
    exit 3
  }
else
  install_checkov
  install_kube_score
fi
printf 'checkov=%s\n' "$cache/checkov/$CHECKOV_VERSION/venv/bin/checkov"
printf 'kube-score=%s\n' "$cache/kube-score/$KUBE_SCORE_VERSION/kube-score"
