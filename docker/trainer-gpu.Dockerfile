# <registry>/trainer:2.21.0-gpu: workers with gpuCount > 0 (and the chief with ps.number 0).
# Build from the repository root, for linux/amd64 (the pinned hashes are of x86_64 wheels):
#   docker build -f docker/trainer-gpu.Dockerfile -t <registry>/trainer:2.21.0-gpu .
#
# The same base and layout as the CPU image; only the packages differ. No CUDA base image is
# needed: tensorflow[and-cuda] brings the CUDA 12 and cuDNN 9 user-space libraries as pip
# wheels (nvidia-*-cu12, under site-packages/nvidia/, which TensorFlow's libraries name in
# their RUNPATH as $ORIGIN/../nvidia/<library>/lib). The one part that must match the node,
# the NVIDIA driver (libcuda.so and the device files), is mounted into the container by the
# node's NVIDIA container runtime, which ACK's GPU nodes run. That runtime acts on the two
# NVIDIA_* variables below: which GPUs to expose (all the container is given; Kubernetes'
# device plugin narrows it to the pod's nvidia.com/gpu) and which driver libraries to mount
# (compute: libcuda; utility: nvidia-smi and NVML).
#
# Why these versions work on the stack's GPU nodes (infra/settings/constants.py):
# - GN5 is the NVIDIA P100, compute capability 6.0. TensorFlow 2.21's wheel is built with
#   CUDA 12.5 for sm_60, sm_70, sm_80, sm_89 and compute_90 (tf.sysconfig.get_build_info()),
#   so the P100 runs TensorFlow's own kernels as shipped machine code.
# - CUDA 12, not 13: CUDA 13 drops Pascal and Volta (P100, V100), and their last driver branch
#   is R580. The wheels are CUDA 12.9 (cuBLAS 12.9 still carries sm_60 code).
# - cuDNN is held at 9.10.2.21, the last release whose kernels cover compute capability 6.0
#   and 7.0; later 9.x releases build their ops for 7.5 and newer only
#   (docker/pin_requirements.py, CUDNN_PIN).
# - The driver: the stack pins R550 on the GPU pool (gpuPool.driverVersion 550.163.01, ACK's
#   node label ack.aliyun.com/nvidia-driver-version), a CUDA 12.4 driver. CUDA 12's
#   minor-version compatibility runs libraries of any later 12.x release on a driver of
#   R525 or newer (cuDNN 9.10 for CUDA 12 asks >= 525.60.13 too); what it does not cover is
#   JIT-compiling PTX made by a newer toolkit, which the sm_60 machine code above avoids.
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
    TF_CPP_MIN_LOG_LEVEL=2 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

WORKDIR /app
# Every package at an exact version with its wheel's sha256 (docker/pin_requirements.py
# writes the file from trainer/requirements.txt's pins): pip refuses any other file, and any
# package the file does not list.
COPY docker/trainer-gpu-requirements.txt /tmp/requirements.txt
RUN pip install --require-hashes -r /tmp/requirements.txt && rm /tmp/requirements.txt
# The trainer package, including the bundled mnist-10k sample that `python -m trainer.stage`
# copies by default.
COPY trainer/ /app/trainer/

# uid/gid 10001 (above 10000: no user of the node; checkov and kube-score ask for it), no home
# directory: the stack's pods run as 10001:10001 with a read-only root
# filesystem, HOME and TMPDIR on an emptyDir at /tmp (infra/components/pods.py).
RUN groupadd --gid 10001 trainer && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp trainer
USER 10001:10001
# No ENTRYPOINT: the stack gives the whole command (python -m trainer ...).
CMD ["python", "-m", "trainer", "--help"]
