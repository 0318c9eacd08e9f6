"""The end of a run: the chief's result (result.json and the guide's closing lines), the done
marker that lets the ps and workers go, and the TensorFlow objects kept until ``os._exit``."""

from __future__ import annotations

import argparse
import gc

from tensorflow.python.eager import context

from trainer import data as data_mod
from trainer.contract import progress
from trainer.servers import ClusterFiles
from trainer.training.evaluation import evaluate
from trainer.training.loop import Outcome, TrainingLoop

#: What the chief holds on to from telling the servers "done" until the process exits: a
#: tf.function, variable or dataset freed after that would be removed on the ps and workers
#: by an RPC, which fails once they are gone and logs a "Failed to remove function
#: remotely" error with gRPC's "remote target has been disconnected" (dozens of lines).
_KEEP_UNTIL_EXIT: list = []


def keep_until_exit(*objects) -> None:
    """Hold ``objects``, and so what they reference, until the process exits."""
    _KEEP_UNTIL_EXIT.extend(objects)


def release_remote_work() -> None:
    """Finish every RPC the chief still owes the other tasks before they are told to go.

    Garbage (old tf.functions, such as the save function that each checkpoint under
    ParameterServerStrategy traces anew) is collected now and its remote removal waited
    for; collection is then switched off, so nothing more is freed, and so removed
    remotely, before ``os._exit`` (see _KEEP_UNTIL_EXIT).
    """
    gc.collect()
    context.async_wait()
    gc.disable()


def finish_trained(args: argparse.Namespace, files: ClusterFiles, loop: TrainingLoop,
                   outcome: Outcome, resumed_from_epoch: int) -> None:
    """The chief after the last epoch: result.json, the closing lines, the done marker."""
    test_accuracy = outcome.test_accuracy
    if test_accuracy is None:  # the last epoch's evaluation is the final one
        loop.packing.copy_to_model(loop.state.weights)
        test_accuracy = evaluate(loop.model, loop.dataset)
    total_time = loop.state.elapsed_s()
    train_time = outcome.train_time_s
    result = progress.Result(
        test_accuracy=test_accuracy, final_cost=outcome.last_cost, total_time_s=total_time,
        train_time_s=train_time, epochs=args.epochs, resumed_from_epoch=resumed_from_epoch,
        examples_per_s=outcome.examples / train_time if train_time else 0.0,
        train_examples=len(loop.dataset.x_train), batch_size=args.batch_size,
        strategy=loop.dist.kind, model=args.model,
        global_step=int(loop.state.global_step.numpy()))
    progress.write_result(args.log_dir, result)
    for line in progress.final_lines(test_accuracy, total_time, outcome.last_cost):
        print(line, flush=True)
    keep_until_exit(loop, result)
    release_remote_work()
    files.mark_done()


def finish_already_done(args: argparse.Namespace, files: ClusterFiles, latest: str,
                        done_epochs: int, dataset: data_mod.Dataset, model) -> None:
    """The chief of a run whose checkpoint has every epoch: the earlier result's closing
    lines (or, without result.json, a fresh evaluation of ``model``), the done marker."""
    print(f"Run already finished: checkpoint {latest} has {done_epochs} of {args.epochs} "
          "epochs; not training again", flush=True)
    previous = progress.read_result(args.log_dir)
    if previous:
        accuracy, total, cost = (previous["test_accuracy"], previous["total_time_s"],
                                 previous["final_cost"])
    else:
        accuracy, total, cost = evaluate(model, dataset), 0.0, float("nan")
    for line in progress.final_lines(accuracy, total, cost):
        print(line, flush=True)
    keep_until_exit(model)
    release_remote_work()
    files.mark_done()


def finish_worker(loop: TrainingLoop) -> None:
    """A MultiWorkerMirroredStrategy worker after the last epoch.

    Freeing its model, datasets and functions on return waits on the chief's collective and
    coordination services, which end with the chief (seen: the worker exited 14 s after
    the chief, with "Failed to send RPC to coordination service" errors); so they are kept
    until ``os._exit``, like the chief's.
    """
    keep_until_exit(loop)
    gc.disable()
