"""trainer/packed.py: the packed weights run the Keras model exactly, in process."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def slim():
    import keras

    from trainer.model import build_model

    keras.utils.set_random_seed(7)
    return build_model("convnet_fc_slim", 0.25)


def _images(n: int = 5):
    return np.random.default_rng(3).random((n, 28, 28, 1), dtype=np.float32)


def test_the_packed_vector_holds_every_parameter_once_in_variable_order(slim):
    from trainer.packed import PackedWeights

    packing = PackedWeights(slim)
    flat = packing.initial_value()
    assert flat.shape == (217_194,) == (packing.size,) == (slim.count_params(),)
    for variable, part in zip(slim.trainable_variables, packing.unpack(flat)):
        np.testing.assert_array_equal(part.numpy(), variable.numpy())


def test_logits_on_the_packed_vector_are_the_model_s_own(slim):
    from trainer.packed import PackedWeights

    packing = PackedWeights(slim)
    x = _images()
    np.testing.assert_allclose(
        packing.logits(packing.initial_value(), x, training=False),
        slim(x, training=False),
        rtol=1e-5,
        atol=1e-6,
    )


def test_the_packed_gradient_is_the_per_variable_gradients_concatenated(slim):
    import keras
    import tensorflow as tf

    from trainer.packed import PackedWeights

    packing = PackedWeights(slim)
    x, y = _images(), np.array([0, 1, 2, 3, 4], np.int32)

    def loss(logits):
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))

    flat = tf.Variable(packing.initial_value())
    with tf.GradientTape() as tape:
        packed_loss = loss(packing.logits(flat, x, training=False))
    with tf.GradientTape() as tape2:
        own_loss = loss(slim(x, training=False))
    own = tape2.gradient(own_loss, slim.trainable_variables)
    np.testing.assert_allclose(
        tape.gradient(packed_loss, flat).numpy(),
        np.concatenate([g.numpy().ravel() for g in own]),
        rtol=1e-4,
        atol=1e-7,
    )


def test_dropout_draws_new_masks_at_every_call(slim):
    from trainer.packed import PackedWeights

    packing = PackedWeights(slim)
    flat, x = packing.initial_value(), _images()
    first, second = (packing.logits(flat, x, training=True).numpy() for _ in range(2))
    assert not np.allclose(first, second)


def test_copy_to_model_sets_the_model_s_variables(slim):
    from trainer.model import build_model
    from trainer.packed import PackedWeights

    other = build_model("convnet_fc_slim", 0.25)
    PackedWeights(other).copy_to_model(PackedWeights(slim).initial_value())
    for mine, theirs in zip(other.trainable_variables, slim.trainable_variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_a_model_with_other_state_is_refused_naming_it():
    import keras

    from trainer.packed import PackedWeights

    inputs = keras.Input(shape=(4,))
    model = keras.Model(inputs, keras.layers.BatchNormalization(name="bn")(inputs), name="m")
    with pytest.raises(
        ValueError,
        match=r"model m has non-trainable variables \['bn/moving_mean', "
        r"'bn/moving_variance'\]",
    ):
        PackedWeights(model)
