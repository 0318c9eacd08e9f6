"""The training recipe's choices and limits, shared by the trainer's flags and the stack's keys.

trainer/flags.py takes its ``choices`` from here and infra/settings/keys.py validates the
``hyperparams.*`` keys with the same tuples, so a value the stack accepts is one the trainer
accepts. Pure Python: infra imports it without TensorFlow.
"""

from __future__ import annotations

#: --model: convnet (keras-io's mnist_convnet, about 99% on full MNIST), convnet_fc (the same
#: with a 128-unit hidden layer), convnet_fc_slim (half the filters in the second convolution
#: and 256 hidden units: about 20% faster) or the guide's 784-100-10 sigmoid mlp.
MODELS = ("convnet", "convnet_fc", "convnet_fc_slim", "mlp")
#: --optimizer: Adam, or plain gradient descent (the guide's).
OPTIMIZERS = ("adam", "sgd")
#: constant: --learning_rate throughout (the chart's); warmup_cosine: linear warm-up to
#: --learning_rate over the first 15% of the run's steps, then cosine decay to 0 at the end.
LR_SCHEDULES = ("constant", "warmup_cosine")
#: --precision: float32, Keras' mixed_bfloat16 (bfloat16 arithmetic, float32 weights), or auto:
#: mixed_bfloat16 on a CPU with native bfloat16 and no GPU, else float32 (trainer/precision.py).
PRECISIONS = ("auto", "float32", "mixed_bfloat16")
#: How --learning_rate grows when synchronous replicas (ps 0: chief + workers, or several
#: GPUs) make the global batch N times --batch_size: none; sqrt, x sqrt(N), the rule for
#: Adam (Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive Gradient
#: Algorithms"); linear, x N, the rule for SGD (Goyal et al. 2017, "Accurate, Large
#: Minibatch SGD"). Asynchronous ps training applies each worker's batch alone: N is 1.
LR_SCALINGS = ("none", "sqrt", "linear")
#: --augment_shift's limit: a quarter of the 28-pixel side (a digit moved further leaves the
#: frame).
MAX_AUGMENT_SHIFT = 7

#: The data files ``python -m trainer.stage`` stages and the trainer reads (trainer/data.py
#: names them the same): the four IDX files of MNIST, gzip-compressed, or Keras' one
#: ``mnist.npz``. A URL list given as the stack's data.source names these files.
IDX_FILE_NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                  "t10k-labels-idx1-ubyte.gz")
NPZ_FILE_NAME = "mnist.npz"
