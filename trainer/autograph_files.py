"""The AutoGraph source files a task leaves in the temporary directory, removed before its
final ``os._exit`` (which skips the atexit hook that would remove them)."""

from __future__ import annotations

import os
import sys
import tempfile

#: Prefix of the modules TensorFlow's AutoGraph writes to the temporary directory
#: (tensorflow/python/autograph/pyct/loader.py); it deletes them from an atexit hook.
AUTOGRAPH_PREFIX = "__autograph_generated_file"


def remove_autograph_files() -> int:
    """Delete the AutoGraph source files this process wrote; return how many.

    ``python -m trainer`` ends with ``os._exit`` (TensorFlow's threads can keep a normal exit
    waiting), which skips atexit hooks, so without this every run would leave a few
    ``__autograph_generated_file*.py`` in the temporary directory.
    """
    tmp = os.path.realpath(tempfile.gettempdir())
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not name.startswith(AUTOGRAPH_PREFIX) or not path:
            continue
        if os.path.dirname(os.path.realpath(path)) != tmp:
            continue
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    return removed
