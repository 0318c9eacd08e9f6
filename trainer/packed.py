"""A Keras model's trainable weights as one flat float32 vector: one variable to read and one
gradient to apply per training step, however many layers the model has.

Why: under ParameterServerStrategy every variable lives on the ps, and each worker reads
every variable and sends a gradient for every variable at every step, each a separate
tensor transfer handled by the ps' gRPC and thread pools: each transfer has a fixed cost,
so one packed vector makes a step cheaper than the model's eight variables (plus the dropout
seed, also on the ps) do (docs/benchmarks.md, "Where the seconds went");
MultiWorkerMirroredStrategy likewise all-reduces one tensor instead of eight.

The Keras model stays the one definition of the network: ``PackedWeights`` runs it with
``Model.stateless_call`` on slices of the vector, so its own variables (local to the process
that built it, outside any strategy scope) are only the template of shapes, and the copy
``copy_to_model`` fills for evaluation. Adam and SGD are element-wise, so updating the packed
vector is the same arithmetic as updating the variables one by one.
"""

from __future__ import annotations

import math

import numpy as np

#: The suffix of the only non-trainable state the models have: a Dropout layer's seed.
SEED_STATE_SUFFIX = "seed_generator_state"


class PackedWeights:
    """The layout of ``model``'s trainable weights in one vector, and the model run on it.

    ``model``: a built Keras model whose only non-trainable variables are Dropout seed
    states (int64, shape (2,)), as every model of trainer.model is.
    ``compute_model``: the same network under another dtype policy (trainer/precision.py),
    which ``logits`` runs; default ``model``. Its weights have ``model``'s shapes and order.

    Raises:
        ValueError: the model has other non-trainable state (BatchNormalization statistics,
            say): its updates would be lost in ``logits``.
    """

    def __init__(self, model, compute_model=None) -> None:
        others = [v.path for v in model.non_trainable_variables if not v.path.endswith(SEED_STATE_SUFFIX)]
        if others:
            raise ValueError(
                f"model {model.name} has non-trainable variables {others}: "
                "PackedWeights runs models whose only state is dropout seeds"
            )
        self.model = model
        self.compute_model = compute_model or model
        self.shapes = [tuple(int(d) for d in v.shape) for v in model.trainable_variables]
        self.sizes = [math.prod(shape) for shape in self.shapes]
        #: The vector's length: the model's parameter count.
        self.size = sum(self.sizes)

    def initial_value(self) -> np.ndarray:
        """The model's current weights (its initialisation), packed: float32, shape (size,)."""
        return np.concatenate(
            [np.asarray(v.numpy(), np.float32).ravel() for v in self.model.trainable_variables]
        )

    def unpack(self, flat) -> list:
        """The model's trainable weights, in ``model.trainable_variables`` order, as tensors
        sliced from ``flat`` (shape (size,)); differentiable with respect to ``flat``."""
        import tensorflow as tf

        parts = tf.split(tf.convert_to_tensor(flat), self.sizes)
        return [tf.reshape(part, shape) for part, shape in zip(parts, self.shapes)]

    def logits(self, flat, images, training: bool):
        """The compute model's output (float32 logits, (batch, classes)) for ``images`` with
        the weights in ``flat``.

        Each Dropout layer gets a fresh seed from TensorFlow's stateful random generator (so
        from ``tf.random.set_seed``): its masks differ from step to step, without a seed
        variable to keep on the ps. Unlike a seed variable, the stream is not checkpointed: a
        restarted process draws its seeds from the start again.
        """
        import tensorflow as tf

        seeds = [
            tf.random.uniform((2,), maxval=2**62, dtype=tf.int64)
            for _ in self.compute_model.non_trainable_variables
        ]
        outputs, _ = self.compute_model.stateless_call(self.unpack(flat), seeds, images, training=training)
        return tf.cast(outputs, tf.float32)

    def copy_to_model(self, flat) -> None:
        """Set the model's own variables to the weights in ``flat`` (one read of it), so the
        model can be evaluated or saved locally."""
        for variable, value in zip(self.model.trainable_variables, self.unpack(flat)):
            variable.assign(value)
