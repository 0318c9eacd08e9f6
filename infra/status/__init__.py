"""``python -m infra.status``: a stack's training run in one command (cli.py says what it
shows and its exit status).

    kubectl.py   what the view reads (Cluster) and kubectl providing it
    collect.py   the run's facts: task rows, why a task waits, warnings, the monitor's state
    render.py    the text view and ``-o json``
    cli.py       the command: flags, the stack's outputs, ``--watch``, ``--runs``

Every public name is importable from ``infra.status`` itself.
"""

from infra.status.cli import (
    PROJECT_DIR,
    build_parser,
    kubeconfig_file,
    main,
    read_runs,
    resolve,
    stack_outputs,
)
from infra.status.collect import (
    EXIT_FAILED,
    EXIT_FINISHED,
    EXIT_RUNNING,
    EXIT_UNREADABLE,
    INSTANCE_LABEL,
    TASK_INDEX_LABEL,
    TASK_ORDER,
    TASK_TYPE_LABEL,
    EventRow,
    RunStatus,
    TaskRow,
    collect,
    job_state,
    pod_why,
    warnings_about,
)
from infra.status.kubectl import Cluster, Kubectl, StatusError
from infra.status.render import age, as_json, progress_line, render, render_runs, time_left

__all__ = [
    "EXIT_FAILED",
    "EXIT_FINISHED",
    "EXIT_RUNNING",
    "EXIT_UNREADABLE",
    "INSTANCE_LABEL",
    "PROJECT_DIR",
    "TASK_INDEX_LABEL",
    "TASK_ORDER",
    "TASK_TYPE_LABEL",
    "Cluster",
    "EventRow",
    "Kubectl",
    "RunStatus",
    "StatusError",
    "TaskRow",
    "age",
    "as_json",
    "build_parser",
    "collect",
    "job_state",
    "kubeconfig_file",
    "main",
    "pod_why",
    "progress_line",
    "read_runs",
    "render",
    "render_runs",
    "resolve",
    "stack_outputs",
    "time_left",
    "warnings_about",
]
