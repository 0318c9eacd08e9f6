"""Command-line flags of one training task (``python -m trainer``) and their checks."""

from __future__ import annotations

import argparse
import math
import re
import secrets
import time
from pathlib import Path

# The recipe's choices (re-exported as trainer.flags.MODELS, ...) live in the contract, which
# the stack validates its hyperparams.* keys with.
from trainer.contract.recipe import (
    LR_SCALINGS,
    LR_SCHEDULES,
    MAX_AUGMENT_SHIFT,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
)

__all__ = ["BUNDLED_DATA_DIR", "DEFAULT_BATCH_SIZE", "DEFAULT_EPOCHS", "DEFAULT_LEARNING_RATE", "FlagError",
           "LR_SCALINGS", "LR_SCHEDULES", "MAX_AUGMENT_SHIFT", "MODELS", "OPTIMIZERS", "PRECISIONS", "RUN_ID",
           "add_trainer_flags", "build_parser", "check_batch_size", "new_run_id", "parse",
           "scaled_learning_rate", "validate"]

#: The sample shipped with the trainer (8,000 / 2,000 real MNIST digits): the default data.
BUNDLED_DATA_DIR = Path(__file__).resolve().parent / "data" / "mnist-10k"

#: The chart's hyperparameters (ack-tensorflow-training values: epochs 100, batchsize 20,
#: learningrate 0.001), kept as defaults so the stack and users' habits carry over.
DEFAULT_EPOCHS = 100
DEFAULT_BATCH_SIZE = 20
DEFAULT_LEARNING_RATE = 0.001

#: A run id: it is compared as text and goes into Kubernetes pod args, so a plain token.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class FlagError(ValueError):
    """A flag value that breaks its rule; the message names the flag, the value and the rule."""


def add_trainer_flags(parser: argparse.ArgumentParser) -> None:
    """Add the trainer's flags to ``parser`` (shared by ``trainer`` and ``trainer.local``)."""
    parser.add_argument("--data_dir", default=str(BUNDLED_DATA_DIR),
                        help="directory with the four MNIST IDX .gz files or mnist.npz "
                             "(default: the bundled mnist-10k sample)")
    parser.add_argument("--log_dir", default="runs/local",
                        help="shared directory for checkpoints, TensorBoard events, result.json "
                             "(default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS,
                        help="passes over the training set (default %(default)s)")
    parser.add_argument("--batch_size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="examples per step and replica (default %(default)s); with "
                             "ps 0 the global batch is batch_size x replicas")
    parser.add_argument("--learning_rate", type=float, default=DEFAULT_LEARNING_RATE,
                        help="learning rate, the peak one with a schedule (default "
                             "%(default)s)")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam",
                        help="adam, or sgd (plain gradient descent, the guide's) "
                             "(default %(default)s)")
    parser.add_argument("--lr_schedule", choices=LR_SCHEDULES, default="constant",
                        help="constant, or warmup_cosine (warm-up over 15%% of the steps, "
                             "then cosine decay to 0) (default %(default)s)")
    parser.add_argument("--lr_scaling", choices=LR_SCALINGS, default="none",
                        help="with N synchronous replicas (ps 0), multiply the learning "
                             "rate by sqrt(N) (Adam's rule), by N (SGD's), or not: none "
                             "(default %(default)s)")
    parser.add_argument("--model", choices=MODELS, default="convnet",
                        help="convnet (about 99%% on full MNIST), convnet_fc (the same with "
                             "a 128-unit hidden layer; learns faster), convnet_fc_slim "
                             "(convnet_fc with half the filters in its second convolution "
                             "and 256 hidden units: about 20%% faster) or the guide's "
                             "784-100-10 sigmoid mlp (default %(default)s)")
    parser.add_argument("--dropout", type=float, default=0.5,
                        help="convnet(_fc) dropout rate before the last layer (default "
                             "%(default)s; keras-io's is 0.5)")
    parser.add_argument("--label_smoothing", type=float, default=0.0,
                        help="train against labels smoothed by this much: the one-hot target "
                             "x (1 - this) + this / 10 on every class; the reported costs stay "
                             "the cross-entropy against the labels; 0: none (default "
                             "%(default)g)")
    parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                        help="arithmetic: float32, mixed_bfloat16 (bfloat16 layers, float32 "
                             "weights), or auto: mixed_bfloat16 on a CPU with native bfloat16 "
                             "and no GPU, else float32 (default %(default)s)")
    parser.add_argument("--augment_shift", type=int, default=0,
                        help="move each training image by a random 0 to this many pixels "
                             "in each direction; 0: no augmentation (default %(default)s)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default %(default)s)")
    # 50: one scheduled function per 50 steps amortises the coordinator's round trip; on 2
    # cores it raised ParameterServerStrategy's throughput by about 20% over 20.
    parser.add_argument("--steps_per_execution", type=int, default=50,
                        help="training steps per tf.function call; with ps, per scheduled "
                             "function on a worker (default %(default)s)")
    parser.add_argument("--local_steps", type=int, default=1,
                        help="steps each worker (with ps 0, each replica) takes on its own copy "
                             "of the weights between exchanges: 1 exchanges every step; k > 1 "
                             "adds k steps' change to the ps (or averages the replicas) at once "
                             "(default %(default)s; at most --steps_per_execution)")
    parser.add_argument("--log_interval", type=int, default=100,
                        help="print a Step line every this many batches (default "
                             "%(default)s; with a ps, once the next interval's steps are "
                             "started, so the workers never wait for it)")
    parser.add_argument("--peer_timeout", type=float, default=600.0,
                        help="seconds a task waits for lost peers (or the chief for progress) "
                             "before exiting non-zero (default %(default)g)")
    parser.add_argument("--run_id", default="",
                        help="identity of this run, the same for every task (the Kubernetes "
                             "stack and trainer.local set it): ps and workers ignore the "
                             "heartbeat and done files another run left in <log_dir>/cluster; "
                             "empty makes them trust any such file (default '%(default)s')")


def new_run_id() -> str:
    """A fresh run id (local launches): the start time plus 6 random hex digits."""
    return f"local-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def build_parser(prog: str = "python -m trainer") -> argparse.ArgumentParser:
    """The parser of ``python -m trainer``."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Train MNIST with TensorFlow 2: one task of a distributed run (TF_CONFIG "
                    "in the environment) or a single process without TF_CONFIG.")
    add_trainer_flags(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    """Check every flag's rule; raise one FlagError listing every violation.

    The batch size against the training-set size is checked later, once the data is
    read (``check_batch_size``).
    """
    problems = []
    positive = {"epochs": args.epochs, "batch_size": args.batch_size,
                "steps_per_execution": args.steps_per_execution,
                "local_steps": args.local_steps,
                "log_interval": args.log_interval}
    for name, value in positive.items():
        if value < 1:
            problems.append(f"--{name} {value} is invalid: must be an integer >= 1")
    if args.local_steps > args.steps_per_execution >= 1:
        problems.append(f"--local_steps {args.local_steps} is invalid: must be at most "
                        f"--steps_per_execution ({args.steps_per_execution}), as an exchange "
                        "ends every tf.function call")
    if not 0 < args.learning_rate < math.inf:  # inf would turn every weight into nan
        problems.append(f"--learning_rate {args.learning_rate} is invalid: must be > 0 "
                        "and finite")
    if not 0 <= args.dropout < 1:
        problems.append(f"--dropout {args.dropout} is invalid: must be >= 0 and < 1")
    if not 0 <= args.label_smoothing < 1:
        problems.append(f"--label_smoothing {args.label_smoothing} is invalid: must be >= 0 "
                        "and < 1")
    if not 0 <= args.augment_shift <= MAX_AUGMENT_SHIFT:
        problems.append(f"--augment_shift {args.augment_shift} is invalid: must be an integer "
                        f"from 0 to {MAX_AUGMENT_SHIFT} pixels")
    if not args.peer_timeout > 0:
        problems.append(f"--peer_timeout {args.peer_timeout} is invalid: must be > 0 seconds")
    if args.run_id and not RUN_ID.match(args.run_id):
        problems.append(f"--run_id {args.run_id} is invalid: must be at most 63 letters, digits, "
                        "'.', '_' or '-', starting with a letter or digit")
    if not args.data_dir:
        problems.append("--data_dir is empty: give the directory holding the MNIST files")
    if not args.log_dir:
        problems.append("--log_dir is empty: give a directory shared by all tasks")
    if problems:
        raise FlagError("\n".join(problems))


def scaled_learning_rate(learning_rate: float, scaling: str, replicas: int) -> float:
    """``learning_rate`` for a global batch of ``replicas`` synchronous batches under
    ``scaling`` (one of LR_SCALINGS; see there for the rules and their sources).

    Raises:
        FlagError: the scaled rate is not finite (validate checks the given one).
    """
    factor = {"none": 1.0, "sqrt": math.sqrt(replicas), "linear": float(replicas)}[scaling]
    scaled = learning_rate * factor
    if not math.isfinite(scaled):
        raise FlagError(f"--learning_rate {learning_rate} is invalid with --lr_scaling "
                        f"{scaling} and {replicas} synchronous replicas: the scaled rate "
                        f"{scaled} must be finite")
    return scaled


def check_batch_size(batch_size: int, replicas: int, train_examples: int, data_dir: str) -> None:
    """Raise FlagError when one global batch (batch_size x replicas) exceeds the training set."""
    if batch_size * replicas > train_examples:
        extra = f" x {replicas} replicas" if replicas > 1 else ""
        raise FlagError(
            f"--batch_size {batch_size}{extra} is invalid: larger than the training set "
            f"({train_examples} examples in {data_dir})")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and validate; on a bad flag print the message and exit 2 (argparse's code)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        validate(args)
    except FlagError as err:
        parser.error(str(err))
    return args
