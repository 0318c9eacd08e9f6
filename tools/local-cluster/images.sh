#!/usr/bin/env bash
# tools/local-cluster/images.sh: the container images of the local Kubernetes cluster, built
# without any registry (none is reachable here) and handed to the cluster's containerd.
#
#   images.sh build [base|pause|trainer-cpu|tensorboard|trainer-gpu ...]   (default: the first four, in order)
#       base         docker.io/library/python:3.11-slim, a local stand-in for the official image:
#                    debootstrap bookworm minbase + Debian's python3 (3.11.2), python3-pip,
#                    python3-venv, ca-certificates. Local image store only, never pushed.
#       pause        localhost/tf-mnist/pause:3.10, the pod sandbox: one static binary
#                    (tools/local-cluster/pause/pause.c).
#       trainer-cpu  registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu (docker/trainer-cpu.Dockerfile)
#       tensorboard  registry.cn-hangzhou.aliyuncs.com/tf-mnist/tensorboard:2.21.0 (docker/tensorboard.Dockerfile)
#       trainer-gpu  registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu
#                    (docker/trainer-gpu.Dockerfile: CUDA as pip wheels on the same base). Several
#                    GB, and the local cluster has no GPU: built only when named, never imported.
#       A step whose inputs (Dockerfile, its build context after the .dockerignore beside it,
#       base image id; for base/pause their recipe) have not changed since its last build is
#       skipped: a content hash is recorded in the cache.
#   images.sh import --address <containerd socket> [--namespace k8s.io] [--skip-missing]
#       Exports pause, trainer-cpu, tensorboard and base as docker-archive (ctr 1.6 imports it under
#       the name recorded in it, and the config blob, whose digest is the image id, is kept
#       byte for byte; an oci-archive of these docker-format images gets a rewritten config)
#       and imports each into containerd's namespace, so the CRI finds them by the tags above.
#       An image already there with the same image id (config digest) is skipped. Prints the
#       names it imported on stdout. The base is imported too: a stack without images of its own
#       runs it (baseImage python:3.11-slim; tests/cluster/test_base_image_on_cluster.py).
#       --skip-missing: images not built yet are left out (pause must exist); `up` uses it.
# Progress goes to stderr with the time each step took; the output of the long commands goes
# to log files under the cache (the tail is shown when one fails).
# Environment:
#   LOCAL_CLUSTER_CACHE           cache root, this script uses <root>/images/ (default $HOME/.cache/tf-mnist-local-cluster)
#   LOCAL_CLUSTER_DEBIAN_MIRROR   Debian mirror for debootstrap (default http://deb.debian.org/debian)
#
# Needs (Debian packages): buildah, debootstrap, gcc + libc6-dev (static libc.a), tar, util-linux
# (flock, findmnt), python3 (localcluster/buildcontext.py, manifest.py), containerd (ctr, for import);
# optional: time (/usr/bin/time, for the CPU and memory figures in the progress lines). Run as root.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO_ROOT/tools/local-cluster
CACHE=${LOCAL_CLUSTER_CACHE:-$HOME/.cache/tf-mnist-local-cluster}/images
MIRROR=${LOCAL_CLUSTER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

BASE_IMAGE=docker.io/library/python:3.11-slim
PAUSE_IMAGE=localhost/tf-mnist/pause:3.10
TRAINER_IMAGE=registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-cpu
TENSORBOARD_IMAGE=registry.cn-hangzhou.aliyuncs.com/tf-mnist/tensorboard:2.21.0
TRAINER_GPU_IMAGE=registry.cn-hangzhou.aliyuncs.com/tf-mnist/trainer:2.21.0-gpu

DEBIAN_SUITE=bookworm
BASE_PACKAGES=python3,python3-pip,python3-venv,ca-certificates
# Bump a recipe version when the steps below change in a way the hashed inputs do not show.
BASE_RECIPE="python-slim-v1 suite=$DEBIAN_SUITE variant=minbase packages=$BASE_PACKAGES"
PAUSE_RECIPE="pause-v1 gcc -static -O2 strip user=65535:65535"
BUD_RECIPE="bud-v1 --isolation chroot --network host --pull=never --layers --format docker"

ROOTFS_TAR=$CACHE/python-3.11-slim-rootfs.tar
STATE=$CACHE/state
LOGS=$CACHE/logs
TMP=$CACHE/tmp

# ---------------------------------------------------------------------------------------------
# Progress, timing, clean-up

log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# timed LABEL LOGFILE CMD...: runs CMD with its output appended to LOGFILE and logs the wall
# time and, with /usr/bin/time, the CPU time and the peak RSS (largest single process).
timed() {
    local label=$1 logf=$2 t0 rc=0 tf="" extra=""
    shift 2
    log "$label ... (log: $logf)"
    t0=$(now)
    if [[ -x /usr/bin/time ]]; then
        tf=$(mktemp "$TMP/time.XXXXXX")
        /usr/bin/time -v -o "$tf" "$@" >>"$logf" 2>&1 || rc=$?
        extra=$(awk -F': ' '
            /User time \(seconds\)/ { u = $2 } /System time \(seconds\)/ { s = $2 }
            /Maximum resident set size/ { m = $2 }
            END { printf ", %.1f s CPU (user %.1f, sys %.1f), peak RSS %.0f MB", u + s, u, s, m / 1024 }' "$tf")
        rm -f "$tf"
    else
        "$@" >>"$logf" 2>&1 || rc=$?
    fi
    if ((rc != 0)); then
        log "$label FAILED (exit $rc) after $(since "$t0") s; last lines of $logf:"
        tail -n 40 "$logf" >&2
        return "$rc"
    fi
    log "$label: done in $(since "$t0") s wall$extra"
}

WORK_CONTAINERS=()
TEMP_PATHS=()
cleanup() {
    local c p
    for c in "${WORK_CONTAINERS[@]+"${WORK_CONTAINERS[@]}"}"; do
        [[ -n $c ]] || continue
        buildah umount "$c" >/dev/null 2>&1 || true
        buildah rm "$c" >/dev/null 2>&1 || true
    done
    for p in "${TEMP_PATHS[@]+"${TEMP_PATHS[@]}"}"; do
        [[ -n $p ]] || continue
        safe_rm_tree "$p" || log "warning: could not remove $p"
    done
}
trap cleanup EXIT

# safe_rm_tree DIR: unmounts whatever is mounted under DIR (a failed debootstrap leaves proc and
# sys mounted in its target), refuses to go on if anything stays mounted, then removes DIR.
safe_rm_tree() {
    local dir=$1 m
    [[ -e $dir ]] || return 0
    dir=$(realpath "$dir")
    while read -r m; do
        [[ -n $m ]] && { umount "$m" 2>/dev/null || umount -l "$m"; }
    done < <(findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d' | sort -r)
    if findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d { f = 1 } END { exit !f }'; then
        log "error: still mounted under $dir; not removing it"
        return 1
    fi
    rm -rf --one-file-system "$dir"
}

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: apt-get install $2"; }

sha256_of_stdin() { sha256sum | awk '{ print $1 }'; }

# ---------------------------------------------------------------------------------------------
# Local image store helpers

# image_id NAME: the full image id in buildah's store, or nothing (status 1) when absent.
image_id() { buildah inspect --type image --format '{{.FromImageID}}' "$1" 2>/dev/null; }

image_size() { buildah images --noheading --format '{{.Size}}' "$1" 2>/dev/null | head -n 1; }

# image_untagged ID: true when the image ID is still in the store and has no name left.
image_untagged() {
    local names
    names=$(buildah images -a --noheading --no-trunc --format '{{.ID}} {{.Name}}' 2>/dev/null |
        awk -v id="$1" '$1 == id || $1 == "sha256:" id { print $2 }') || return 1
    [[ -n $names ]] && ! grep -q -v -x '<none>' <<<"$names"
}

state_get() { cat "$STATE/$1" 2>/dev/null || true; }
state_put() { printf '%s\n' "$2" >"$STATE/$1.tmp" && mv "$STATE/$1.tmp" "$STATE/$1"; }

# up_to_date STEP NAME INPUTS: true when NAME is in the store with the id recorded for STEP
# and the recorded inputs hash equals INPUTS.
up_to_date() {
    local step=$1 name=$2 inputs=$3 id
    id=$(image_id "$name") || return 1
    [[ -n $id && $id == "$(state_get "$step.id")" && $inputs == "$(state_get "$step.inputs")" ]]
}

record_build() {
    local step=$1 name=$2 inputs=$3 old_id=$4 id
    id=$(image_id "$name") || die "$name is not in the store after its build"
    state_put "$step.id" "$id"
    state_put "$step.inputs" "$inputs"
    # The image this one replaced keeps its layers alive until removed; drop it once untagged
    # (buildah refuses while something still uses it, which is fine).
    if [[ -n $old_id && $old_id != "$id" ]] && image_untagged "$old_id"; then
        buildah rmi "$old_id" >/dev/null 2>&1 || true
    fi
    log "$name: image $(printf %.12s "$id"), $(image_size "$name")"
}

# ---------------------------------------------------------------------------------------------
# Build context hash: the files `buildah bud` sends after the .dockerignore, by Docker's rules
# (localcluster/buildcontext.py).

# localpy MODULE ARGS...: python3 -m localcluster.MODULE (this tool's package, standard library only).
localpy() {
    local module=$1
    shift
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" python3 -m "localcluster.$module" "$@"
}

context_hash() { localpy buildcontext hash "$REPO_ROOT" "$1"; }

# ---------------------------------------------------------------------------------------------
# build: base

# The bookworm rootfs with python3 and pip, tarred under the cache (debootstrap runs only when
# the tarball is missing or its recipe changed).
make_rootfs_tarball() {
    local key=$1 work=$CACHE/work rootfs pyver
    rootfs=$work/rootfs
    safe_rm_tree "$work"
    TEMP_PATHS+=("$work")
    mkdir -p "$rootfs"
    timed "debootstrap $DEBIAN_SUITE minbase + $BASE_PACKAGES from $MIRROR" "$LOGS/debootstrap.log" \
        debootstrap --variant=minbase --components=main --include="$BASE_PACKAGES" \
        "$DEBIAN_SUITE" "$rootfs" "$MIRROR"

    local t0
    t0=$(now)
    # What the official python:3.11-slim gives that Debian's packages do not.
    [[ -e $rootfs/usr/lib/python3.11/EXTERNALLY-MANAGED ]] ||
        log "warning: $rootfs/usr/lib/python3.11/EXTERNALLY-MANAGED was not there"
    rm -f "$rootfs/usr/lib/python3.11/EXTERNALLY-MANAGED"
    mkdir -p "$rootfs/usr/local/bin"
    ln -sfn /usr/bin/python3 "$rootfs/usr/local/bin/python"
    ln -sfn /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
    [[ -e $rootfs/usr/bin/pip3 ]] || die "pip3 missing from the rootfs"
    # apt sources for images built on top of this one (the rootfs itself is bookworm main).
    cat >"$rootfs/etc/apt/sources.list" <<EOF
deb http://deb.debian.org/debian $DEBIAN_SUITE main
deb http://deb.debian.org/debian $DEBIAN_SUITE-updates main
deb http://deb.debian.org/debian-security $DEBIAN_SUITE-security main
EOF
    # Clean as the official image does; the runtime provides resolv.conf and hostname.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/cache/apt/*.bin "$rootfs"/tmp/* "$rootfs"/var/tmp/*
    rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
    pyver=$(chroot "$rootfs" /usr/bin/python3 -c 'import platform; print(platform.python_version())')
    log "rootfs: python $pyver, pip $(chroot "$rootfs" /usr/bin/python3 -m pip --version | awk '{ print $2 }'), $(du -sh --one-file-system "$rootfs" | cut -f1) ($(since "$t0") s)"

    timed "rootfs tarball $ROOTFS_TAR" "$LOGS/rootfs-tar.log" \
        tar --numeric-owner --xattrs --xattrs-include='*' --sort=name \
        --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' --exclude='./run/*' \
        -C "$rootfs" -cf "$ROOTFS_TAR.tmp" .
    mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
    printf '%s\n' "$pyver" >"$ROOTFS_TAR.python-version"
    printf '%s\n' "$key" >"$ROOTFS_TAR.key"
    safe_rm_tree "$work"
}

build_base() {
    local key old_id c mnt pyver t0
    key=$(printf '%s\n' "$BASE_RECIPE" | sha256_of_stdin)
    if up_to_date base "$BASE_IMAGE" "$key"; then
        log "base $BASE_IMAGE: up to date ($(printf %.12s "$(state_get base.id)")), skipped"
        return 0
    fi
    if [[ -f $ROOTFS_TAR && -f $ROOTFS_TAR.python-version && $(cat "$ROOTFS_TAR.key" 2>/dev/null) == "$key" ]]; then
        log "base: cached rootfs $ROOTFS_TAR, debootstrap skipped"
    else
        make_rootfs_tarball "$key"
    fi
    pyver=$(cat "$ROOTFS_TAR.python-version")
    old_id=$(image_id "$BASE_IMAGE" || true)

    t0=$(now)
    log "base: importing the rootfs as $BASE_IMAGE ..."
    c=$(buildah from --pull=never scratch)
    WORK_CONTAINERS+=("$c")
    mnt=$(buildah mount "$c")
    tar --numeric-owner --xattrs --xattrs-include='*' -C "$mnt" -xf "$ROOTFS_TAR"
    buildah umount "$c" >/dev/null
    buildah config \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --env PYTHON_VERSION="$pyver" --cmd '["python3"]' \
        --label org.opencontainers.image.description="Local stand-in for python:3.11-slim: Debian $DEBIAN_SUITE minbase, python3 $pyver, pip (tools/local-cluster/images.sh; never pushed)" \
        "$c"
    buildah commit --quiet --format docker --rm "$c" "$BASE_IMAGE" >/dev/null
    WORK_CONTAINERS=("${WORK_CONTAINERS[@]/$c/}")
    log "base: imported in $(since "$t0") s"
    record_build base "$BASE_IMAGE" "$key" "$old_id"
}

# ---------------------------------------------------------------------------------------------
# build: pause

build_pause() {
    local src=$HERE/pause/pause.c bin key old_id c t0
    [[ -f $src ]] || die "$src missing"
    key=$({ printf '%s\n' "$PAUSE_RECIPE"; gcc --version | head -n 1; cat "$src"; } | sha256_of_stdin)
    if up_to_date pause "$PAUSE_IMAGE" "$key"; then
        log "pause $PAUSE_IMAGE: up to date ($(printf %.12s "$(state_get pause.id)")), skipped"
        return 0
    fi
    [[ $(gcc -print-file-name=libc.a) == /* ]] ||
        die "no static libc: apt-get install libc6-dev"
    mkdir -p "$CACHE/pause"
    bin=$CACHE/pause/pause
    timed "pause: gcc -static -O2 $src" "$LOGS/pause.log" \
        gcc -static -O2 -Wall -Wextra -o "$bin.tmp" "$src"
    strip "$bin.tmp"
    mv "$bin.tmp" "$bin"
    "$bin" -v >/dev/null || die "the pause binary does not run"
    old_id=$(image_id "$PAUSE_IMAGE" || true)
    t0=$(now)
    c=$(buildah from --pull=never scratch)
    WORK_CONTAINERS+=("$c")
    buildah copy --quiet "$c" "$bin" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --user 65535:65535 \
        --label org.opencontainers.image.description="Pod sandbox for the local cluster (tools/local-cluster/pause/pause.c)" \
        "$c"
    buildah commit --quiet --format docker --rm "$c" "$PAUSE_IMAGE" >/dev/null
    WORK_CONTAINERS=("${WORK_CONTAINERS[@]/$c/}")
    log "pause: image committed in $(since "$t0") s"
    record_build pause "$PAUSE_IMAGE" "$key" "$old_id"
}

# ---------------------------------------------------------------------------------------------
# build: Dockerfiles

# Flags for RUN steps on this machine:
# - ulimits: there is no CAP_SYS_RESOURCE, so nothing can be raised above the host's hard
#   limits (nofile 20000 here). Left alone, buildah's chroot RUN steps get nofile 1024:1024
#   (docker build gives far more); asking more than the host allows fails the step
#   ("setting "RLIMIT_NPROC" limit to soft=96364,hard=96364 (was soft=32768,hard=32768):
#   operation not permitted": buildah has already capped its own nproc at its default 32768).
#   So: nofile = the host's hard limit, nproc = min(32768, the host's hard limit).
# - the host CA bundle, read-only: downloads pass a TLS-intercepting proxy.
bud_flags() {
    local n u
    BUD_FLAGS=(--isolation chroot --network host --pull=never --layers --format docker)
    n=$(ulimit -Hn)
    u=$(ulimit -Hu)
    [[ $n == unlimited ]] || BUD_FLAGS+=(--ulimit "nofile=$n:$n")
    if [[ $u == unlimited ]] || ((u > 32768)); then u=32768; fi
    BUD_FLAGS+=(--ulimit "nproc=$u:$u")
    [[ -f $CA_BUNDLE ]] && BUD_FLAGS+=(-v "$CA_BUNDLE:$CA_BUNDLE:ro")
    return 0
}

# from_images DOCKERFILE: the images its FROM lines name (not earlier stages, not scratch), with
# ${NAME} or $NAME replaced by the default of an earlier `ARG NAME=default`.
from_images() {
    awk '
        toupper($1) == "ARG" && (eq = index($2, "=")) { arg[substr($2, 1, eq - 1)] = substr($2, eq + 1) }
        toupper($1) == "FROM" {
            i = 2
            while ($i ~ /^--/) i++
            img = $i
            for (name in arg) { gsub("\\$\\{" name "\\}", arg[name], img); gsub("\\$" name, arg[name], img) }
            if (toupper($(i + 1)) == "AS") stage[tolower($(i + 2))] = 1
            if (!(tolower(img) in stage) && img != "scratch") print img
        }' "$1"
}

build_dockerfile() {
    local step=$1 rel=$2 name=$3 df ign inputs from fid bases="" old_id t0
    df=$REPO_ROOT/$rel
    [[ -f $df ]] || die "$df missing"
    ign=$df.dockerignore
    [[ -f $ign ]] || ign=$REPO_ROOT/.dockerignore
    [[ -f $ign ]] || ign=-
    while read -r from; do
        [[ -n $from ]] || continue
        fid=$(image_id "$from") || die "$rel: FROM $from is not in the local image store (images.sh build base makes python:3.11-slim; nothing else can be pulled here)"
        bases+="$from=$fid "
    done < <(from_images "$df")
    inputs=$({
        printf '%s\n' "$BUD_RECIPE" "$rel" "bases: $bases"
        sha256sum "$df"
        [[ $ign == - ]] || sha256sum "$ign"
        printf 'context %s\n' "$(context_hash "$ign")"
    } | sed "s#$REPO_ROOT/##" | sha256_of_stdin)
    if up_to_date "$step" "$name" "$inputs"; then
        log "$step $name: up to date ($(printf %.12s "$(state_get "$step.id")")), skipped"
        return 0
    fi
    old_id=$(image_id "$name" || true)
    bud_flags
    local ignflag=()
    [[ $ign == - ]] || ignflag=(--ignorefile "$ign")
    : >"$LOGS/$step.log"
    timed "$step: buildah bud -f $rel -t $name" "$LOGS/$step.log" \
        buildah bud "${BUD_FLAGS[@]}" "${ignflag[@]}" -f "$df" -t "$name" "$REPO_ROOT"
    record_build "$step" "$name" "$inputs" "$old_id"
}

cmd_build() {
    local steps=("$@") s t0
    ((${#steps[@]})) || steps=(base pause trainer-cpu tensorboard)
    for s in "${steps[@]}"; do
        case $s in
        base) need debootstrap debootstrap ;;
        pause) need gcc "gcc libc6-dev" ;;
        trainer-cpu | tensorboard | trainer-gpu) need python3 python3 ;;
        *) die "unknown image '$s' (base, pause, trainer-cpu, tensorboard, trainer-gpu)" ;;
        esac
    done
    t0=$(now)
    for s in "${steps[@]}"; do
        case $s in
        base) build_base ;;
        pause) build_pause ;;
        trainer-cpu) build_dockerfile trainer-cpu docker/trainer-cpu.Dockerfile "$TRAINER_IMAGE" ;;
        tensorboard) build_dockerfile tensorboard docker/tensorboard.Dockerfile "$TENSORBOARD_IMAGE" ;;
        trainer-gpu) build_dockerfile trainer-gpu docker/trainer-gpu.Dockerfile "$TRAINER_GPU_IMAGE" ;;
        esac
    done
    log "build: done in $(since "$t0") s"
    for s in "$BASE_IMAGE" "$PAUSE_IMAGE" "$TRAINER_IMAGE" "$TENSORBOARD_IMAGE" "$TRAINER_GPU_IMAGE"; do
        log "  $s  $(printf %.12s "$(image_id "$s" || echo '(not built)')")  $(image_size "$s")"
    done
}

# ---------------------------------------------------------------------------------------------
# import

# containerd_config_digest SOCK NS NAME: the config digest (= image id) of NAME in containerd.
containerd_config_digest() {
    local sock=$1 ns=$2 name=$3 digest kind out
    digest=$(ctr --address "$sock" -n "$ns" images ls "name==$name" 2>/dev/null | awk 'NR > 1 { print $3; exit }')
    [[ -n $digest ]] || return 0
    for _ in 1 2 3; do
        out=$(ctr --address "$sock" -n "$ns" content get "$digest" | localpy manifest) || return 0
        read -r kind digest <<<"$out"
        if [[ $kind == config ]]; then
            printf '%s\n' "$digest"
            return 0
        fi
    done
}

cmd_import() {
    local sock="" ns=k8s.io name id have t0 archive imported=0 skip_missing=0
    while (($#)); do
        case $1 in
        # `local-cluster up` imports what has been built so far; only pause must exist.
        --skip-missing) skip_missing=1; shift ;;
        --address) sock=${2:?--address needs a socket path}; shift 2 ;;
        --address=*) sock=${1#*=}; shift ;;
        --namespace) ns=${2:?--namespace needs a name}; shift 2 ;;
        --namespace=*) ns=${1#*=}; shift ;;
        *) die "import: unknown argument '$1' (usage: images.sh import --address <containerd socket> [--namespace k8s.io] [--skip-missing])" ;;
        esac
    done
    [[ -n $sock ]] || die "usage: images.sh import --address <containerd socket> [--namespace k8s.io]"
    need ctr containerd
    need python3 python3
    [[ -S $sock ]] || die "$sock is not a socket"
    ctr --address "$sock" version >/dev/null 2>&1 || die "no containerd answers on $sock"
    t0=$(now)
    for name in "$PAUSE_IMAGE" "$TRAINER_IMAGE" "$TENSORBOARD_IMAGE" "$BASE_IMAGE"; do
        if ! id=$(image_id "$name"); then
            if ((skip_missing)) && [[ $name != "$PAUSE_IMAGE" ]]; then
                log "$name: not built yet, not imported (tools/local-cluster/local-cluster images builds it)"
                continue
            fi
            die "$name is not in the local store: run images.sh build first"
        fi
        have=$(containerd_config_digest "$sock" "$ns" "$name")
        if [[ $have == "sha256:$id" ]]; then
            log "$name: already in containerd ($ns) as $(printf %.19s "$have"), skipped"
            continue
        fi
        archive=$TMP/export-$(printf %.12s "$id").tar
        rm -f "$archive"
        TEMP_PATHS+=("$archive")
        timed "$name: buildah push docker-archive" "$LOGS/import.log" \
            buildah push --quiet "$name" "docker-archive:$archive:$name"
        log "$name: archive $(du -h "$archive" | cut -f1)"
        timed "$name: ctr -n $ns images import" "$LOGS/import.log" \
            ctr --address "$sock" -n "$ns" images import "$archive"
        rm -f "$archive"
        have=$(containerd_config_digest "$sock" "$ns" "$name")
        [[ $have == "sha256:$id" ]] ||
            die "$name: containerd has config ${have:-nothing} after the import, expected sha256:$id (see $LOGS/import.log)"
        printf '%s\n' "$name"
        imported=$((imported + 1))
    done
    log "import: $imported imported into $sock ($ns) in $(since "$t0") s"
}

# ---------------------------------------------------------------------------------------------

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}

main() {
    local cmd=${1:-}
    [[ -n $cmd ]] || usage 2
    shift
    case $cmd in
    -h | --help | help) usage 0 ;;
    build | import) ;;
    context)
        # images.sh context docker/X.Dockerfile: the files its build context holds after the
        # .dockerignore beside it (what the build hash covers).
        local ign=$REPO_ROOT/${1:?usage: images.sh context docker/X.Dockerfile}.dockerignore
        [[ -f $ign ]] || ign=-
        localpy buildcontext list "$REPO_ROOT" "$ign"; exit ;;
    *) usage 2 ;;
    esac
    [[ $(id -u) == 0 ]] || die "run as root (buildah's rootful store, debootstrap)"
    need buildah buildah
    need findmnt util-linux && need flock util-linux
    mkdir -p "$CACHE" "$STATE" "$LOGS" "$TMP"
    exec 9>"$CACHE/.lock"
    if ! flock -w 5 9; then
        log "another images.sh holds $CACHE/.lock; waiting"
        flock 9
    fi
    "cmd_$cmd" "$@"
}

main "$@"
