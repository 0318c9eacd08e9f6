"""``python -m trainer.local``: the launcher's command line (every trainer flag with the
trainer's defaults: the one recipe, trainer/contract/recipe.py) and the run it starts, with
TensorBoard beside it on ``--tensorboard``.

The exit code is the chief's final status (130 after Ctrl-C; 2 for bad flags or a Python
without the tasks' packages).
"""

from __future__ import annotations

import argparse
import sys

from trainer import flags, log_dir_lock
from trainer.contract.cluster_spec import Replicas
from trainer.contract.exit_codes import EXIT_MISSING_PACKAGES
from trainer.launcher.supervisor import Launcher, install_signal_handlers
from trainer.packages import first_missing, missing_package_message


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m trainer.local``: its own flags, then every trainer flag with
    the trainer's defaults (the recipe's) and a fresh ``--run_id``."""
    parser = argparse.ArgumentParser(
        prog="python -m trainer.local",
        description="Run chief + workers + ps of a distributed MNIST training on this machine.",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker tasks (default %(default)s)")
    parser.add_argument(
        "--ps",
        type=int,
        default=1,
        help="ps tasks (default %(default)s); 0 = synchronous workers "
        "(MultiWorkerMirroredStrategy, chief included)",
    )
    parser.add_argument(
        "--backoff_limit",
        type=int,
        default=6,
        help="restarts allowed per task, like a Job's backoffLimit (default %(default)s)",
    )
    parser.add_argument(
        "--tensorboard",
        action="store_true",
        help="also serve TensorBoard on --log_dir (127.0.0.1): its URL is "
        "printed before training starts; it keeps serving after the "
        "run until Ctrl-C",
    )
    parser.add_argument(
        "--tensorboard_port",
        type=int,
        default=0,
        help="TensorBoard's port with --tensorboard (default: a free one)",
    )
    flags.add_trainer_flags(parser)
    parser.set_defaults(run_id=flags.new_run_id())
    return parser


def main(argv: list[str] | None = None) -> int:
    """Check the flags (exit 2 on any bad one, listing all) and that this Python has the
    tasks' packages (else one message and exit 2, nothing started), then run every task;
    return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problems = []
    if args.workers < 1:
        problems.append(f"--workers {args.workers} is invalid: must be an integer >= 1")
    if args.ps < 0:
        problems.append(f"--ps {args.ps} is invalid: must be an integer >= 0")
    if args.backoff_limit < 0:
        problems.append(f"--backoff_limit {args.backoff_limit} is invalid: must be >= 0")
    try:
        flags.validate(args)
    except flags.FlagError as err:
        problems.append(str(err))
    if problems:
        parser.error("\n".join(problems))
    missing = first_missing()
    if missing:  # every task would fail the same way, and no restart could cure it
        print(f"error: {missing_package_message(*missing, 'python -m trainer.local')}", file=sys.stderr)
        return EXIT_MISSING_PACKAGES
    # One run at a time in --log_dir (trainer/log_dir_lock.py); its tasks take no lock.
    refused = log_dir_lock.hold_at_start(args.log_dir, "python -m trainer.local")
    if refused is not None:
        return refused
    trainer_argv = []
    for action in flags.build_parser()._actions:
        if action.dest != "help":
            trainer_argv += [action.option_strings[0], str(getattr(args, action.dest))]
    launcher = Launcher(Replicas(chief=1, worker=args.workers, ps=args.ps), trainer_argv, args.backoff_limit)
    install_signal_handlers()
    if not args.tensorboard:
        return launcher.run()
    return run_with_tensorboard(launcher, args.log_dir, args.tensorboard_port)


def run_with_tensorboard(launcher: Launcher, log_dir: str, port: int) -> int:
    """``--tensorboard``: TensorBoard first (its URL printed once it answers), then the run;
    after a run that was not interrupted, TensorBoard serves on until Ctrl-C. Returns the
    run's exit code (1 when TensorBoard cannot start, before any task starts)."""
    from trainer.board import BoardError, TensorBoardServer

    board = TensorBoardServer(log_dir, port, out=launcher.out, lock=launcher.lock)
    try:
        try:
            url = board.start()
        except BoardError as err:
            launcher.say(f"error: {err}")
            return 1
        launcher.say(f"TensorBoard {url} (logdir {log_dir})")
        code = launcher.run()
        if code != 130:
            launcher.say(f"training ended (exit {code})")
            board.serve_until_interrupted(launcher.say)
        return code
    except KeyboardInterrupt:  # while TensorBoard was starting
        return 130
    finally:
        board.stop()
