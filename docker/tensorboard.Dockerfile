# <registry>/tensorboard:2.21.0: serves the runs under the shared log directory.
# Build from the repository root:
#   docker build -f docker/tensorboard.Dockerfile -t <registry>/tensorboard:2.21.0 .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# TensorBoard alone, at the trainer's own pin (the tensorboard== line of
# trainer/requirements.txt, what `python -m trainer.local --tensorboard` runs): the trainer
# writes its scalars with core TensorFlow ops, so this image does not carry TensorFlow.
COPY trainer/requirements.txt /tmp/requirements.txt
RUN pin="$(grep -E '^tensorboard==' /tmp/requirements.txt)" && test -n "$pin" \
    && pip install "$pin" && rm /tmp/requirements.txt

# uid/gid 10001, as the stack's pods run it (infra/components/pods.py).
RUN groupadd --gid 10001 tensorboard \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp tensorboard
USER 10001:10001
EXPOSE 6006
# The stack passes --logdir <mountPath>/runs/<name_prefix>; --bind_all listens on the
# pod IP so the Service can reach it.
ENTRYPOINT ["tensorboard", "--bind_all", "--port", "6006"]
CMD ["--logdir", "/data/runs"]
