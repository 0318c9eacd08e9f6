"""The models: a small convnet (default), the same with a hidden dense layer, a slimmer one
of those (the local launcher's), and the guide's 784-100-10 sigmoid MLP."""

from __future__ import annotations

import keras

from trainer.data import COLS, NUM_CLASSES, ROWS


def build_model(name: str = "convnet", dropout: float = 0.5, dtype: str | None = None) -> keras.Model:
    """Build an uncompiled model mapping float32 (batch, 28, 28, 1) in [0, 1] to logits
    (batch, 10).

    ``convnet``: keras-io's mnist_convnet (two 3x3 conv + max-pool blocks, dropout
    ``dropout`` (keras-io's 0.5), softmax layer; about 99% test accuracy on full MNIST,
    34,826 parameters).
    ``convnet_fc``: the same with a 128-unit ReLU layer before the dropout, as the
    convnets of TensorFlow's MNIST tutorials have (225,034 parameters, about 9% more
    compute per example): it learns faster than convnet in the launcher's two epochs.
    ``convnet_fc_slim``: convnet_fc with 32 filters in its second convolution instead of
    64 and a 256-unit hidden layer (217,194 parameters). That convolution is about 90% of
    convnet_fc's arithmetic, so an epoch takes less time; the wider hidden layer, which
    costs little, keeps two epochs at 0.99 where 128 units fell under it in some seeds.
    The launcher's model; docs/benchmarks.md has the measured times and accuracies.
    ``mlp``: the guide's TF1 model, 784-100-10 with a sigmoid hidden layer (0.89 after 100
    epochs of plain SGD in the guide), kept for comparison.

    ``dtype``: the layers' Keras dtype policy (trainer/precision.py), default Keras' global
    one (float32); with mixed_bfloat16 the logits are bfloat16 and the weights float32, in
    the same shapes and order.

    Raises:
        ValueError: an unknown name.
    """
    layers = _Layers(dtype)
    inputs = keras.Input(shape=(ROWS, COLS, 1), name="image")
    if name in ("convnet", "convnet_fc", "convnet_fc_slim"):
        x = layers.Conv2D(32, 3, activation="relu")(inputs)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Conv2D(32 if name == "convnet_fc_slim" else 64, 3, activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Flatten()(x)
        if name != "convnet":
            x = layers.Dense(256 if name == "convnet_fc_slim" else 128, activation="relu")(x)
        x = layers.Dropout(dropout)(x)
    elif name == "mlp":
        x = layers.Flatten()(inputs)
        x = layers.Dense(100, activation="sigmoid")(x)
    else:
        raise ValueError(
            f"unknown model {name!r}: must be one of 'convnet', 'convnet_fc', 'convnet_fc_slim' or 'mlp'"
        )
    logits = layers.Dense(NUM_CLASSES, name="logits")(x)
    return keras.Model(inputs, logits, name=name)


class _Layers:
    """keras.layers with every layer made under one dtype policy (None: Keras' global)."""

    def __init__(self, dtype: str | None) -> None:
        self.dtype = dtype

    def __getattr__(self, layer: str):
        make = getattr(keras.layers, layer)
        return lambda *args, **kwargs: make(*args, dtype=self.dtype, **kwargs)
