"""Whether a checkpoint is damaged, or its volume only failed to deliver it for a while: the
files themselves decide, not the words of TensorFlow's error.

TensorFlow 2.21's checkpoint reader reports nearly every failure as UNKNOWN (a plain
``tf.errors.OpError``, or an IndexError for a short data file), bytes that are bad and a read
that the volume failed alike, and names a missing file with the system's "No such file or
directory". On NFS a read can fail for a moment (ESTALE, ENOENT, EIO) and then succeed, so the
verdict comes from asking the system for every byte of the checkpoint's files (``look``) around
each read by TensorFlow (``verdict``):

- damaged: TensorFlow rejects the checkpoint while the system delivers every byte of its index
  and data files whole, before and after, on ``REJECTIONS`` reads in a row (a truncated or
  altered file, an index that is no table). Only this skips it for an older checkpoint.
- unfinished: the directory lists data files of it but no index, at every look. TensorFlow
  writes the index last, once the data files are renamed into place, and CheckpointManager
  removes it first, so such a checkpoint never held a whole state; it is skipped like a damaged
  one.
- an I/O failure: the system refused a file (any OSError: ENOENT, ESTALE, EIO, EACCES ...), a
  file changed size while read, or TensorFlow's error is its code for a failed system call
  (NotFound, PermissionDenied, Unavailable ...). The files are looked at again after a pause
  (``READ_TRIES`` looks, the pauses doubling from ``RETRY_PAUSE_S``); when the failure lasts,
  CheckpointIOError: the task exits EXIT_RETRY and its restart reads the same checkpoint again.
  No older checkpoint is restored in its place, and the run is not ended for it.

Standard library only at import: ``python -m trainer`` names CheckpointIOError before it imports
TensorFlow.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Looks at one checkpoint's files before a failure to read them is reported as an I/O failure.
READ_TRIES = 4
#: Seconds before the second look, doubled before each further one (0.5 + 1 + 2 = 3.5 s in all).
RETRY_PAUSE_S = 0.5
#: TensorFlow's rejections in a row, each between two looks that read every byte whole, that
#: make a checkpoint damaged: one alone may be a read that the volume failed between the looks.
REJECTIONS = 2
#: A data file's suffix as TensorFlow names it: .data-<shard>-of-<shards>, 5 digits each.
DATA_SUFFIX = re.compile(r"\.data-(\d{5})-of-(\d{5})")
#: What a look or a read found.
IO, UNFINISHED, REJECTED = "an I/O failure", "unfinished", "rejected"


class CheckpointIOError(RuntimeError):
    """A checkpoint's files could not be read through READ_TRIES looks, for a reason of the
    volume and not of their bytes: a restart may read them (EXIT_RETRY)."""


@dataclass(frozen=True)
class Trouble:
    """What one look or read found: ``kind`` IO, UNFINISHED or REJECTED, and ``text``, one line
    naming the file and the failure."""

    kind: str
    text: str


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message (its type's name when it has none), without the
    ``{{function_node ...}}`` that a TensorFlow op's error starts with."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    return re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line)


def checkpoint_files(path: str, names: list[str]) -> list[Path]:
    """The files checkpoint ``path`` (``<dir>/ckpt-<N>``) must have, given ``names`` listed in
    its directory: the index, then every shard of each shard count its listed data files name
    (``ckpt-<N>.data-00000-of-00001`` when none is listed: TensorFlow always writes shard 0)."""
    prefix = Path(path)
    base = prefix.name
    counts = {
        int(match[2])
        for name in names
        if name.startswith(base) and (match := DATA_SUFFIX.fullmatch(name[len(base) :]))
    } or {1}
    data = sorted({f"{base}.data-{i:05d}-of-{n:05d}" for n in counts for i in range(n)})
    return [prefix.parent / f"{base}.index", *(prefix.parent / name for name in data)]


def read_whole(file: Path, chunk: int = 1 << 20) -> None:
    """Read every byte of ``file``.

    Raises:
        OSError: the system refused it, or it holds another number of bytes than its size
            said when opened (it changed while read).
    """
    with open(file, "rb", buffering=0) as stream:
        size = os.fstat(stream.fileno()).st_size
        got = 0
        while block := stream.read(chunk):
            got += len(block)
    if got != size:
        raise OSError(f"{file}: {got} bytes read of {size}: the file changed while read")


def look(path: str) -> Trouble | None:
    """None when the system lists checkpoint ``path``'s index and delivers every byte of it and
    of its data files (``checkpoint_files``) whole; else what it found: UNFINISHED (data files
    listed, no index) or IO (the directory or a file refused, a file missing or changing)."""
    directory = Path(path).parent
    try:
        names = os.listdir(directory)
    except OSError as err:
        return Trouble(IO, str(err))
    files = checkpoint_files(path, names)
    if files[0].name not in names and any(name.startswith(f"{files[0].stem}.data-") for name in names):
        return Trouble(UNFINISHED, f"no {files[0].name} beside its data files: a save or removal cut short")
    try:
        for file in files:
            read_whole(file)
    except OSError as err:
        return Trouble(IO, str(err))
    return None


def read_every_tensor(path: str) -> None:
    """Read back every tensor of checkpoint ``path`` with TensorFlow, which checks each against
    the CRC32C in the index.

    Raises:
        tf.errors.OpError, IndexError, ValueError: as TensorFlow's reader fails.
    """
    import tensorflow as tf

    reader = tf.train.load_checkpoint(path)
    for key in reader.get_variable_to_shape_map():
        reader.get_tensor(key)


def read_once(path: str, read: Callable[[str], None]) -> Trouble | None:
    """Look at checkpoint ``path``'s files, then when they are whole ``read`` it (TensorFlow);
    None when it read, else what the look found, or what the read's failure was: IO for
    TensorFlow's codes of a failed system call or when a second look finds the files failing,
    else REJECTED (the system delivered the bytes, TensorFlow refused them)."""
    import tensorflow as tf

    system_call_failed = (
        tf.errors.NotFoundError,
        tf.errors.PermissionDeniedError,
        tf.errors.UnavailableError,
        tf.errors.AbortedError,
        tf.errors.DeadlineExceededError,
        tf.errors.ResourceExhaustedError,
        tf.errors.CancelledError,
    )
    trouble = look(path)
    if trouble is not None:
        return trouble
    try:
        read(path)
    except (tf.errors.OpError, IndexError, ValueError) as err:
        if isinstance(err, system_call_failed):
            return Trouble(IO, first_line(err))
        return look(path) or Trouble(REJECTED, first_line(err))
    return None


def verdict(
    path: str,
    *,
    read: Callable[[str], None] = read_every_tensor,
    pause: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] | None = None,
    tries: int = READ_TRIES,
) -> str | None:
    """None once ``read`` (by default every tensor, ``read_every_tensor``) has read checkpoint
    ``path``; else why it is damaged or unfinished (one line). Between tries, ``pause`` for
    RETRY_PAUSE_S seconds, doubling, and ``warn`` says what failed.

    Raises:
        CheckpointIOError: ``tries`` looks in a row found no verdict, the last for the reason
            it names (an I/O failure, or a single rejection).
    """
    found: list[Trouble] = []
    waited = 0.0
    for attempt in range(tries):
        if attempt:
            seconds = RETRY_PAUSE_S * 2 ** (attempt - 1)
            if warn is not None:
                warn(f"checkpoint {path}: {found[-1].text}; reading it again in {seconds:g} s")
            pause(seconds)
            waited += seconds
        trouble = read_once(path, read)
        if trouble is None:
            return None
        found.append(trouble)
        if [t.kind for t in found[-REJECTIONS:]] == [REJECTED] * REJECTIONS:
            return trouble.text
    if all(t.kind == UNFINISHED for t in found):
        return found[-1].text
    raise CheckpointIOError(
        f"checkpoint {path} could not be read in {tries} tries over {waited:g} s "
        f"({found[-1].text}): the volume failed to deliver its files, which is not damage; "
        "exiting so the task is restarted and reads it again (if its files are gone for good, "
        "move them away to resume from the checkpoint before)"
    )
