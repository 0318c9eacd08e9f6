"""``python -m trainer``: run one task of a training run, dispatching on TF_CONFIG's task type.

chief (or a single process without TF_CONFIG, or any task with ps 0) trains; ps and,
with ps tasks, workers run a tf.distribute.Server until the chief is done.
Exit codes: see trainer.contract.exit_codes. NumPy and TensorFlow are imported only once the
task knows what it runs, so that a Python without them fails with one line that says so.
"""

from __future__ import annotations

import argparse
import os
import sys

# Every task retries gRPC calls by the caller's choice (TensorFlow's ParameterServerStrategy
# guidance), so a briefly unreachable peer is waited for instead of failing the step.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from trainer import flags, log_dir_lock, tasklog  # noqa: E402
from trainer.autograph_files import remove_autograph_files  # noqa: E402
from trainer.contract.cluster_spec import PARAMETER_SERVER, ClusterSpecError, TaskConfig, parse_tf_config  # noqa: E402
from trainer.contract.exit_codes import (  # noqa: E402
    EXIT_BAD_DATA,
    EXIT_BAD_FLAGS,
    EXIT_MISSING_PACKAGES,
    EXIT_RETRY,
    EXIT_VOLUME_FULL,
    PERMANENT_EXIT_CODES,
)
from trainer.launcher.lifetime import exit_with_launcher  # noqa: E402
from trainer.packages import import_error_message  # noqa: E402
from trainer.servers import ClusterFiles, use_run_id  # noqa: E402
from trainer.volume import VolumeFull  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run one task; return its exit code."""
    args = flags.parse(argv)
    # Before any task code runs: the chief's heartbeat and done files carry this run's id.
    use_run_id(args.run_id)
    try:
        task = parse_tf_config(os.environ.get("TF_CONFIG"))
    except ClusterSpecError as err:
        message = str(err)
        if not message.startswith("TF_CONFIG"):  # say where the bad value came from
            message = f"TF_CONFIG: {message}"
        if "task type None is invalid" in message:
            message = 'TF_CONFIG has a cluster but no task: set "task": {"type": ..., "index": ...}'
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_FLAGS
    if task.task_type == "evaluator":
        print(
            "error: the evaluator task type is not supported by this trainer (the chief "
            "evaluates after every epoch)",
            file=sys.stderr,
        )
        return EXIT_BAD_FLAGS
    if log_dir_lock.wanted() and os.path.isdir(args.log_dir):  # else taken where it is made (run.py)
        refused = log_dir_lock.hold_at_start(args.log_dir, "python -m trainer")
        if refused is not None:
            return refused
    # Also into <log_dir>/logs/<task>.log on the shared volume, which outlives the pod.
    tasklog.start(
        args.log_dir, f"{task.task_type}-{task.task_index}", f" run_id {args.run_id}" if args.run_id else ""
    )
    if task.task_type == "ps" or (task.task_type == "worker" and task.strategy_kind == PARAMETER_SERVER):
        from trainer.servers import run_server

        return run_server(task.task_type, task.task_index, task.cluster_spec, args.log_dir, args.peer_timeout)
    code = train(args, task)
    if task.is_chief and code in PERMANENT_EXIT_CODES and len(task.cluster_spec) > 1:
        # The other tasks leave now instead of after --peer_timeout (trainer/servers.py).
        try:
            ClusterFiles(args.log_dir).mark_failed(code)
        except OSError as err:  # a full volume may refuse even this small file
            print(
                f"warning: cannot tell the other tasks that the run failed ({err}); they "
                f"exit after --peer_timeout {args.peer_timeout:g}s",
                file=sys.stderr,
            )
    return code


def train(args: argparse.Namespace, task: TaskConfig) -> int:
    """Run a training task (trainer.training.run); return its exit code, printing the
    error of a permanent failure, a lost peer or a checkpoint the volume would not deliver."""
    try:
        from trainer.data import DataError
        from trainer.training.checkpoint_files import CheckpointIOError
        from trainer.training.liveness import PeerLost
        from trainer.training.run import run
    except ImportError as err:  # this Python lacks a package: no restart can cure that
        print(f"error: {import_error_message(err, 'python -m trainer')}", file=sys.stderr)
        return EXIT_MISSING_PACKAGES
    try:
        return run(args, task)
    except flags.FlagError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_FLAGS
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_DATA
    except VolumeFull as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_VOLUME_FULL
    except (PeerLost, CheckpointIOError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_RETRY
    except ImportError as err:
        print(f"error: {import_error_message(err, 'python -m trainer')}", file=sys.stderr)
        return EXIT_MISSING_PACKAGES


if __name__ == "__main__":
    exit_with_launcher()
    try:
        code = main()
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code if isinstance(exit_.code, int) else 1
    except ImportError as err:  # this Python lacks a package: no restart can cure that
        print(f"error: {import_error_message(err, 'python -m trainer')}", file=sys.stderr)
        code = EXIT_MISSING_PACKAGES
    except BaseException:  # noqa: BLE001 - report, then exit without waiting for TF threads
        import traceback

        traceback.print_exc()
        code = EXIT_RETRY
    remove_autograph_files()
    sys.stdout.flush()
    sys.stderr.flush()
    tasklog.stop()  # the log file gets the last lines before the process goes
    # os._exit: TensorFlow's gRPC and coordinator threads can keep a normal exit waiting.
    os._exit(code)
