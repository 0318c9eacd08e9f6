"""Training: strategy from TF_CONFIG, the custom loop, checkpoints, evaluation, results.

One loop serves all three cases (issue 3, item 1):
- ps tasks -> ParameterServerStrategy; this process (the chief) is the coordinator and
  schedules functions of ``--steps_per_execution`` steps on the workers through
  tf.distribute.coordinator.ClusterCoordinator (Keras 3 has no DatasetCreator, so
  ``model.fit`` cannot drive it). Worker failures are absorbed by the coordinator (it
  re-runs the function elsewhere and rebuilds the restarted worker's dataset); a ps failure
  raises, and TensorFlow's guidance is to restart the coordinator, which resumes from the
  last checkpoint.
- workers and no ps -> MultiWorkerMirroredStrategy; every task (chief included) runs the
  loop; a lost peer makes the collectives fail, every task exits non-zero and, once
  restarted, resumes from the chief's checkpoint.
- no TF_CONFIG -> the default strategy in one process.

An epoch is ``train_examples // (batch_size x replicas)`` steps in every case, so a run
does exactly ``--epochs`` epochs of updates however often it is interrupted.
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

from trainer import data as data_mod
from trainer import tasklog
from trainer.contract import progress
from trainer.contract.cluster_spec import (MULTI_WORKER_MIRRORED, PARAMETER_SERVER, TaskConfig)
from trainer.contract.exit_codes import EXIT_SIGTERM
from trainer.flags import FlagError, check_batch_size, scaled_learning_rate
from trainer.servers import ClusterFiles, start_heartbeat

CHECKPOINT_SUBDIR = "checkpoints"
TENSORBOARD_SUBDIR = progress.TENSORBOARD_SUBDIR
EVAL_BATCH = 1000
#: warmup_cosine: the share of the run's steps spent warming up from a tenth of the peak rate.
WARMUP_FRACTION = 0.15

#: What the chief holds on to from telling the servers "done" until the process exits: a
#: tf.function, variable or dataset freed after that would be removed on the ps and workers
#: by an RPC, which fails once they are gone and logs a "Failed to remove function
#: remotely" error with gRPC's "remote target has been disconnected" (dozens of lines).
_KEEP_UNTIL_EXIT: list = []


class PeerLost(RuntimeError):
    """A peer (ps, or with ps 0 any worker) went away; the task should be restarted."""


def _say(message: str) -> None:
    print(message, flush=True)


class Watchdog:
    """Exit the process (code 1) when no training progress is seen for ``timeout_s``.

    The coordinator waits forever for lost workers and collectives can hang on a dead
    peer; this turns "lost peers for longer than a timeout" into a clear non-zero exit.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.last = time.monotonic()
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    def kick(self) -> None:
        self.last = time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(min(5.0, self.timeout_s / 4))
            idle = time.monotonic() - self.last
            if idle > self.timeout_s:
                print(f"error: no training progress for {idle:.0f}s (--peer_timeout "
                      f"{self.timeout_s:g}s): peers lost; exiting so the task is restarted",
                      file=sys.stderr, flush=True)
                tasklog.exit_now(1)  # os._exit(1) once the message is in the task's log file


def make_optimizer(args: argparse.Namespace, total_steps: int):
    """The optimizer of ``--optimizer`` with ``args.learning_rate`` (``--learning_rate``,
    scaled by ``run`` for synchronous replicas: ``--lr_scaling``) under ``--lr_schedule``.

    warmup_cosine follows the optimizer's step count (``optimizer.iterations``), which the
    training function resets to the global step at the start of every call, so the rate
    follows the run's progress across workers and restarts.
    """
    import keras

    rate = args.learning_rate
    if args.lr_schedule == "warmup_cosine":
        rate = warmup_cosine_class()(args.learning_rate, total_steps,
                                     max(1, round(WARMUP_FRACTION * total_steps)))
    if args.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=rate)
    return keras.optimizers.Adam(learning_rate=rate)


@functools.cache
def warmup_cosine_class():
    """The WarmupCosine schedule class (a Keras class, so defined once Keras is imported)."""
    import keras
    import tensorflow as tf

    class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
        """Linear warm-up from peak/10 to ``peak`` over ``warmup_steps``, then half a cosine
        down to 0 at ``total_steps`` (and 0 after)."""

        def __init__(self, peak: float, total_steps: int, warmup_steps: int) -> None:
            self.peak, self.total_steps, self.warmup_steps = peak, total_steps, warmup_steps

        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            warm = self.peak * (0.1 + 0.9 * step / self.warmup_steps)
            progress = tf.clip_by_value((step - self.warmup_steps)
                                        / max(1, self.total_steps - self.warmup_steps), 0.0, 1.0)
            cosine = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
            return tf.where(step < self.warmup_steps, warm, cosine)

        def get_config(self) -> dict:
            return {"peak": self.peak, "total_steps": self.total_steps,
                    "warmup_steps": self.warmup_steps}

    return WarmupCosine


def make_strategy(task: TaskConfig):
    """(strategy, coordinator or None) for the task's cluster."""
    import tensorflow as tf

    kind = task.strategy_kind
    if kind == PARAMETER_SERVER:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        resolver.rpc_layer = "grpc"
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        return strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)
    if kind == MULTI_WORKER_MIRRORED:
        return tf.distribute.MultiWorkerMirroredStrategy(), None
    return tf.distribute.get_strategy(), None


def run(args: argparse.Namespace, task: TaskConfig) -> int:
    """Train (or resume, or notice the run is finished) as ``task``; return the exit code.

    Raises:
        trainer.data.DataError, trainer.flags.FlagError: bad data or batch size, raised
            before any training.
        PeerLost: a ps (or, with ps 0, a worker) was lost mid-run.
    """
    started = time.time()
    is_chief = task.is_chief
    files = ClusterFiles(args.log_dir)
    # Data and batch size are checked before anything is written to --log_dir: a run that
    # cannot start leaves no trace (the servers count their wait from their own start).
    dataset = data_mod.load(args.data_dir)
    n_train = len(dataset.x_train)
    kind = task.strategy_kind
    # MultiWorkerMirroredStrategy: one replica per task (chief + workers), CPU or one GPU.
    replicas = (len(task.cluster_spec.get("chief", [])) + len(task.cluster_spec.get("worker", []))
                if kind == MULTI_WORKER_MIRRORED else 1)
    check_batch_size(args.batch_size, replicas, n_train, args.data_dir)
    try:
        files.dir.mkdir(parents=True, exist_ok=True)  # also makes --log_dir itself
        if is_chief:
            start_heartbeat(files)  # before connecting, so waiting servers see a live chief
    except OSError as err:
        raise FlagError(f"--log_dir {args.log_dir} is invalid: cannot create "
                        f"{err.filename or files.dir}: {err.strerror or err}") from None

    import keras
    import tensorflow as tf

    from trainer.model import build_model
    from trainer.packed import PackedWeights

    keras.utils.set_random_seed(args.seed)
    # Started before connecting to the cluster: a ps or worker that never comes up is a
    # lost peer too.
    watchdog = Watchdog(args.peer_timeout)
    strategy, coordinator = make_strategy(task)
    replicas = strategy.num_replicas_in_sync if kind == MULTI_WORKER_MIRRORED else 1
    check_batch_size(args.batch_size, replicas, n_train, args.data_dir)  # GPUs may add replicas
    global_batch = args.batch_size * replicas
    steps_per_epoch = n_train // global_batch
    # From here on args.learning_rate is the rate for the global batch (--lr_scaling).
    given_rate = args.learning_rate
    args = argparse.Namespace(**{**vars(args), "learning_rate": scaled_learning_rate(
        given_rate, args.lr_scaling, replicas)})
    # The model is built outside the strategy's scope: its variables are this process's
    # template and evaluation copy; training reads and updates the packed vector ``weights``,
    # one variable on the ps (trainer/packed.py).
    model = build_model(args.model, args.dropout)
    packing = PackedWeights(model)
    with strategy.scope():
        weights = keras.Variable(packing.initial_value(), name="weights")
        optimizer = make_optimizer(args, args.epochs * steps_per_epoch)
        optimizer.build([weights])
        # (completed epochs, completed batches of the current epoch): where to resume.
        position = tf.Variable([0, 0], dtype=tf.int64, trainable=False, name="position")
        # Wall time of earlier (interrupted) processes of this run, so Total Time spans restarts.
        elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed_s")
        # The global step: steps of completed tf.function calls / scheduled functions. Not
        # optimizer.iterations: with ParameterServerStrategy its read-add-write from
        # concurrent workers loses increments, while one assign_add on the ps is atomic.
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    checkpoint = tf.train.Checkpoint(weights=weights, optimizer=optimizer, position=position,
                                     elapsed_s=elapsed, global_step=global_step)
    ckpt_dir = Path(args.log_dir) / CHECKPOINT_SUBDIR
    if is_chief:
        save_dir = ckpt_dir
    else:  # MultiWorkerMirroredStrategy: every task saves, only the chief's copy is kept
        save_dir = ckpt_dir / f".{task.task_type}-{task.task_index}"
    manager = tf.train.CheckpointManager(checkpoint, str(save_dir), max_to_keep=3)
    latest = tf.train.latest_checkpoint(str(ckpt_dir))
    if latest:
        # Not before the strategy: Keras variables made first would stop
        # MultiWorkerMirroredStrategy configuring its collectives at startup.
        check_checkpoint_matches(latest, args, weights, optimizer)
        checkpoint.restore(latest).expect_partial()
        if args.lr_schedule == "constant":
            # A constant rate is an optimizer variable, so the checkpoint brought back the
            # earlier run's: this run's --learning_rate (and --lr_scaling) applies, as it
            # does with a schedule, which is not saved.
            optimizer.learning_rate = args.learning_rate
    if is_chief:
        known = f", {dataset.known_as} by sha256" if dataset.known_as else ""
        notes = [] if args.lr_schedule == "constant" else [args.lr_schedule]
        rate = f"{args.learning_rate:g}"
        if args.learning_rate != given_rate:
            rate = f"{args.learning_rate:.3g}"
            factor = f"sqrt({replicas})" if args.lr_scaling == "sqrt" else f"{replicas}"
            notes.append(f"{given_rate:g} x {factor} for {replicas} synchronous replicas")
        _say(f"Training {args.model} on {n_train} examples from {args.data_dir} "
             f"({dataset.fmt}{known}); strategy {kind}; {args.epochs} epochs of "
             f"{steps_per_epoch} batches of {global_batch}; {args.optimizer} lr {rate}"
             + (f" ({'; '.join(notes)})" if notes else ""))

    done_epochs, done_batches = (int(v) for v in position.numpy())
    earlier_s = float(elapsed.numpy())
    if done_epochs >= args.epochs:
        if is_chief:
            packing.copy_to_model(weights)
            # Kept until os._exit: the packed weights and the optimizer live on the ps.
            _KEEP_UNTIL_EXIT.append(dict(locals()))
            _finish_already_done(args, files, latest, done_epochs, dataset, model)
        return 0
    if is_chief:
        try:
            files.done.unlink()  # a marker left by an earlier, shorter run
        except FileNotFoundError:
            pass
        if latest:
            where = (f"continuing from epoch {done_epochs + 1}" if done_batches == 0 else
                     f"continuing epoch {done_epochs + 1} at batch {done_batches + 1}")
            _say(f"Restored checkpoint {latest}: {done_epochs} of {args.epochs} epochs done; "
                 f"{where}")

    if kind == PARAMETER_SERVER:
        dataset_fn = data_mod.make_dataset_fn(dataset, args.batch_size, seed=None,
                                              augment_shift=args.augment_shift)
        tf.random.set_seed(None)  # every worker shuffles with its own seed (see make_dataset_fn)
    else:
        dataset_fn = data_mod.make_dataset_fn(dataset, args.batch_size, seed=args.seed,
                                              augment_shift=args.augment_shift)

    def step_fn(images, labels):
        with tf.GradientTape() as tape:
            logits = packing.logits(weights, images, training=True)
            per_example = keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, [weights])
        optimizer.apply_gradients(zip(grads, [weights]))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32),
                                                 labels), tf.float32))
        return loss, correct

    @tf.function
    def train_steps(iterator, num_steps):
        """num_steps steps; returns (mean loss per step, correct predictions)."""
        if args.lr_schedule != "constant":  # see make_optimizer
            optimizer.iterations.assign(global_step)
        total_loss = tf.constant(0.0)
        total_correct = tf.constant(0.0)
        for _ in tf.range(num_steps):
            images, labels = next(iterator)
            loss, correct = strategy.run(step_fn, args=(images, labels))
            total_loss += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            total_correct += strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None)
        global_step.assign_add(tf.cast(num_steps, tf.int64))
        return total_loss / tf.cast(num_steps, tf.float32), total_correct

    if coordinator is not None:
        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    else:
        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    stop = {"sigterm": False}

    def on_sigterm(signum, frame):  # Kubernetes deletes pods with SIGTERM, then SIGKILL
        stop["sigterm"] = True

    signal.signal(signal.SIGTERM, on_sigterm)
    watchdog.kick()
    writer = tf.summary.create_file_writer(
        str(Path(args.log_dir) / TENSORBOARD_SUBDIR)) if is_chief else None

    def run_chunk(num_steps: int):
        """Run num_steps steps; returns something whose value() gives (loss, correct)."""
        k = tf.constant(num_steps, tf.int32)
        if coordinator is not None:
            remote = coordinator.schedule(train_steps, args=(iterator, k))
            return lambda: tuple(float(v) for v in remote.fetch())
        loss, correct = train_steps(iterator, k)
        return lambda: (float(loss), float(correct))

    def join():
        if coordinator is not None:
            coordinator.join()

    def save(epochs_done: int, batches_done: int) -> str:
        position.assign([epochs_done, batches_done])
        elapsed.assign(earlier_s + time.time() - started)
        path = manager.save()
        if not is_chief:
            shutil.rmtree(save_dir, ignore_errors=True)
        return path

    train_time = 0.0
    examples = 0
    last_cost = float("nan")
    test_accuracy = None
    try:
        for epoch in range(done_epochs, args.epochs):
            batch = done_batches if epoch == done_epochs else 0
            epoch_start = time.perf_counter()
            interval_start, interval_batches = epoch_start, 0
            pending = []
            while batch < steps_per_epoch:
                k = min(args.steps_per_execution, steps_per_epoch - batch,
                        args.log_interval - batch % args.log_interval)
                value = run_chunk(k)
                pending.append((k, value))
                batch += k
                interval_batches += k
                if batch % args.log_interval == 0 or batch == steps_per_epoch:
                    loss, _ = value()  # waits for this chunk only
                    watchdog.kick()
                    if is_chief and batch % args.log_interval == 0:
                        now = time.perf_counter()
                        avg_ms = 1000 * (now - interval_start) / max(interval_batches, 1)
                        step = int(global_step.numpy())
                        _say(progress.step_line(step, epoch + 1, batch, steps_per_epoch,
                                                loss, avg_ms))
                        with writer.as_default(step=step):
                            _scalar(progress.TAG_BATCH_COST, loss)
                        interval_start, interval_batches = now, 0
                if stop["sigterm"]:
                    join()
                    path = save(epoch, batch)
                    if is_chief:
                        _say(f"SIGTERM: saved checkpoint {path} at epoch {epoch + 1}, batch "
                             f"{batch}; exiting")
                    return EXIT_SIGTERM
            join()
            epoch_time = time.perf_counter() - epoch_start
            train_time += epoch_time
            results = [(k, value()) for k, value in pending]
            epoch_steps = sum(k for k, _ in results)
            examples += epoch_steps * global_batch
            last_cost = sum(k * r[0] for k, r in results) / epoch_steps
            train_accuracy = sum(r[1] for _, r in results) / (epoch_steps * global_batch)
            path = save(epoch + 1, 0)
            watchdog.kick()
            if is_chief:
                packing.copy_to_model(weights)
                test_accuracy, test_cost = evaluate_with_cost(model, dataset)
                # Per-epoch series at step = epoch (1-based): a restarted chief resumes at an
                # epoch boundary, so no two processes write the same epoch.
                epoch_values = {
                    "train_cost": last_cost, "train_accuracy": train_accuracy,
                    "test_cost": test_cost, "test_accuracy": test_accuracy,
                    "learning_rate": learning_rate_at(optimizer, args,
                                                      int(global_step.numpy())),
                    "examples_per_s": epoch_steps * global_batch / epoch_time}
                with writer.as_default(step=epoch + 1):
                    for key, value in epoch_values.items():
                        _scalar(progress.EPOCH_TAGS[key], value)
                writer.flush()
                _say(progress.epoch_line(epoch + 1, args.epochs, epoch_values, epoch_time,
                                         path))
    except tf.errors.OpError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        what = "a parameter server" if kind == PARAMETER_SERVER else "a peer"
        raise PeerLost(f"lost {what} ({type(err).__name__}: {first}); exiting so the task "
                       "is restarted and resumes from the last checkpoint") from None

    if not is_chief:
        # A MultiWorkerMirroredStrategy worker: freeing its model, datasets and functions
        # on return waits on the chief's collective and coordination services, which end
        # with the chief (seen: the worker exited 14 s after the chief, with "Failed to send
        # RPC to coordination service" errors). Kept until os._exit, like the chief's.
        _KEEP_UNTIL_EXIT.append(dict(locals()))
        gc.disable()
        return 0
    if test_accuracy is None:  # the last epoch's evaluation is the final one
        packing.copy_to_model(weights)
        test_accuracy = evaluate(model, dataset)
    total_time = earlier_s + time.time() - started
    result = progress.Result(
        test_accuracy=test_accuracy, final_cost=last_cost, total_time_s=total_time,
        train_time_s=train_time, epochs=args.epochs, resumed_from_epoch=done_epochs,
        examples_per_s=examples / train_time if train_time else 0.0,
        train_examples=n_train, batch_size=args.batch_size, strategy=kind, model=args.model,
        global_step=int(global_step.numpy()))
    progress.write_result(args.log_dir, result)
    for line in progress.final_lines(test_accuracy, total_time, last_cost):
        _say(line)
    _KEEP_UNTIL_EXIT.append(dict(locals()))
    release_remote_work()
    files.mark_done()
    return 0


def variable_shapes(variables) -> list[tuple[int, ...]]:
    """The shapes of ``variables``, each variable once, sorted: what a checkpoint of them
    holds."""
    unique = {id(v): v for v in variables}
    return sorted(tuple(int(d) for d in v.shape) for v in unique.values())


def optimizer_shapes(weights, optimizer) -> list[tuple[int, ...]]:
    """What a checkpoint holds under ``optimizer``: its variables (a constant rate is one, a
    schedule is not; sgd keeps no moments) and the packed weights it updates."""
    return variable_shapes([*optimizer.variables, weights])


def checkpoint_shapes(path: str, child: str = "weights") -> list[tuple[int, ...]]:
    """The shapes of the variables under ``child`` (``weights`` or ``optimizer``) of
    checkpoint ``path`` (a ``tf.train.Checkpoint`` as ``run`` writes it), sorted.

    Read from the checkpoint's object graph, so whatever key the variables were saved
    under (Keras saves the weights through the optimizer) they are found from ``child``.
    """
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(path)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    shape_of = reader.get_variable_to_shape_map()
    todo = [c.node_id for c in graph.nodes[0].children if c.local_name == child]
    seen, shapes = set(), []
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        shapes += [tuple(shape_of[a.checkpoint_key]) for a in graph.nodes[node].attributes
                   if a.name == "VARIABLE_VALUE" and a.checkpoint_key in shape_of]
        todo += [c.node_id for c in graph.nodes[node].children]
    return sorted(shapes)


def check_checkpoint_matches(path: str, args: argparse.Namespace, weights, optimizer) -> None:
    """Raise FlagError when checkpoint ``path`` was written by another model than the one
    whose packed ``weights`` (trainer/packed.py) this run trains (``--model``), or by another
    optimizer layout than ``optimizer`` (``--optimizer``, ``--lr_schedule``), naming what
    wrote it.

    Restoring it would fail deep in TensorFlow ("Received incompatible tensor with
    shape ..."), on every restart alike. The models' parameter counts all differ, so the
    packed vector's length names the model. --dropout, --learning_rate, --lr_scaling and
    --batch_size do not change the variables, so a run may continue with others (the
    resumed run uses its own rate).
    """
    import keras

    from trainer.flags import LR_SCHEDULES, MODELS, OPTIMIZERS
    from trainer.model import build_model
    from trainer.packed import PackedWeights

    fix = "use a new --log_dir or the same"
    saved = checkpoint_shapes(path, "weights")
    if not saved and checkpoint_shapes(path, "model"):
        raise FlagError(f"--log_dir {args.log_dir} holds checkpoints of an earlier trainer, "
                        f"which kept the model's variables unpacked ({path}): use a new "
                        "--log_dir")
    if saved != variable_shapes([weights]):
        writers = [name for name in MODELS if name != args.model
                   and saved == [(PackedWeights(build_model(name, args.dropout)).size,)]]
        what = (f"model {writers[0]}" if writers else
                f"a model whose weights match none of {', '.join(MODELS)}")
        raise FlagError(f"--log_dir {args.log_dir} holds checkpoints of {what} ({path}); "
                        f"this run's --model is {args.model}: {fix} --model")
    saved = checkpoint_shapes(path, "optimizer")
    if saved == optimizer_shapes(weights, optimizer):
        return

    def fresh(name: str, schedule: str) -> list[tuple[int, ...]]:
        other = keras.Variable(np.zeros(weights.shape, np.float32))
        opt = make_optimizer(argparse.Namespace(**{**vars(args), "optimizer": name,
                                                   "lr_schedule": schedule}), 100)
        opt.build([other])
        return optimizer_shapes(other, opt)

    writers = [(o, s) for o in OPTIMIZERS for s in LR_SCHEDULES
               if (o, s) != (args.optimizer, args.lr_schedule) and fresh(o, s) == saved]
    what = (f"a run with --optimizer {writers[0][0]} --lr_schedule {writers[0][1]}"
            if writers else "an optimizer other than this trainer's")
    raise FlagError(f"--log_dir {args.log_dir} holds checkpoints of {what} ({path}); this "
                    f"run's are --optimizer {args.optimizer} --lr_schedule {args.lr_schedule}: "
                    f"{fix} --optimizer and --lr_schedule")


def release_remote_work() -> None:
    """Finish every RPC the chief still owes the other tasks before they are told to go.

    Garbage (old tf.functions, such as the save function that each checkpoint under
    ParameterServerStrategy traces anew) is collected now and its remote removal waited
    for; collection is then switched off, so nothing more is freed, and so removed
    remotely, before ``os._exit`` (see _KEEP_UNTIL_EXIT).
    """
    from tensorflow.python.eager import context

    gc.collect()
    context.async_wait()
    gc.disable()


def _scalar(name: str, value: float) -> None:
    """Write a TensorBoard scalar with core TensorFlow only.

    tf.summary.scalar needs the tensorboard package, which tensorflow 2.21 no longer
    installs; this writes the same event (a float32 tensor tagged for the "scalars" plugin),
    so the trainer image does not need TensorBoard.
    """
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        summary_description=progress.TAG_DESCRIPTIONS.get(name, ""),
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata)


_predict_fns: dict[int, object] = {}


def learning_rate_at(optimizer, args: argparse.Namespace, step: int) -> float:
    """The learning rate the optimizer uses at global step ``step``."""
    if args.lr_schedule == "constant":
        return float(args.learning_rate)
    # Keras keeps the schedule there; optimizer.learning_rate would read optimizer.iterations,
    # which the training function sets to the global step only at the start of each call.
    return float(optimizer._learning_rate(step))


def evaluate(model, dataset: data_mod.Dataset) -> float:
    """Test accuracy (fraction correct) of ``model`` on the whole test set, run locally."""
    return evaluate_with_cost(model, dataset)[0]


def evaluate_with_cost(model, dataset: data_mod.Dataset) -> tuple[float, float]:
    """(test accuracy as a fraction correct, test cost as mean cross-entropy in nats) of
    ``model`` on the whole test set, run locally (one traced function per model: eager calls
    cost the chief about twice the time)."""
    import keras
    import tensorflow as tf

    def predict_fn(x, y):
        logits = model(x, training=False)
        costs = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return tf.argmax(logits, 1, output_type=tf.int32), tf.reduce_sum(costs)

    predict = _predict_fns.get(id(model))
    if predict is None:
        predict = _predict_fns[id(model)] = tf.function(
            predict_fn,
            input_signature=[tf.TensorSpec((None, *model.input_shape[1:]), tf.float32),
                             tf.TensorSpec((None,), tf.int32)],
            reduce_retracing=True)
    correct, cost = 0, 0.0
    for start in range(0, len(dataset.x_test), EVAL_BATCH):
        x = dataset.x_test[start:start + EVAL_BATCH].astype(np.float32)[..., None] / 255.0
        y = dataset.y_test[start:start + EVAL_BATCH]
        predicted, cost_sum = predict(x, y.astype(np.int32))
        correct += int(np.sum(predicted.numpy() == y))
        cost += float(cost_sum)
    return correct / len(dataset.x_test), cost / len(dataset.x_test)


def _finish_already_done(args, files: ClusterFiles, latest: str, done_epochs: int,
                         dataset: data_mod.Dataset, model) -> None:
    _say(f"Run already finished: checkpoint {latest} has {done_epochs} of {args.epochs} "
         "epochs; not training again")
    previous = progress.read_result(args.log_dir)
    if previous:
        accuracy, total, cost = (previous["test_accuracy"], previous["total_time_s"],
                                 previous["final_cost"])
    else:
        accuracy, total, cost = evaluate(model, dataset), 0.0, float("nan")
    for line in progress.final_lines(accuracy, total, cost):
        _say(line)
    _KEEP_UNTIL_EXIT.append(model)
    release_remote_work()
    files.mark_done()
