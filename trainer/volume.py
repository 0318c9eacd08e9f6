"""A full volume under --log_dir (or staging's --dest): a permanent error, not a lost peer.

Every write of the run's files makes ENOSPC or EDQUOT a VolumeFull (``full_is_permanent``):
the checkpoints (trainer/training/checkpoints.py), the TensorBoard events
(trainer/training/events.py), the export, result.json and the done marker
(trainer/training/finish.py), the first heartbeat (trainer/training/run.py), a local run's lock
file (trainer/log_dir_lock.py) and staging (trainer/stage.py). The process then ends with
EXIT_VOLUME_FULL and one line naming the path, not a traceback and exit 1, which the Jobs would
retry into BackoffLimitExceeded.
The chief's later heartbeats only warn: a beat is rewritten every few seconds and the next
of the writes above decides.

TensorFlow reports a write that hit ENOSPC as ``tf.errors.ResourceExhaustedError`` (its
errno-to-status mapping) with the system's "No space left on device" in the message; from
a ps-side save it arrives at the chief as that OpError too, which the training loop would
otherwise read as a lost ps and restart. No restart frees space, so the task exits
EXIT_VOLUME_FULL, which fails the Kubernetes Job at once. Standard library only: imported
before TensorFlow is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator

#: The stack's key for the size of the run's volume (persistence.pvc.storage, infra/settings/run.py).
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


def volume_full(err: BaseException, directory: str, writing: str, flag: str = "--log_dir") -> VolumeFull:
    """The VolumeFull for ``err`` while writing ``writing`` under ``directory`` (given as
    ``flag``: ``--log_dir``, or staging's ``--dest``)."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    # A TensorFlow op's error starts with the function it ran in, which says nothing here.
    first = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", first)
    return VolumeFull(
        f"the volume holding {flag} {directory} is full: {writing} failed ({first}); a "
        f"restart cannot cure it: free space there, or give the volume more (on Kubernetes "
        f"pulumi config set {VOLUME_SIZE_KEY} <size>, e.g. 10Gi, then pulumi up)"
    )


@contextlib.contextmanager
def full_is_permanent(directory: str | os.PathLike, writing: str, flag: str = "--log_dir") -> Iterator[None]:
    """Within it, an error that reports ENOSPC or EDQUOT (``is_no_space``: an OSError, a
    TensorFlow OpError, or an error whose message carries the system's text) is raised as
    ``volume_full(err, directory, writing, flag)``; any other error passes unchanged.

    Raises:
        VolumeFull: the volume holding ``directory`` has no space (or quota) left.
    """
    try:
        yield
    except VolumeFull:
        raise
    except Exception as err:  # noqa: BLE001 - OSError, tf.errors.OpError, or a wrapper of one
        if is_no_space(err):
            raise volume_full(err, str(directory), writing, flag) from None
        raise
