"""The chief's TensorBoard event files, written under the full-volume rule
(trainer/volume.py) like the checkpoints.

TensorFlow's summary file writer writes the file's first event when it is made, then queues
events and appends them when its queue holds 10 or on ``flush``. So a full volume surfaces in
whichever of those calls wrote: making the writer, ``tf.summary.write`` or ``flush``, each as
ResourceExhaustedError with the system's "No space left on device", and the queued events are
dropped. Every such call is made here inside ``full_is_permanent``: the task ends with
EXIT_VOLUME_FULL and one line naming the directory, as a full volume while checkpointing does,
instead of the training loop reading the OpError as a lost peer and restarting into the same
full volume.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from trainer.volume import full_is_permanent


class EventWriters:
    """One summary file writer for each TensorBoard run (``subdirs`` of ``log_dir``, e.g.
    progress.TENSORBOARD_SUBDIRS; none on a task that writes no events).

    Raises (every method, and making one):
        trainer.volume.VolumeFull: no space (or quota) left on --log_dir's volume.
    """

    def __init__(self, log_dir: str, subdirs: Iterable[str]) -> None:
        self.log_dir = log_dir
        self.writers: dict[str, tf.summary.SummaryWriter] = {}
        for subdir in subdirs:
            with full_is_permanent(log_dir, self._writing(subdir)):
                self.writers[subdir] = tf.summary.create_file_writer(str(Path(log_dir) / subdir))

    def _writing(self, subdir: str) -> str:
        return f"writing TensorBoard events in {Path(self.log_dir) / subdir}"

    def scalar(self, subdir: str, tag: str, value: float, step: int, description: str = "") -> None:
        """Write scalar ``tag`` = ``value`` at ``step`` into run ``subdir``'s events."""
        with (
            full_is_permanent(self.log_dir, self._writing(subdir)),
            self.writers[subdir].as_default(step=step),
        ):
            write_scalar(tag, value, description)

    def flush(self) -> None:
        """Append every queued event to its file."""
        for subdir, writer in self.writers.items():
            with full_is_permanent(self.log_dir, self._writing(subdir)):
                writer.flush()


def write_scalar(name: str, value: float, description: str = "") -> None:
    """Write a TensorBoard scalar with core TensorFlow only.

    tf.summary.scalar needs the tensorboard package, which tensorflow 2.21 no longer
    installs; this writes the same event (a float32 tensor tagged for the "scalars" plugin),
    so the trainer image does not need TensorBoard.
    """
    metadata = summary_pb2.SummaryMetadata(
        summary_description=description,
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    )
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata)
