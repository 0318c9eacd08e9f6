"""Training steps on the cluster: a tf.function of ``--steps_per_execution`` steps over the
distributed dataset, scheduled on a worker with ParameterServerStrategy or run in this
process (the chief, or with ps 0 every task, synchronously).

Two ways to exchange the weights, by ``--local_steps``:

- 1: every step reads the packed weights (from the ps, or this task's mirrored copy) and
  gives its gradient to the optimizer, which updates them where they live: on the ps for
  each worker's batch alone (asynchronous), or with ps 0 after an all-reduce of every
  replica's gradient (synchronous).
- k > 1: every task takes k steps of the optimizer's rule (trainer.training.local_update) on
  its own copy of the weights and the optimizer's moments, then gives its k steps back at
  once: with a ps, it adds its change of the weights to the ps' and writes its moments
  there (Downpour SGD's accumulated pushes, Dean et al. 2012, "Large Scale Distributed Deep
  Networks"); with ps 0, the replicas' weights and moments are averaged by one all-reduce
  (local SGD, Stich 2019, "Local SGD Converges Fast and Communicates Little"). One exchange
  per k steps instead of one per step: on 2 CPU cores the per-step gRPC and executor cost of
  each exchange is what held the distributed run below one process's throughput.
  A round never spans two calls, so a chunk shorter than k (at a Step line) exchanges at
  its end. With a ps, while the learning rate warms up (the first WARMUP_FRACTION of the
  run's steps) the steps take the first way, exchanging every step: "post-local SGD" (Lin et
  al. 2020, "Don't Use Large Mini-Batches, Use Local SGD"), as asynchronous rounds of k steps
  from the random start diverged (2 workers + 1 ps, k = 50: one run of three stuck at
  chance). Both ways keep the optimizer's moments in the same scale (each step's gradient is
  of its mean loss over the global batch), so the second way carries on from the first's.
  With ps 0 the replicas start from the same weights and are averaged after every round, so
  the rounds begin at step 0: that kept the recipe's accuracy on full MNIST, at about one
  process' examples/s where an every-step warm-up held ps 0 below it (its all-reduce per
  step, and a second function to trace in every task at the switch; docs/benchmarks.md).
  One process has nothing to exchange: it always takes the first way.

Both functions are traced without AutoGraph (``autograph=False``): their loops are
``tf.while_loop`` calls and nothing else in them is Python control flow on tensors.
AutoGraph's rewriting of their source was most of their tracing (docs/benchmarks.md), which
with a ps is the chief's time before the workers get their first steps, and with ps 0 every
task's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import tensorflow as tf

from trainer import data as data_mod
from trainer.contract.cluster_spec import MULTI_WORKER_MIRRORED, PARAMETER_SERVER, SINGLE_PROCESS
from trainer.packed import PackedWeights
from trainer.training import local_update
from trainer.training import loss as loss_mod
from trainer.training.checkpoints import TrainState
from trainer.training.distribution import Distribution
from trainer.training.schedule import WARMUP_FRACTION


class StepRunner:
    """Runs steps that update ``state``'s packed weights on batches of ``dataset`` under
    ``dist``: ``run(k, at_step)`` starts k steps, ``join()`` waits for every step started.
    ``total_steps``: the run's steps (epochs x steps per epoch), whose first WARMUP_FRACTION
    exchange every step (through ``every_step``, also with ``--local_steps`` > 1) with a ps.

    The dataset function, the per-worker dataset and the traced functions are attributes, so
    that keeping the runner keeps them (trainer.training.finish).
    """

    def __init__(
        self,
        args: argparse.Namespace,
        dist: Distribution,
        state: TrainState,
        packing: PackedWeights,
        dataset: data_mod.Dataset,
        total_steps: int,
    ) -> None:
        self.args, self.dist, self.state, self.packing = args, dist, state, packing
        self.dataset = dataset
        self.global_batch = dist.global_batch(args.batch_size)
        #: Whether ``run`` returns before its steps have run (scheduled on the workers by a
        #: coordinator); else they have run when it returns.
        self.asynchronous = dist.coordinator is not None
        self.dataset_fn = self._dataset_fn()
        #: Whether steps run in rounds on local copies (--local_steps > 1, with peers).
        self.local = args.local_steps > 1 and dist.kind != SINGLE_PROCESS
        #: The first step of rounds of --local_steps; before it every step exchanges.
        self.local_from = 0 if dist.kind == MULTI_WORKER_MIRRORED else round(WARMUP_FRACTION * total_steps)
        #: The tf.function of the first way (see the module's docstring); with ``local``,
        #: ``local_steps`` is that of the second, taken from step ``local_from`` on.
        self.every_step = self._train_steps_fn()
        self.local_steps = self._local_train_steps_fn() if self.local else None
        self.iterator = self._iterator()

    def _dataset_fn(self):
        args = self.args
        if self.dist.kind == PARAMETER_SERVER:
            dataset_fn = data_mod.make_dataset_fn(
                self.dataset, args.batch_size, seed=None, augment_shift=args.augment_shift
            )
            # Every worker shuffles with its own seed (see make_dataset_fn).
            tf.random.set_seed(None)
            return dataset_fn
        return data_mod.make_dataset_fn(
            self.dataset, args.batch_size, seed=args.seed, augment_shift=args.augment_shift
        )

    def _train_steps_fn(self):
        """The tf.function ``train_steps(iterator, num_steps)``: num_steps steps; returns
        (mean cost per step, correct predictions)."""
        strategy, packing, global_batch = self.dist.strategy, self.packing, self.global_batch
        weights, optimizer = self.state.weights, self.state.optimizer
        global_step = self.state.global_step
        scheduled = self.args.lr_schedule != "constant"
        smoothing = self.args.label_smoothing
        total = tf.distribute.ReduceOp.SUM

        def step_fn(images, labels):
            with tf.GradientTape() as tape:
                logits = packing.logits(weights, images, training=True)
                objective, cost = loss_mod.example_losses(labels, logits, smoothing)
                loss = tf.nn.compute_average_loss(objective, global_batch_size=global_batch)
            grads = tape.gradient(loss, [weights])
            optimizer.apply_gradients(zip(grads, [weights]))
            correct = tf.reduce_sum(
                tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels), tf.float32)
            )
            return tf.nn.compute_average_loss(cost, global_batch_size=global_batch), correct

        @tf.function(autograph=False)  # see the module's docstring
        def train_steps(iterator, num_steps):
            if scheduled:  # see make_optimizer
                optimizer.iterations.assign(global_step)

            def one_step(done, total_loss, total_correct):
                images, labels = next(iterator)
                loss, correct = strategy.run(step_fn, args=(images, labels))
                return (
                    done + 1,
                    total_loss + strategy.reduce(total, loss, axis=None),
                    total_correct + strategy.reduce(total, correct, axis=None),
                )

            _, total_loss, total_correct = tf.while_loop(
                lambda done, *_: done < num_steps,
                one_step,
                (tf.constant(0), tf.constant(0.0), tf.constant(0.0)),
            )
            global_step.assign_add(tf.cast(num_steps, tf.int64))
            return total_loss / tf.cast(num_steps, tf.float32), total_correct

        return train_steps

    def _local_train_steps_fn(self):
        """The tf.function ``train_steps(iterator, num_steps)`` of ``--local_steps`` > 1:
        rounds of up to ``--local_steps`` steps on this task's copy of the weights and
        moments, each round given back at its end (see the module's docstring); returns
        (mean cost per step, correct predictions), as ``_train_steps_fn``'s does."""
        strategy, packing, optimizer = self.dist.strategy, self.packing, self.state.optimizer
        weights = self.state.weights
        slots = local_update.slot_variables(optimizer)
        decays = local_update.slot_decays(optimizer)
        averaged = self.dist.kind == MULTI_WORKER_MIRRORED
        mean = tf.distribute.ReduceOp.MEAN
        smoothing = self.args.label_smoothing

        def start_round():
            # In each replica: its copies of the weights and moments, and zero sums.
            return (
                tf.identity(weights.value),
                [tf.identity(v.value) for v in slots],
                tf.constant(0.0),
                tf.constant(0.0),
            )

        def local_step(w, s, loss_sum, correct_sum, images, labels, step):
            with tf.GradientTape() as tape:
                tape.watch(w)
                logits = packing.logits(w, images, training=True)
                objective, cost = loss_mod.example_losses(labels, logits, smoothing)
                loss = tf.reduce_mean(objective)
            gradient = tape.gradient(loss, w)
            rate = optimizer.rate_at(step)
            w, s = local_update.apply(optimizer, w, s, gradient, rate, step)
            correct = tf.reduce_sum(
                tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels), tf.float32)
            )
            return w, s, loss_sum + tf.reduce_mean(cost), correct_sum + correct

        def average(w, s):
            # Copies made here carry this replica's device, which the all-reduce's merge_call
            # path needs (the loop's tensors have none).
            return tf.distribute.get_replica_context().all_reduce(
                mean, [tf.identity(value) for value in [w, *s]]
            )

        def end_round(w, s, start, steps):
            if averaged:  # every replica's weights and moments become their mean
                values = strategy.run(average, args=(w, s))
                for variable, value in zip([weights, *slots], values):
                    variable.assign(value)
            else:  # this task's steps add to what the other workers gave meanwhile
                weights.assign_add(w - start[0])
                for variable, value, begun, (decay, squares) in zip(slots, s, start[1:], decays):
                    variable.assign(
                        local_update.merge_slot(
                            tf.identity(variable.value), value, begun, decay, squares, steps
                        )
                    )

        return self._rounds_fn(start_round, local_step, end_round)

    def _rounds_fn(self, start_round: Callable, local_step: Callable, end_round: Callable):
        """The tf.function ``train_steps(iterator, num_steps)`` of ``_local_train_steps_fn``:
        rounds of up to ``--local_steps`` steps, each begun by ``start_round`` in every replica,
        its steps taken by ``local_step`` there, and ended by ``end_round``."""
        strategy, global_step = self.dist.strategy, self.state.global_step
        mean, total = tf.distribute.ReduceOp.MEAN, tf.distribute.ReduceOp.SUM
        round_steps = self.args.local_steps

        @tf.function(autograph=False)  # see the module's docstring
        def train_steps(iterator, num_steps):
            first_step = global_step.read_value()

            def one_round(done, total_loss, total_correct):
                steps = tf.minimum(round_steps, num_steps - done)
                w, s, loss_sum, correct_sum = strategy.run(start_round)
                start = [w, *s]

                def one_step(i, w, s, loss_sum, correct_sum):
                    images, labels = next(iterator)
                    step = first_step + tf.cast(done + i, tf.int64)
                    return (
                        i + 1,
                        *strategy.run(local_step, args=(w, s, loss_sum, correct_sum, images, labels, step)),
                    )

                _, w, s, loss_sum, correct_sum = tf.while_loop(
                    lambda i, *_: i < steps, one_step, (tf.constant(0), w, s, loss_sum, correct_sum)
                )
                end_round(w, s, start, steps)
                return (
                    done + steps,
                    total_loss + strategy.reduce(mean, loss_sum, axis=None),
                    total_correct + strategy.reduce(total, correct_sum, axis=None),
                )

            _, total_loss, total_correct = tf.while_loop(
                lambda done, *_: done < num_steps,
                one_round,
                (tf.constant(0), tf.constant(0.0), tf.constant(0.0)),
            )
            global_step.assign_add(tf.cast(num_steps, tf.int64))
            return total_loss / tf.cast(num_steps, tf.float32), total_correct

        return train_steps

    def _iterator(self):
        strategy, dataset_fn = self.dist.strategy, self.dataset_fn
        if self.dist.coordinator is None:
            return iter(strategy.distribute_datasets_from_function(dataset_fn))

        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        self.per_worker_dataset_fn = per_worker_dataset_fn
        return iter(self.dist.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def run(self, num_steps: int, at_step: int) -> Callable[[], tuple[float, float]]:
        """Start ``num_steps`` steps, the first of them the run's step ``at_step`` (0-based,
        in global batches); return a function that gives their (mean cost, correct
        predictions), waiting for them."""
        function = self._function_at(at_step)
        args = (self.iterator, tf.constant(num_steps, tf.int32))
        if self.dist.coordinator is not None:
            remote = self.dist.coordinator.schedule(function, args=args)
            return lambda: tuple(float(v) for v in remote.fetch())
        loss, correct = function(*args)
        return lambda: (float(loss), float(correct))

    def _function_at(self, at_step: int):
        """The step function that takes the run's step ``at_step`` (0-based)."""
        return self.local_steps if self.local and at_step >= self.local_from else self.every_step

    def prepare(self, at_step: int) -> None:
        """Build the step function that takes the run's step ``at_step`` (0-based) before the
        training loop's clock starts: it is called for 0 steps, which changes nothing, in this
        process, or with a coordinator once on each worker (scheduled: ``join()`` waits).

        A function's first call is what costs: tracing here, and with a coordinator shipping
        it to a worker, which builds it and its dataset iterator (the benchmark's "building"
        column, docs/benchmarks.md). Prepared, the first epoch's clock times steps in
        every layout alike, and the chief can prepare its evaluation meanwhile.

        Only that first function: with a ps the rounds' function is still built at the
        switch, by each worker on its first round. Built here too, the switch came at the
        same moment on both workers and the seeds' accuracies spread wider (2 workers + 1 ps,
        full MNIST), and no faster on an idle machine (docs/benchmarks.md has the figures).
        """
        no_steps = tf.constant(0, tf.int32)
        function = self._function_at(at_step)
        if self.dist.coordinator is None:
            function(self.iterator, no_steps)
            return
        for _ in range(self.dist.workers):
            self.dist.coordinator.schedule(function, args=(self.iterator, no_steps))

    def join(self) -> None:
        """Wait until every step started has run (with a coordinator; else they have)."""
        if self.dist.coordinator is not None:
            self.dist.coordinator.join()
