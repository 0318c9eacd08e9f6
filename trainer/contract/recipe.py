"""The training recipe: one table of its hyperparameters, and the choices and limits they use.

Every place a hyperparameter appears is derived from ``HYPERPARAMETERS``: the trainer's flags
(trainer/flags.py: ``python -m trainer`` and ``python -m trainer.local``, their defaults,
help and checks), the stack's ``hyperparams.*`` keys (infra/settings/keys.py recipe_key: default, parser,
fix, description; from them Pulumi.yaml's schema and docs/configuration.md), the pods' trainer
arguments (infra/components/task_jobs.py), the run key (infra/settings/model.py) and the
benchmark's flags (benchmarks/bench_runs.py). A new hyperparameter is a row here and the code
that reads ``args.<dest>``. Pure Python: infra imports it without TensorFlow.

The one default recipe is held to the launcher's target: 0.99 test accuracy on full MNIST
with 2 workers + 1 ps on 2 CPU cores, in at least 24 of 25 seeds. What it measured, on
which machine and when, is in docs/benchmarks.md (``benchmarks/trainer_benchmark.py``
prints it). Two epochs; batch 64 (twice the updates of 128 in two epochs, which stopped
short of 0.99); Adam warmed up over 15% of the steps to 0.004, then cosine-decayed to 0
(the large early rate learns fast, the decay settles it; a higher peak missed 0.99 more
often); convnet_fc_slim. --local_steps 50: each worker takes 50 steps on its own copy
between exchanges with the ps (after an every-step warm-up; with ps 0 the replicas are
averaged every 50 steps from the first), which brings 2 workers + 1 ps close to one
process' examples/s (trainer/training/steps.py). Those rounds cost some test accuracy;
--label_smoothing 0.1 with dropout 0.1 gives it back (Szegedy et al. 2016: the smoothed
targets keep the logits from growing without bound). ps 0 trains synchronously on a global
batch of 3 x 64, for which the rate is scaled by sqrt(3) (--lr_scaling sqrt, Adam's rule).
--precision auto: bfloat16 arithmetic where the CPU has it natively (trainer/precision.py;
the same accuracy in less time). The chart's values (100 epochs, batch 20, constant rate
0.001) were never measured with this trainer's models, and the guide's recipe as a whole
(mlp, sgd, batch 20, rate 0.001) stays far under 0.99 after an epoch (docs/benchmarks.md);
``--epochs 100 --batch_size 20 --learning_rate 0.001 --lr_schedule constant --lr_scaling
none --model convnet --dropout 0.5 --label_smoothing 0 --local_steps 1 --precision
float32`` restores the chart's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
#: --steps_per_execution's default, which the stack never changes: the stack's limit of
#: hyperparams.localSteps (an exchange ends every tf.function call).
DEFAULT_STEPS_PER_EXECUTION = 50

#: The data files ``python -m trainer.stage`` stages and the trainer reads (trainer/data.py
#: names them the same): the four IDX files of MNIST, gzip-compressed, or Keras' one
#: ``mnist.npz``. A URL list given as the stack's data.source names these files.
IDX_FILE_NAMES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
NPZ_FILE_NAME = "mnist.npz"


@dataclass(frozen=True)
class Hyperparameter:
    """One row of the recipe: a hyperparameter as the stack's key and as the trainer's flag.

    Attributes:
        key: the stack's key, ``hyperparams.<name>`` (the chart's spelling).
        flag: the trainer's flag, ``--<dest>``.
        type: int, float or str: the flag's argparse type and the key's value type (Pulumi.yaml
            declares int and str keys; it has no float type).
        default: the one default, of ``type`` (see the module's docstring for the recipe).
        help: one text for the flag's ``--help`` and the key's description, without the
            default (each adds it its own way) and without a final period.
        run_key: whether the value enters the run key (infra/runs.py): true for what
            changes what is learnt; false for what a run may change and still resume its
            checkpoints (epochs, the arithmetic, the exchange period).
        choices: the allowed values of a str row; empty for a number.
        minimum, maximum: a number's limits, None for none; a number without a maximum must
            also be finite.
        above, below: whether ``minimum`` / ``maximum`` themselves are refused (> instead of >=).
        unit: the limits' unit in the trainer's message (``" pixels"``), with its space.
        maximum_flag: for the trainer, the maximum is this flag's value instead (flags.validate
            checks it); ``maximum`` is then that flag's default, which the stack never changes.
        neutral_default: the default trains exactly as before the row existed (a weight decay
            of 0: none); at that value the row stays out of the run key and out of the pods'
            arguments, so adding the row changes no deployed stack's run directory or Jobs.
    """

    key: str
    flag: str
    type: type
    default: Any
    help: str
    run_key: bool
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    below: bool = False
    unit: str = ""
    maximum_flag: str = ""
    neutral_default: bool = False

    @property
    def dest(self) -> str:
        """The argparse dest, the flag without its dashes (``learning_rate``)."""
        return self.flag[2:]

    @property
    def description(self) -> str:
        """The stack key's description (Pulumi.yaml, docs/configuration.md): the help, then the
        flag it becomes."""
        return f"{self.help}; trainer {self.flag}."

    @property
    def flag_help(self) -> str:
        """The flag's argparse help: the help with ``%`` escaped, then the default as argparse
        shows it (``%(default)g`` for a float: 0 rather than 0.0)."""
        shown = "%(default)g" if self.type is float else "%(default)s"
        return f"{self.help.replace('%', '%%')} (default {shown})"

    def rule(self) -> str:
        """The trainer's words for a number's limits (``must be an integer >= 1``, ``must be > 0
        and finite``, ``must be an integer from 0 to 7 pixels``); the stack's parsers word
        them their own way (infra/values/parsers.py)."""
        maximum = None if self.maximum_flag else self.maximum
        if self.type is int:
            if maximum is None:
                return f"must be an integer >= {_shown(self.minimum)}{self.unit}"
            return f"must be an integer from {_shown(self.minimum)} to {_shown(maximum)}{self.unit}"
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.above else '>='} {_shown(self.minimum)}{self.unit}")
        parts.append(
            f"{'<' if self.below else '<='} {_shown(maximum)}{self.unit}" if maximum is not None else "finite"
        )
        return "must be " + " and ".join(parts)

    def accepts(self, value: Any) -> bool:
        """Whether a parsed ``value`` keeps the row's choices and limits (the trainer's limits:
        ``maximum_flag`` is checked elsewhere). NaN is refused."""
        if self.choices:
            return value in self.choices
        if self.type is float and math.isnan(value):
            return False
        maximum = None if self.maximum_flag else self.maximum
        if self.minimum is not None and (value <= self.minimum if self.above else value < self.minimum):
            return False
        if maximum is None:
            return self.type is int or math.isfinite(value)
        return value < maximum if self.below else value <= maximum

    def arg(self, value: Any) -> str:
        """``value`` as a command-line argument: repr for a float (every digit kept), else str."""
        return repr(float(value)) if self.type is float else str(value)


def _shown(limit: float) -> str:
    """A limit as the messages write it: 7, 2147483647, 0.5."""
    return str(int(limit)) if float(limit).is_integer() else repr(float(limit))


HYPERPARAMETERS: tuple[Hyperparameter, ...] = (
    Hyperparameter(
        "hyperparams.epochs",
        "--epochs",
        int,
        2,
        "Passes over the training set; raising only this continues the run from its checkpoint",
        run_key=False,
        minimum=1,
    ),
    Hyperparameter(
        "hyperparams.batchsize",
        "--batch_size",
        int,
        64,
        "Examples per step and replica (with synchronous training, ps 0, the global batch is this x "
        "the replicas: chief and workers)",
        run_key=True,
        minimum=1,
    ),
    Hyperparameter(
        "hyperparams.learningrate",
        "--learning_rate",
        float,
        0.004,
        "Learning rate (> 0), the peak one with the warmup_cosine schedule",
        run_key=True,
        minimum=0,
        above=True,
    ),
    Hyperparameter(
        "hyperparams.model",
        "--model",
        str,
        "convnet_fc_slim",
        "Model: convnet (keras-io's, about 99% on full MNIST), convnet_fc (the same with a 128-unit "
        "hidden layer; learns faster), convnet_fc_slim (convnet_fc with half the filters in its second "
        "convolution and 256 hidden units: about 20% faster) or the guide's 784-100-10 sigmoid mlp",
        run_key=True,
        choices=MODELS,
    ),
    Hyperparameter(
        "hyperparams.optimizer",
        "--optimizer",
        str,
        "adam",
        "Optimizer: adam, or sgd (plain gradient descent, the guide's)",
        run_key=True,
        choices=OPTIMIZERS,
    ),
    Hyperparameter(
        "hyperparams.lrSchedule",
        "--lr_schedule",
        str,
        "warmup_cosine",
        "Learning-rate schedule: constant, or warmup_cosine (warm-up over 15% of the steps, then cosine "
        "decay to 0)",
        run_key=True,
        choices=LR_SCHEDULES,
    ),
    Hyperparameter(
        "hyperparams.lrScaling",
        "--lr_scaling",
        str,
        "sqrt",
        "Learning-rate scaling with N synchronous replicas (ps 0): none, sqrt (x sqrt(N), Adam's rule) "
        "or linear (x N, SGD's)",
        run_key=True,
        choices=LR_SCALINGS,
    ),
    Hyperparameter(
        "hyperparams.dropout",
        "--dropout",
        float,
        0.1,
        "Dropout rate before the last layer of the convnets (>= 0, < 1)",
        run_key=True,
        minimum=0,
        maximum=1,
        below=True,
    ),
    Hyperparameter(
        "hyperparams.labelSmoothing",
        "--label_smoothing",
        float,
        0.1,
        "Train against labels smoothed by this much (>= 0, < 1): the one-hot target x (1 - this) + "
        "this / 10 on every class; the reported costs stay the cross-entropy against the labels; 0 = "
        "the labels themselves",
        run_key=True,
        minimum=0,
        maximum=1,
        below=True,
    ),
    Hyperparameter(
        "hyperparams.augmentShift",
        "--augment_shift",
        int,
        0,
        f"Shift each training image by a random 0 to this many pixels each way (at most "
        f"{MAX_AUGMENT_SHIFT}); 0 = no augmentation",
        run_key=True,
        minimum=0,
        maximum=MAX_AUGMENT_SHIFT,
        unit=" pixels",
    ),
    # 2**31 - 1: the largest seed every consumer takes (Python, NumPy and TensorFlow).
    Hyperparameter(
        "hyperparams.seed", "--seed", int, 42, "Random seed", run_key=True, minimum=0, maximum=2**31 - 1
    ),
    Hyperparameter(
        "hyperparams.precision",
        "--precision",
        str,
        "auto",
        "Arithmetic: float32, mixed_bfloat16 (bfloat16 layers, float32 weights), or auto: "
        "mixed_bfloat16 on a CPU with native bfloat16 (AMX or AVX512-BF16) and no GPU, else float32 "
        "(a stack with GPU workers runs auto as float32 in every task)",
        run_key=False,
        choices=PRECISIONS,
    ),
    Hyperparameter(
        "hyperparams.localSteps",
        "--local_steps",
        int,
        50,
        "Steps each worker (with ps 0, each replica) takes on its own copy of the weights between "
        "exchanges: 1 = every step; k > 1 adds k steps' change to the ps (or averages the replicas) "
        f"at once; at most --steps_per_execution ({DEFAULT_STEPS_PER_EXECUTION} on the stack)",
        run_key=False,
        minimum=1,
        maximum=DEFAULT_STEPS_PER_EXECUTION,
        maximum_flag="--steps_per_execution",
    ),
    Hyperparameter(
        "hyperparams.weightDecay",
        "--weight_decay",
        float,
        0.0,
        "Decoupled weight decay (>= 0): every step first shrinks the weights by learning rate x this "
        "x the weights, then applies the optimizer's update (Loshchilov & Hutter 2019, \"Decoupled "
        "Weight Decay Regularization\"; Keras' weight_decay); 0 = none",
        run_key=True,
        minimum=0,
        neutral_default=True,
    ),
)

BY_KEY: dict[str, Hyperparameter] = {row.key: row for row in HYPERPARAMETERS}
BY_DEST: dict[str, Hyperparameter] = {row.dest: row for row in HYPERPARAMETERS}


def defaults() -> dict[str, Any]:
    """The default recipe: dest -> default, in table order."""
    return {row.dest: row.default for row in HYPERPARAMETERS}


def problems(values: Mapping[str, Any]) -> list[str]:
    """The trainer's message for every value of ``values`` (dest -> parsed value, one per row)
    that breaks its row's limits: ``--<dest> <value> is invalid: <rule>``, in table order."""
    return [
        f"{row.flag} {values[row.dest]} is invalid: {row.rule()}"
        for row in HYPERPARAMETERS
        if not row.choices and not row.accepts(values[row.dest])
    ]


def flag_args(values: Mapping[str, Any]) -> list[str]:
    """The trainer arguments of a recipe (dest -> value, one per row): ``[flag, value, ...]``
    in table order, leaving out a ``neutral_default`` row at its default."""
    return [
        arg
        for row in HYPERPARAMETERS
        if not (row.neutral_default and values[row.dest] == row.default)
        for arg in (row.flag, row.arg(values[row.dest]))
    ]


def run_key_recipe(values: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a recipe (dest -> value) that enters the run key: the ``run_key`` rows, less
    a ``neutral_default`` row at its default."""
    return {
        row.dest: values[row.dest]
        for row in HYPERPARAMETERS
        if row.run_key and not (row.neutral_default and values[row.dest] == row.default)
    }
