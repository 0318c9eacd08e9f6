# <registry>/trainer:2.21.0-cpu: ps, chief (coordinator), data staging and gpuCount-0 workers.
# Build from the repository root, for linux/amd64 (the pinned hashes are of x86_64 wheels):
#   docker build -f docker/trainer-cpu.Dockerfile -t <registry>/trainer:2.21.0-cpu .

# The base, python:3.11-slim, is a build argument: Docker Hub's digest of it is not written
# here (it was not reachable where this file was written, and no digest is invented), so the
# default is the tag. For a build whose base cannot change under the same tag, pass its digest:
#   --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest>
# and add --build-arg REQUIRE_BASE_DIGEST=1 to refuse any base without one (docker/README.md,
# "Pinned builds", says how to look the digest up).
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG REQUIRE_BASE_DIGEST=0
# The build-time check: the pinned wheels are CPython 3.11 x86_64 ones, so any other base is
# refused here, by name, before pip; and with REQUIRE_BASE_DIGEST=1 a base named by tag.
RUN python -c 'import platform, sys; sys.exit(None if sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64" else "base image: CPython 3.11 on x86_64 needed (the pinned wheels are cp311 x86_64), found " + platform.python_version() + " on " + platform.machine())' \
    && case "$PYTHON_IMAGE" in *@sha256:*) ;; *) if [ "$REQUIRE_BASE_DIGEST" = 1 ]; then \
        echo "PYTHON_IMAGE=$PYTHON_IMAGE names no digest and REQUIRE_BASE_DIGEST=1: pass --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest>" >&2; exit 1; fi ;; esac

# GRPC_FAIL_FAST=use_caller: TensorFlow's advice for ParameterServerStrategy on every task.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRPC_FAIL_FAST=use_caller \
    TF_CPP_MIN_LOG_LEVEL=2

WORKDIR /app
# Every package at an exact version with its wheel's sha256 (docker/pin_requirements.py
# writes the file from trainer/requirements.txt's pins): pip refuses any other file, and any
# package the file does not list.
COPY docker/trainer-cpu-requirements.txt /tmp/requirements.txt
RUN pip install --require-hashes -r /tmp/requirements.txt && rm /tmp/requirements.txt
# The trainer package, including the bundled mnist-10k sample that `python -m trainer.stage`
# copies by default.
COPY trainer/ /app/trainer/

# uid/gid 10001 (above 10000: no user of the node; checkov and kube-score ask for it), no home
# directory: the stack's pods run as 10001:10001 with a read-only root
# filesystem, HOME and TMPDIR on an emptyDir at /tmp (infra/components/pods.py). The shared
# volume's root must be writable by that uid: staging creates mnist/ and runs/ under it.
RUN groupadd --gid 10001 trainer && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp trainer
USER 10001:10001
# No ENTRYPOINT: the stack gives the whole command (python -m trainer ..., or
# python -m trainer.stage ...).
CMD ["python", "-m", "trainer", "--help"]
