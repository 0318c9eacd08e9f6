# <registry>/trainer:2.21.0-cpu: ps, chief (coordinator), data staging and gpuCount-0 workers.
# Build from the repository root:
#   docker build -f docker/trainer-cpu.Dockerfile -t <registry>/trainer:2.21.0-cpu .
FROM python:3.11-slim

# GRPC_FAIL_FAST=use_caller: TensorFlow's advice for ParameterServerStrategy on every task.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRPC_FAIL_FAST=use_caller \
    TF_CPP_MIN_LOG_LEVEL=2

WORKDIR /app
COPY trainer/requirements.txt /tmp/requirements.txt
RUN pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt
# The trainer package, including the bundled mnist-10k sample that `python -m trainer.stage`
# copies by default.
COPY trainer/ /app/trainer/

# Runs as root on purpose: the NAS volume's root directory belongs to root (no_squash), and
# the staging Job and the chief create mnist/ and runs/ under it.
# No ENTRYPOINT: the stack gives the whole command (python -m trainer ..., or
# python -m trainer.stage ...).
CMD ["python", "-m", "trainer", "--help"]
