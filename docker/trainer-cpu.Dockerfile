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

# uid/gid 10001 (above 10000: no user of the node; checkov and kube-score ask for it), no home
# directory: the stack's pods run as 10001:10001 with a read-only root
# filesystem, HOME and TMPDIR on an emptyDir at /tmp (infra/components/pods.py). The shared
# volume's root must be writable by that uid: staging creates mnist/ and runs/ under it.
RUN groupadd --gid 10001 trainer && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp trainer
USER 10001:10001
# No ENTRYPOINT: the stack gives the whole command (python -m trainer ..., or
# python -m trainer.stage ...).
CMD ["python", "-m", "trainer", "--help"]
