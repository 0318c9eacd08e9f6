"""The models: a small convnet (default) and the guide's 784-100-10 sigmoid MLP."""

from __future__ import annotations

import keras

from trainer.data import COLS, NUM_CLASSES, ROWS


def build_model(name: str = "convnet", dropout: float = 0.5) -> keras.Model:
    """Build an uncompiled model mapping float32 (batch, 28, 28, 1) in [0, 1] to logits
    (batch, 10).

    ``convnet``: keras-io's mnist_convnet (two 3x3 conv + max-pool blocks, dropout
    ``dropout`` (keras-io's 0.5), softmax layer; about 99% test accuracy on full MNIST,
    34,826 parameters). Short runs learn faster with less dropout (0.1 in the launcher's
    two-epoch recipe), long ones generalise better with more.
    ``mlp``: the guide's TF1 model, 784-100-10 with a sigmoid hidden layer (0.89 after 100
    epochs of plain SGD in the guide), kept for comparison.

    Raises:
        ValueError: an unknown name.
    """
    inputs = keras.Input(shape=(ROWS, COLS, 1), name="image")
    if name == "convnet":
        x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
        x = keras.layers.MaxPooling2D(2)(x)
        x = keras.layers.Conv2D(64, 3, activation="relu")(x)
        x = keras.layers.MaxPooling2D(2)(x)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dropout(dropout)(x)
    elif name == "mlp":
        x = keras.layers.Flatten()(inputs)
        x = keras.layers.Dense(100, activation="sigmoid")(x)
    else:
        raise ValueError(f"unknown model {name!r}: must be 'convnet' or 'mlp'")
    logits = keras.layers.Dense(NUM_CLASSES, name="logits")(x)
    return keras.Model(inputs, logits, name=name)
