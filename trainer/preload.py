"""What the fork server imports once for every task (trainer/forkserver.py): TensorFlow,
Keras and the trainer's modules that use them.

Importing this module anywhere else does the same imports, nothing more. TensorFlow's
import prints its start-up banners (absl's notice, oneDNN's) on file descriptor 2, here
the launcher's terminal: they are caught and dropped like the tasks' own, and anything
else the import prints is passed on.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _import_quietly() -> None:
    from trainer.log_noise import is_log_noise

    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        try:
            import keras  # noqa: F401
            import tensorflow  # noqa: F401

            import trainer.model  # noqa: F401
            import trainer.servers  # noqa: F401
            import trainer.train  # noqa: F401
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not is_log_noise(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


_import_quietly()
