"""The end of a run: the chief's exported model and result (result.json and the guide's
closing lines), the done marker that lets the ps and workers go, and the TensorFlow objects
kept until ``os._exit``."""

from __future__ import annotations

import argparse
import dataclasses
import gc
from pathlib import Path

import tensorflow as tf

from trainer import data as data_mod
from trainer.contract import progress
from trainer.servers import ClusterFiles
from trainer.training.evaluation import evaluate
from trainer.training.export import Export, export_model, tree_digest
from trainer.training.loop import Outcome, TrainingLoop
from trainer.volume import full_is_permanent

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
    # TensorFlow's public barrier for pending asynchronous work: leaving an async scope
    # waits until every pending op and remote call has finished (and raises its errors).
    with tf.experimental.async_scope():
        pass
    gc.disable()


def finish_trained(
    args: argparse.Namespace,
    files: ClusterFiles,
    loop: TrainingLoop,
    outcome: Outcome,
    resumed_from_epoch: int,
) -> None:
    """The chief after the last epoch: the export, result.json, the closing lines, the done
    marker."""
    test_accuracy = outcome.test_accuracy
    if test_accuracy is None:  # the last epoch's evaluation is the final one
        loop.packing.copy_to_model(loop.state.weights)
        test_accuracy = evaluate(loop.model, loop.dataset)
    # The model evaluated above (the last epoch's evaluation copied the final weights into it).
    exported = export(args, loop.model, args.epochs)
    total_time = loop.state.elapsed_s()
    train_time = outcome.train_time_s
    result = progress.Result(
        test_accuracy=test_accuracy,
        final_cost=outcome.last_cost,
        total_time_s=total_time,
        train_time_s=train_time,
        build_time_s=outcome.build_time_s,
        epochs=args.epochs,
        resumed_from_epoch=resumed_from_epoch,
        examples_per_s=outcome.examples / train_time if train_time else 0.0,
        train_examples=len(loop.dataset.x_train),
        batch_size=args.batch_size,
        strategy=loop.dist.kind,
        model=args.model,
        global_step=int(loop.state.global_step.numpy()),
        saved_model=exported.saved_model,
        keras_model=exported.keras_model,
        saved_model_files=exported.saved_model_files,
    )
    write_result(args, result)
    for line in progress.final_lines(test_accuracy, total_time, outcome.last_cost):
        print(line, flush=True)
    keep_until_exit(loop, result)
    release_remote_work()
    mark_done(args, files)


def finish_already_done(
    args: argparse.Namespace,
    files: ClusterFiles,
    latest: str,
    done_epochs: int,
    dataset: data_mod.Dataset,
    model,
) -> None:
    """The chief of a run whose checkpoint has every epoch: its export (written only if
    missing), the earlier result's closing lines (or, without result.json, a fresh
    evaluation of ``model``, which holds the checkpoint's weights), the done marker."""
    print(
        f"Run already finished: checkpoint {latest} has {done_epochs} of {args.epochs} "
        "epochs; not training again",
        flush=True,
    )
    previous = progress.read_result(args.log_dir)
    exported = export(args, model, done_epochs, previous)
    fields = {f.name for f in dataclasses.fields(progress.Result)}
    # fields older trainers lack
    newer = {"saved_model", "keras_model", "build_time_s", "saved_model_files"}
    record = dataclasses.asdict(exported)
    if (
        previous
        and fields - newer <= previous.keys()
        and any(previous.get(k) != v for k, v in record.items())
    ):
        # A result written before the export was (a chief stopped in between, or an older
        # trainer): the same weights, so the same result, now naming its export and, when
        # this chief wrote it, its files' digests.
        write_result(
            args,
            progress.Result(**{**{k: v for k, v in previous.items() if k in fields}, **record}),
        )
    if previous:
        accuracy, total, cost = (previous["test_accuracy"], previous["total_time_s"], previous["final_cost"])
    else:
        accuracy, total, cost = evaluate(model, dataset), 0.0, float("nan")
    for line in progress.final_lines(accuracy, total, cost):
        print(line, flush=True)
    keep_until_exit(model)
    release_remote_work()
    mark_done(args, files)


def export(args: argparse.Namespace, model, epochs: int, previous: dict | None = None) -> Export:
    """Export ``model`` (holding the weights after ``epochs`` epochs) under --log_dir as
    version ``epochs`` (trainer/training/export.py) and say where, with the tree digest of its
    files; return its paths and digests.

    A version that was there already keeps the digests ``previous`` (result.json) recorded for
    it, if any: this chief did not write it, and digesting it now would vouch for whatever the
    directory holds by then.

    Raises:
        trainer.volume.VolumeFull: no space left on --log_dir's volume.
    """
    version_dir = Path(args.log_dir) / progress.EXPORT_SUBDIR / str(epochs)
    with full_is_permanent(args.log_dir, f"writing the export {version_dir}"):
        exported = export_model(model, args.log_dir, epochs)
    if not exported.saved_model_files and previous and previous.get("saved_model") == exported.saved_model:
        exported = dataclasses.replace(
            exported, saved_model_files=dict(previous.get("saved_model_files") or {})
        )
    files = exported.saved_model_files
    digest = (
        f"sha256 {tree_digest(files)} of its {len(files)} files"
        if files
        else "no digest recorded: written before this chief's record"
    )
    print(
        f"Exported model: SavedModel {Path(args.log_dir) / exported.saved_model} ({digest}; "
        f"serving_default: pixels float32 (batch, 784) in [0, 1] -> probabilities), Keras "
        f"{Path(args.log_dir) / exported.keras_model}",
        flush=True,
    )
    return exported


def write_result(args: argparse.Namespace, result: progress.Result) -> None:
    """Write ``<log_dir>/result.json``.

    Raises:
        trainer.volume.VolumeFull: no space left on --log_dir's volume.
    """
    with full_is_permanent(args.log_dir, f"writing {Path(args.log_dir) / progress.RESULT_FILE}"):
        progress.write_result(args.log_dir, result)


def mark_done(args: argparse.Namespace, files: ClusterFiles) -> None:
    """Write the done marker that lets the ps and workers go.

    Raises:
        trainer.volume.VolumeFull: no space left on --log_dir's volume.
    """
    with full_is_permanent(args.log_dir, f"writing the done marker {files.done}"):
        files.mark_done()


def finish_worker(loop: TrainingLoop) -> None:
    """A MultiWorkerMirroredStrategy worker after the last epoch.

    Freeing its model, datasets and functions on return waits on the chief's collective and
    coordination services, which end with the chief (freed, the worker exits seconds after
    the chief, with "Failed to send RPC to coordination service" errors); so they are kept
    until ``os._exit``, like the chief's.
    """
    keep_until_exit(loop)
    gc.disable()
