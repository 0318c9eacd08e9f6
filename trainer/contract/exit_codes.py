"""Exit codes of ``python -m trainer`` (shared by the task and the local launcher).

0 success; 1 lost peers or another failure worth a restart; 2 bad flags or TF_CONFIG, or a
Python without the trainer's packages, and 3 bad data, which a restart cannot cure (the
local launcher does not retry them, and a Kubernetes podFailurePolicy can fail the Job on
them); 143 stopped by SIGTERM after saving a checkpoint.
"""

EXIT_OK = 0
EXIT_RETRY = 1
EXIT_BAD_FLAGS = 2  # argparse's own code for usage errors
#: A package the task imports is missing: a usage error too, cured by another Python only.
EXIT_MISSING_PACKAGES = EXIT_BAD_FLAGS
EXIT_BAD_DATA = 3
EXIT_SIGTERM = 143  # 128 + SIGTERM, as a shell reports it
PERMANENT_EXIT_CODES = (EXIT_BAD_FLAGS, EXIT_BAD_DATA)
