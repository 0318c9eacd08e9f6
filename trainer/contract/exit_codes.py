"""Exit codes of ``python -m trainer`` (shared by the task and the local launcher).

0 success; 1 lost peers, a checkpoint the volume failed to deliver through every try
(trainer/training/checkpoint_files.py), or another failure worth a restart; 143 stopped by
SIGTERM after saving a checkpoint. The permanent ones, which a restart cannot cure (the local
launcher does not retry them, and the Kubernetes Jobs' podFailurePolicy fails the Job on them):
2 bad flags or TF_CONFIG, a --log_dir whose checkpoints are all damaged (bad bytes), or a
Python without the trainer's packages; 3 bad data; 4 the volume holding --log_dir is full; 5 a
ps or worker whose chief ended with one of these (it left a ``failed`` marker,
trainer/servers.py), so that every task of the run ends at once.

``python -m trainer.stage`` (the staging Job, which fails on its first failed pod) exits 0, 1
(a download, a checksum, a source), 4 (the volume is full, as for the tasks) or 6: its
directory on the volume is not writable by the pod's uid, which only a change of owner or uid
cures. 6 is not among the task Jobs' permanent
codes: no task exits with it.
"""

EXIT_OK = 0
EXIT_RETRY = 1
EXIT_BAD_FLAGS = 2  # argparse's own code for usage errors
#: A package the task imports is missing: a usage error too, cured by another Python only.
EXIT_MISSING_PACKAGES = EXIT_BAD_FLAGS
EXIT_BAD_DATA = 3
EXIT_VOLUME_FULL = 4
EXIT_CHIEF_FAILED = 5
EXIT_VOLUME_NOT_WRITABLE = 6
EXIT_SIGTERM = 143  # 128 + SIGTERM, as a shell reports it
PERMANENT_EXIT_CODES = (EXIT_BAD_FLAGS, EXIT_BAD_DATA, EXIT_VOLUME_FULL, EXIT_CHIEF_FAILED)
#: What each permanent code means, for messages.
PERMANENT_REASONS = {
    EXIT_BAD_FLAGS: "bad flags, TF_CONFIG or packages",
    EXIT_BAD_DATA: "bad data",
    EXIT_VOLUME_FULL: "the volume is full",
    EXIT_CHIEF_FAILED: "the chief ended for good",
}
