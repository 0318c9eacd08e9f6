#!/usr/bin/env bash
# The main job on one machine (the embedded default): installs what it needs, then runs the
# distributed topology the stack deploys (chief + 2 workers + 1 ps) as local processes on the
# shipped MNIST sample. Extra arguments go to `python -m trainer.local` and override these
# defaults, e.g. `scripts/train-local.sh --ps 0 --epochs 10`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/bootstrap.sh
# A fresh log directory per run: the trainer resumes from (and will not retrain) a finished run
# in an existing one.
log_dir="runs/local-$(date -u +%Y%m%d-%H%M%S)"
echo "train-local: logs, checkpoints and result.json in $log_dir" >&2
# The launcher's fast recipe (convnet_fc_slim, batch 64, Adam 0.004 warm-up + cosine, dropout
# 0.1, label smoothing 0.1, 50 local steps between exchanges), with 10 epochs: the sample has
# an eighth of MNIST's training digits.
exec "$repo/.venv/bin/python" -m trainer.local \
  --workers 2 --ps 1 --epochs 10 --log_interval 20 \
  --log_dir "$log_dir" "$@"
