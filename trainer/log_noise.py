"""The lines TensorFlow prints that tell a user nothing, which the local launcher drops from
the tasks' output (and the fork server from its import's)."""

from __future__ import annotations

import re

#: Lines every TensorFlow task prints that tell a user nothing (TF_CPP_MIN_LOG_LEVEL does not
#: reach them: absl prints them before its logging is initialised): absl's notice, the oneDNN
#: banner (twice per task), and the coordinator's retracing warning for checkpoint saves (each
#: save under ParameterServerStrategy traces anew; harmless). Matched exactly, so that real
#: warnings and errors still show.
NOISE_PATTERNS = (
    re.compile(
        r"^WARNING: All log messages before absl::InitializeLog\(\) is called are "
        r"written to STDERR$"
    ),
    re.compile(r"^I\d{4} [\d:.]+\s+\d+ port\.cc:\d+\] oneDNN custom operations are on\. "),
    re.compile(
        r"^WARNING:tensorflow:\d+ out of the last \d+ calls to <function "
        r"MultiDeviceSaver\.save\.<locals>\.tf_function_save at 0x[0-9a-f]+> triggered "
        r"tf\.function retracing\."
    ),
)


def is_log_noise(line: str) -> bool:
    """Whether an output line (trailing newline or not) is one of NOISE_PATTERNS."""
    return any(p.match(line.rstrip("\n")) for p in NOISE_PATTERNS)
