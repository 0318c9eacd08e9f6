"""Command-line flags of one training task (``python -m trainer``) and their checks."""

from __future__ import annotations

import argparse
import math
import re
import secrets
import time
from pathlib import Path

# The recipe's table and choices (re-exported as trainer.flags.MODELS, ...) live in the
# contract, which the stack derives its hyperparams.* keys from.
from trainer.contract import recipe
from trainer.contract.recipe import (
    LR_SCALINGS,
    LR_SCHEDULES,
    MAX_AUGMENT_SHIFT,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
)

__all__ = [
    "BUNDLED_DATA_DIR",
    "FlagError",
    "LR_SCALINGS",
    "LR_SCHEDULES",
    "MAX_AUGMENT_SHIFT",
    "MODELS",
    "OPTIMIZERS",
    "PRECISIONS",
    "RUN_ID",
    "add_trainer_flags",
    "build_parser",
    "check_batch_size",
    "new_run_id",
    "parse",
    "scaled_learning_rate",
    "validate",
]

#: The sample shipped with the trainer (8,000 / 2,000 real MNIST digits): the default data.
BUNDLED_DATA_DIR = Path(__file__).resolve().parent / "data" / "mnist-10k"

#: A run id: it is compared as text and goes into Kubernetes pod args, so a plain token.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class FlagError(ValueError):
    """A flag value that breaks its rule; the message names the flag, the value and the rule."""


def add_trainer_flags(parser: argparse.ArgumentParser) -> None:
    """Add the trainer's flags to ``parser`` (shared by ``trainer`` and ``trainer.local``)."""
    parser.add_argument(
        "--data_dir",
        default=str(BUNDLED_DATA_DIR),
        help="directory with the four MNIST IDX .gz files or mnist.npz "
        "(default: the bundled mnist-10k sample)",
    )
    parser.add_argument(
        "--log_dir",
        default="runs/local",
        help="shared directory for checkpoints, TensorBoard events, result.json (default: %(default)s)",
    )
    # The recipe's flags, one per row of the table, with its one default, help and choices.
    for row in recipe.HYPERPARAMETERS:
        parser.add_argument(
            row.flag, type=row.type, default=row.default, help=row.flag_help, choices=row.choices or None
        )
    # 50: one scheduled function per 50 steps amortises the coordinator's round trip; on 2
    # cores it raised ParameterServerStrategy's throughput by about 20% over 20.
    parser.add_argument(
        "--steps_per_execution",
        type=int,
        default=recipe.DEFAULT_STEPS_PER_EXECUTION,
        help="training steps per tf.function call; with ps, per scheduled "
        "function on a worker (default %(default)s)",
    )
    parser.add_argument(
        "--log_interval",
        type=int,
        default=100,
        help="print a Step line every this many batches (default "
        "%(default)s; with a ps, once the next interval's steps are "
        "started, so the workers never wait for it)",
    )
    parser.add_argument(
        "--peer_timeout",
        type=float,
        default=600.0,
        help="seconds a task waits for lost peers (or the chief for progress) "
        "before exiting non-zero (default %(default)g)",
    )
    parser.add_argument(
        "--run_id",
        default="",
        help="identity of this run, the same for every task (the Kubernetes "
        "stack and trainer.local set it): ps and workers ignore the "
        "heartbeat and done files another run left in <log_dir>/cluster; "
        "empty makes them trust any such file (default '%(default)s')",
    )


def new_run_id() -> str:
    """A fresh run id (local launches): the start time plus 6 random hex digits."""
    return f"local-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def build_parser(prog: str = "python -m trainer") -> argparse.ArgumentParser:
    """The parser of ``python -m trainer``."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Train MNIST with TensorFlow 2: one task of a distributed run (TF_CONFIG "
        "in the environment) or a single process without TF_CONFIG.",
    )
    add_trainer_flags(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    """Check every flag's rule; raise one FlagError listing every violation: the recipe's
    limits (trainer.contract.recipe's table) first, then the other flags'.

    The batch size against the training-set size is checked later, once the data is
    read (``check_batch_size``).
    """
    problems = recipe.problems(vars(args))
    for name in ("steps_per_execution", "log_interval"):
        if getattr(args, name) < 1:
            problems.append(f"--{name} {getattr(args, name)} is invalid: must be an integer >= 1")
    if args.local_steps > args.steps_per_execution >= 1:
        problems.append(
            f"--local_steps {args.local_steps} is invalid: must be at most "
            f"--steps_per_execution ({args.steps_per_execution}), as an exchange "
            "ends every tf.function call"
        )
    if not args.peer_timeout > 0:
        problems.append(f"--peer_timeout {args.peer_timeout} is invalid: must be > 0 seconds")
    if args.run_id and not RUN_ID.match(args.run_id):
        problems.append(
            f"--run_id {args.run_id} is invalid: must be at most 63 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
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
        raise FlagError(
            f"--learning_rate {learning_rate} is invalid with --lr_scaling "
            f"{scaling} and {replicas} synchronous replicas: the scaled rate "
            f"{scaled} must be finite"
        )
    return scaled


def check_batch_size(batch_size: int, replicas: int, train_examples: int, data_dir: str) -> None:
    """Raise FlagError when one global batch (batch_size x replicas) exceeds the training set."""
    if batch_size * replicas > train_examples:
        extra = f" x {replicas} replicas" if replicas > 1 else ""
        raise FlagError(
            f"--batch_size {batch_size}{extra} is invalid: larger than the training set "
            f"({train_examples} examples in {data_dir})"
        )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and validate; on a bad flag print the message and exit 2 (argparse's code)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        validate(args)
    except FlagError as err:
        parser.error(str(err))
    return args
