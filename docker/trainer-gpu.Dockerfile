# <registry>/trainer:2.21.0-gpu: workers with gpuCount > 0 (GN5 = NVIDIA P100, compute 6.0).
# Build from the repository root:
#   docker build -f docker/trainer-gpu.Dockerfile -t <registry>/trainer:2.21.0-gpu .
#
# CUDA 12.x on purpose: CUDA 13 drops Pascal (P100), whose last driver branch is R580.
# tensorflow[and-cuda] brings its own CUDA 12 / cuDNN 9 user-space libraries as pip wheels;
# the base image supplies the NVIDIA container runtime's CUDA requirement. 12.2 keeps that
# requirement low (driver >= 535): CUDA 12 minor-version compatibility lets the newer 12.x
# libraries run on any 12.x-capable driver.
FROM nvidia/cuda:12.2.2-base-ubuntu22.04

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRPC_FAIL_FAST=use_caller \
    TF_CPP_MIN_LOG_LEVEL=2 \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && pip install "tensorflow[and-cuda]==2.21.0"

WORKDIR /app
COPY trainer/ /app/trainer/

# uid/gid 1000 and no ENTRYPOINT for the same reasons as the CPU image.
RUN groupadd --gid 1000 trainer && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /tmp trainer
USER 1000:1000
CMD ["python", "-m", "trainer", "--help"]
