"""A full volume under --log_dir: a permanent error, not a lost peer.

TensorFlow reports a write that hit ENOSPC as ``tf.errors.ResourceExhaustedError`` (its
errno-to-status mapping) with the system's "No space left on device" in the message; from
a ps-side save it arrives at the chief as that OpError too, which the training loop would
otherwise read as a lost ps and restart. No restart frees space, so the task exits
EXIT_VOLUME_FULL, which fails the Kubernetes Job at once. Standard library only: imported
before TensorFlow is.
"""

from __future__ import annotations

import errno
import os

#: The stack's key for the size of the run's volume (infra/settings/keys.py).
VOLUME_SIZE_KEY = "persistence.pvc.storage"
_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"


class VolumeFull(RuntimeError):
    """The volume holding --log_dir has no space left; the message names it, what was being
    written and how to give it more."""


def is_no_space(err: BaseException) -> bool:
    """Whether ``err`` (an OSError, or a TensorFlow OpError) reports ENOSPC."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return _NO_SPACE in str(err) or "Disk quota exceeded" in str(err)


def volume_full(err: BaseException, log_dir: str, writing: str) -> VolumeFull:
    """The VolumeFull for ``err`` while writing ``writing`` under ``log_dir``."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return VolumeFull(
        f"the volume holding --log_dir {log_dir} is full: {writing} failed ({first}); a "
        f"restart cannot cure it: free space there, or give the volume more (on Kubernetes "
        f"pulumi config set {VOLUME_SIZE_KEY} <size>, e.g. 10Gi, then pulumi up)")
