"""``run``: one training task (the chief, or with ps 0 any task) from its flags to its exit
code, in phases: check the inputs, connect, build the run's state, resume, train, finish."""

from __future__ import annotations

import argparse
import time

from trainer import data as data_mod
from trainer import log_dir_lock
from trainer.contract.cluster_spec import MULTI_WORKER_MIRRORED, SINGLE_PROCESS, TaskConfig
from trainer.contract.exit_codes import EXIT_SIGTERM
from trainer.flags import FlagError, check_batch_size, scaled_learning_rate
from trainer.servers import ClusterFiles, exit_when_chief_fails, start_heartbeat
from trainer.training.liveness import SigtermFlag, Watchdog
from trainer.volume import is_no_space, volume_full


def run(args: argparse.Namespace, task: TaskConfig) -> int:
    """Train (or resume, or notice the run is finished) as ``task``; return the exit code.

    Raises:
        trainer.data.DataError, trainer.flags.FlagError: bad data or batch size, raised
            before any training.
        trainer.training.liveness.PeerLost: a ps (or, with ps 0, a worker) was lost mid-run.
    """
    started = time.time()
    sigterm = SigtermFlag(
        f"{task.task_type}-{task.task_index}"
    )  # until training begins, SIGTERM ends the task at once
    files = ClusterFiles(args.log_dir)
    dataset = check_inputs(args, task, files)

    # TensorFlow only now: bad data or a bad --log_dir fail fast, without its costly import.
    import keras
    import tensorflow as tf

    from trainer import precision
    from trainer.model import build_model
    from trainer.packed import PackedWeights
    from trainer.training import finish
    from trainer.training.checkpoints import TrainState
    from trainer.training.distribution import connect
    from trainer.training.loop import TrainingLoop

    keras.utils.set_random_seed(args.seed)
    # Started before connecting to the cluster: a ps or worker that never comes up is a
    # lost peer too.
    watchdog = Watchdog(args.peer_timeout)
    dist = connect(task)
    n_train = len(dataset.x_train)
    check_batch_size(args.batch_size, dist.replicas, n_train, args.data_dir)  # GPUs add some
    steps_per_epoch = n_train // dist.global_batch(args.batch_size)
    # --learning_rate is the rate of one replica's batch; the global batch's (--lr_scaling):
    learning_rate = scaled_learning_rate(args.learning_rate, args.lr_scaling, dist.replicas)
    # The model is built outside the strategy's scope: its variables are this process's
    # template and evaluation copy; training reads and updates the packed vector
    # state.weights, one variable on the ps (trainer/packed.py).
    model = build_model(args.model, args.dropout)
    policy = precision.resolve(args.precision, has_gpu=bool(tf.config.list_physical_devices("GPU")))
    # Training may compute in bfloat16; the evaluation and the export stay float32.
    compute_model = (
        model if policy == precision.FLOAT32 else build_model(args.model, args.dropout, dtype=policy)
    )
    packing = PackedWeights(model, compute_model)
    state = TrainState(
        dist.strategy,
        packing.initial_value(),
        args,
        args.epochs * steps_per_epoch,
        task,
        started,
        learning_rate=learning_rate,
    )
    latest = state.restore_latest(args)
    if task.is_chief:
        announce(args, learning_rate, dataset, dist.kind, dist.replicas, steps_per_epoch, policy)
    done_epochs, done_batches = state.resume_point()
    if done_epochs >= args.epochs:
        if task.is_chief:
            packing.copy_to_model(state.weights)
            # Kept until os._exit: the packed weights and the optimizer live on the ps.
            finish.keep_until_exit(state, dist, packing)
            finish.finish_already_done(args, files, latest, done_epochs, dataset, model)
        return 0
    if task.is_chief:
        note_start(args, files, latest, done_epochs, done_batches)

    loop = TrainingLoop(args, dist, state, packing, model, dataset, steps_per_epoch, watchdog, sigterm)
    outcome = loop.run(done_epochs, done_batches)
    if outcome.sigterm:
        return EXIT_SIGTERM
    if task.is_chief:
        finish.finish_trained(args, files, loop, outcome, done_epochs)
    else:
        finish.finish_worker(loop)
    return 0


def check_inputs(args: argparse.Namespace, task: TaskConfig, files: ClusterFiles) -> data_mod.Dataset:
    """Read ``--data_dir`` and check ``--batch_size`` against it, then make ``--log_dir`` (and
    on the chief start the heartbeat); return the data.

    Checked before anything is written to --log_dir: a run that cannot start leaves no
    trace (the servers count their wait from their own start).

    Raises:
        trainer.data.DataError: the data cannot be read.
        trainer.flags.FlagError: one global batch is larger than the training set, or
            --log_dir cannot be made.
        trainer.volume.VolumeFull: no space for the heartbeat on --log_dir's volume.
    """
    dataset = data_mod.load(args.data_dir)
    # MultiWorkerMirroredStrategy: one replica per task (chief + workers), CPU or one GPU.
    replicas = (
        len(task.cluster_spec.get("chief", [])) + len(task.cluster_spec.get("worker", []))
        if task.strategy_kind == MULTI_WORKER_MIRRORED
        else 1
    )
    check_batch_size(args.batch_size, replicas, len(dataset.x_train), args.data_dir)
    if log_dir_lock.wanted():  # one run at a time in --log_dir (raises FlagError when in use)
        try:
            log_dir_lock.hold(args.log_dir, "python -m trainer")
        except log_dir_lock.LogDirRefused as err:
            raise FlagError(str(err)) from None
    try:
        files.dir.mkdir(parents=True, exist_ok=True)  # also makes --log_dir itself
        if task.is_chief:
            start_heartbeat(files)  # before connecting, so waiting servers see a live chief
        else:  # a synchronous worker: a chief that ends for good would leave it waiting
            exit_when_chief_fails(files, f"{task.task_type} {task.task_index}")
    except OSError as err:
        if is_no_space(err):
            raise volume_full(err, args.log_dir, f"writing the heartbeat {files.heartbeat}") from None
        raise FlagError(
            f"--log_dir {args.log_dir} is invalid: cannot create "
            f"{err.filename or files.dir}: {err.strerror or err}"
        ) from None
    return dataset


def announce(
    args: argparse.Namespace,
    learning_rate: float,
    dataset: data_mod.Dataset,
    kind: str,
    replicas: int,
    steps_per_epoch: int,
    policy: str,
) -> None:
    """The chief's Training line (``progress.parse_log`` reads the run's size from it):
    model, data, strategy, epochs of batches, optimizer and the learning rate, with its
    schedule and how --learning_rate was scaled to ``learning_rate`` for ``replicas``; then the
    label smoothing where not 0, the arithmetic's dtype ``policy`` where not float32 and the
    exchange period (--local_steps) where not 1 and there are peers to exchange with."""
    known = f", {dataset.known_as} by sha256" if dataset.known_as else ""
    notes = [] if args.lr_schedule == "constant" else [args.lr_schedule]
    rate = f"{learning_rate:g}"
    if learning_rate != args.learning_rate:
        rate = f"{learning_rate:.3g}"
        factor = f"sqrt({replicas})" if args.lr_scaling == "sqrt" else f"{replicas}"
        notes.append(f"{args.learning_rate:g} x {factor} for {replicas} synchronous replicas")
    print(
        f"Training {args.model} on {len(dataset.x_train)} examples from {args.data_dir} "
        f"({dataset.fmt}{known}); strategy {kind}; {args.epochs} epochs of "
        f"{steps_per_epoch} batches of {args.batch_size * replicas}; {args.optimizer} lr "
        f"{rate}"
        + (f" ({'; '.join(notes)})" if notes else "")
        + (f"; label smoothing {args.label_smoothing:g}" if args.label_smoothing else "")
        + (f"; {policy}" if policy != "float32" else "")
        + (
            f"; exchanging every {args.local_steps} steps"
            if args.local_steps > 1 and kind != SINGLE_PROCESS
            else ""
        ),
        flush=True,
    )


def note_start(
    args: argparse.Namespace, files: ClusterFiles, latest: str | None, done_epochs: int, done_batches: int
) -> None:
    """The chief, about to train: remove a done marker left by an earlier, shorter run, and
    say where a resumed run continues."""
    try:
        files.done.unlink()
    except FileNotFoundError:
        pass
    if latest:
        where = (
            f"continuing from epoch {done_epochs + 1}"
            if done_batches == 0
            else f"continuing epoch {done_epochs + 1} at batch {done_batches + 1}"
        )
        print(
            f"Restored checkpoint {latest}: {done_epochs} of {args.epochs} epochs done; {where}", flush=True
        )
