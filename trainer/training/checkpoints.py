"""The run's state and its checkpoints: the variables a checkpoint holds, where each task
saves, restoring the newest one that can be read (an older one when the newest is damaged:
trainer/training/checkpoint_files.py tells damage from a volume that failed a read), and
refusing a checkpoint that another model or optimizer layout wrote."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from trainer.contract.cluster_spec import TaskConfig
from trainer.flags import LR_SCHEDULES, MODELS, OPTIMIZERS, FlagError
from trainer.model import build_model
from trainer.packed import PackedWeights
from trainer.training.checkpoint_files import CheckpointIOError, first_line, verdict
from trainer.training.schedule import make_optimizer
from trainer.volume import is_no_space, volume_full

CHECKPOINT_SUBDIR = "checkpoints"
#: Checkpoints kept in <log_dir>/checkpoints: the newest ones.
MAX_TO_KEEP = 3
#: A checkpoint's files as tf.train.CheckpointManager names them: ckpt-<N>.index and
#: ckpt-<N>.data-<shard>-of-<shards>.
CHECKPOINT_FILE = re.compile(r"(ckpt-(\d+))\.(?:index|data-\d+-of-\d+)")


class CheckpointsUnreadable(FlagError):
    """Every checkpoint in ``<log_dir>/checkpoints`` is damaged or unfinished (their bytes, as
    checkpoint_files.verdict judges them): no restart can read them, so the task ends with the
    bad-flags code (a --log_dir that cannot be resumed)."""


def checkpoint_candidates(directory: Path) -> list[str]:
    """The checkpoints in ``directory`` with at least one file there, newest (highest N) first,
    as paths without suffix (``<directory>/ckpt-<N>``); an index or data file without the
    other is a candidate too, found damaged when read. [] when there is no directory."""
    found: dict[int, str] = {}
    for path in directory.glob("ckpt-*") if directory.is_dir() else ():
        match = CHECKPOINT_FILE.fullmatch(path.name)
        if match:
            found[int(match[2])] = str(directory / match[1])
    return [found[n] for n in sorted(found, reverse=True)]


class TrainState:
    """The variables of one run, made under ``strategy``'s scope (with ParameterServerStrategy
    they live on the ps), and the checkpoints in ``<log_dir>/checkpoints`` that hold them.

    Attributes:
        weights: the model's trainable weights packed in one vector (trainer/packed.py),
            ``initial_weights`` to start with.
        optimizer: ``make_optimizer(args, total_steps, learning_rate)``, built over ``weights``.
        learning_rate: the global batch's rate (``--learning_rate`` scaled for synchronous
            replicas, flags.scaled_learning_rate; for one process, ``--learning_rate``).
        position: (completed epochs, completed batches of the current epoch): where to
            resume.
        elapsed: wall time (s) of earlier, interrupted processes of this run, so Total Time
            spans restarts.
        global_step: steps of completed tf.function calls / scheduled functions.
        latest: the checkpoint ``restore_latest`` restored, else None.
    """

    def __init__(
        self,
        strategy,
        initial_weights,
        args: argparse.Namespace,
        total_steps: int,
        task: TaskConfig,
        started: float,
        *,
        learning_rate: float,
    ) -> None:
        self.learning_rate = learning_rate
        with strategy.scope():
            self.weights = keras.Variable(initial_weights, name="weights")
            self.optimizer = make_optimizer(args, total_steps, learning_rate)
            self.optimizer.build([self.weights])
            self.position = tf.Variable([0, 0], dtype=tf.int64, trainable=False, name="position")
            self.elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed_s")
            # Not optimizer.iterations: with ParameterServerStrategy its read-add-write from
            # concurrent workers loses increments, while one assign_add on the ps is atomic.
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        self.checkpoint = tf.train.Checkpoint(
            weights=self.weights,
            optimizer=self.optimizer,
            position=self.position,
            elapsed_s=self.elapsed,
            global_step=self.global_step,
        )
        self.dir = Path(args.log_dir) / CHECKPOINT_SUBDIR
        self.log_dir = args.log_dir
        self.is_chief = task.is_chief
        #: "chief-0", "worker-1", ...: how this task is named in logs and profiles.
        self.task_name = f"{task.task_type}-{task.task_index}"
        if self.is_chief:
            self.save_dir = self.dir
        else:  # MultiWorkerMirroredStrategy: every task saves, only the chief's copy is kept
            self.save_dir = self.dir / f".{task.task_type}-{task.task_index}"
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(self.save_dir), max_to_keep=MAX_TO_KEEP
        )
        self.started = started
        self.earlier_s = 0.0
        self.latest: str | None = None

    def restore_latest(
        self, args: argparse.Namespace, pause: Callable[[float], None] = time.sleep
    ) -> str | None:
        """Restore the run's newest checkpoint that can be read, once
        ``check_checkpoint_matches`` has found it written by this model and optimizer layout;
        return its path, or None when there is none (a new run).

        A damaged or unfinished checkpoint (checkpoint_files.verdict: its bytes are bad, or it
        has no index) is skipped with a warning on stderr naming it and why, and the next
        older one tried: the run repeats the epochs since, instead of failing on every
        restart. A read that the volume fails is retried (``pause`` between tries, each
        warned about), never taken for damage.

        Raises:
            FlagError: the checkpoint was written by another model or optimizer layout.
            CheckpointsUnreadable: there are checkpoints and every one is damaged.
            CheckpointIOError: the volume did not deliver a checkpoint's files through every
                try (a restart may cure it).
        """
        skipped: list[str] = []
        for path in checkpoint_candidates(self.dir):
            reason = verdict(path, pause=pause, warn=self._warn)
            if reason is None:
                # Not before the strategy: Keras variables made first would stop
                # MultiWorkerMirroredStrategy configuring its collectives at startup.
                check_checkpoint_matches(path, args, self.weights, self.optimizer)
                reason = self._restore(path, pause)
            if reason is not None:
                skipped.append(f"{path}: {reason}")
                self._warn(f"checkpoint {path} cannot be read ({reason}); skipped: trying the next older one")
                continue
            self.latest = path
            if args.lr_schedule == "constant":
                # A constant rate is an optimizer variable, so the checkpoint brought back the
                # earlier run's: this run's --learning_rate (and --lr_scaling) applies, as it
                # does with a schedule, which is not saved.
                self.optimizer.learning_rate = self.learning_rate
            return path
        if skipped:
            raise CheckpointsUnreadable(
                f"--log_dir {args.log_dir}: none of the {len(skipped)} checkpoints in "
                f"{self.dir} can be read ({'; '.join(skipped)}): move {self.dir} away to "
                "train this run again from epoch 1, or use a new --log_dir"
            )
        return None

    def _restore(self, path: str, pause: Callable[[float], None]) -> str | None:
        """Restore checkpoint ``path``, whose files read whole a moment ago; None once
        restored, else why it is damaged (its files judged again after a failed restore).

        Raises:
            CheckpointIOError: its files fail to read through every try, or they read whole
                and the restore failed again (under ParameterServerStrategy, e.g. a ps lost).
        """
        for attempt in range(2):
            try:
                self.checkpoint.restore(path).expect_partial()
                return None
            except (tf.errors.OpError, IndexError) as err:
                failed = first_line(err)
            if attempt == 0:
                reason = verdict(path, pause=pause, warn=self._warn)
                if reason is not None:
                    return reason
        raise CheckpointIOError(
            f"checkpoint {path} reads whole but restoring it failed twice ({failed}); exiting so "
            "the task is restarted and restores it again"
        )

    def _warn(self, text: str) -> None:
        print(f"warning: {self.task_name}: {text}", file=sys.stderr, flush=True)

    def resume_point(self) -> tuple[int, int]:
        """(completed epochs, completed batches of the next epoch), and from now on the
        earlier processes' wall time counts in ``elapsed_s``."""
        done_epochs, done_batches = (int(v) for v in self.position.numpy())
        self.earlier_s = float(self.elapsed.numpy())
        return done_epochs, done_batches

    def elapsed_s(self) -> float:
        """Wall-clock seconds of this run so far, the earlier processes' included."""
        return self.earlier_s + time.time() - self.started

    def save(self, epochs_done: int, batches_done: int) -> str:
        """Save a checkpoint at (``epochs_done``, ``batches_done``); return its path.

        Raises:
            trainer.volume.VolumeFull: no space left on --log_dir's volume.
        """
        self.position.assign([epochs_done, batches_done])
        self.elapsed.assign(self.elapsed_s())
        try:
            path = self.manager.save()
        except (OSError, tf.errors.OpError) as err:
            if is_no_space(err):
                raise volume_full(err, self.log_dir, f"saving a checkpoint in {self.save_dir}") from None
            raise
        if not self.is_chief:
            shutil.rmtree(self.save_dir, ignore_errors=True)
        return path


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
    checkpoint ``path`` (a ``tf.train.Checkpoint`` as TrainState writes it), sorted.

    Read from the checkpoint's object graph, so whatever key the variables were saved
    under (Keras saves the weights through the optimizer) they are found from ``child``.
    """
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
        shapes += [
            tuple(shape_of[a.checkpoint_key])
            for a in graph.nodes[node].attributes
            if a.name == "VARIABLE_VALUE" and a.checkpoint_key in shape_of
        ]
        todo += [c.node_id for c in graph.nodes[node].children]
    return sorted(shapes)


def check_checkpoint_matches(path: str, args: argparse.Namespace, weights, optimizer) -> None:
    """Raise FlagError when checkpoint ``path`` was written by another model than the one
    whose packed ``weights`` (trainer/packed.py) this run trains (``--model``), or by another
    optimizer layout than ``optimizer`` (``--optimizer``, ``--lr_schedule``), naming what
    wrote it.

    Restoring it would fail deep in TensorFlow ("Received incompatible tensor with
    shape ..."), on every restart alike. The models' parameter counts all differ, so the
    packed vector's length names the model. --dropout, --label_smoothing, --learning_rate,
    --lr_scaling and --batch_size do not change the variables, so a run may continue with
    others (the resumed run uses its own rate).
    """
    fix = "use a new --log_dir or the same"
    saved = checkpoint_shapes(path, "weights")
    if not saved and checkpoint_shapes(path, "model"):
        raise FlagError(
            f"--log_dir {args.log_dir} holds checkpoints of an earlier trainer, "
            f"which kept the model's variables unpacked ({path}): use a new "
            "--log_dir"
        )
    if saved != variable_shapes([weights]):
        writers = [
            name
            for name in MODELS
            if name != args.model and saved == [(PackedWeights(build_model(name, args.dropout)).size,)]
        ]
        what = (
            f"model {writers[0]}" if writers else f"a model whose weights match none of {', '.join(MODELS)}"
        )
        raise FlagError(
            f"--log_dir {args.log_dir} holds checkpoints of {what} ({path}); "
            f"this run's --model is {args.model}: {fix} --model"
        )
    saved = checkpoint_shapes(path, "optimizer")
    if saved == optimizer_shapes(weights, optimizer):
        return

    def fresh(name: str, schedule: str) -> list[tuple[int, ...]]:
        other = keras.Variable(np.zeros(weights.shape, np.float32))
        # Only the slots' shapes matter here, not the rate.
        opt = make_optimizer(
            argparse.Namespace(**{**vars(args), "optimizer": name, "lr_schedule": schedule}),
            100,
            args.learning_rate,
        )
        opt.build([other])
        return optimizer_shapes(other, opt)

    writers = [
        (o, s)
        for o in OPTIMIZERS
        for s in LR_SCHEDULES
        if (o, s) != (args.optimizer, args.lr_schedule) and fresh(o, s) == saved
    ]
    what = (
        f"a run with --optimizer {writers[0][0]} --lr_schedule {writers[0][1]}"
        if writers
        else "an optimizer other than this trainer's"
    )
    raise FlagError(
        f"--log_dir {args.log_dir} holds checkpoints of {what} ({path}); this "
        f"run's are --optimizer {args.optimizer} --lr_schedule {args.lr_schedule}: "
        f"{fix} --optimizer and --lr_schedule"
    )
