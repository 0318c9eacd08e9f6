# <registry>/tensorboard:2.21.0: serves the runs under the shared log directory.
# Build from the repository root, for linux/amd64 (the pinned hashes are of x86_64 wheels):
#   docker build -f docker/tensorboard.Dockerfile -t <registry>/tensorboard:2.21.0 .

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

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# TensorBoard alone, at the trainer's own pin (the tensorboard== line of
# trainer/requirements.txt, what `python -m trainer.local --tensorboard` runs), with every
# package it needs at an exact version and its wheel's sha256 (docker/pin_requirements.py): the
# trainer writes its scalars with core TensorFlow ops, so this image does not carry TensorFlow.
COPY docker/tensorboard-requirements.txt /tmp/requirements.txt
RUN pip install --require-hashes -r /tmp/requirements.txt && rm /tmp/requirements.txt

# uid/gid 10001, as the stack's pods run it (infra/components/pods.py).
RUN groupadd --gid 10001 tensorboard \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp tensorboard
USER 10001:10001
EXPOSE 6006
# The stack passes --logdir <mountPath>/runs/<name_prefix>; --bind_all listens on the
# pod IP so the Service can reach it.
ENTRYPOINT ["tensorboard", "--bind_all", "--port", "6006"]
CMD ["--logdir", "/data/runs"]
