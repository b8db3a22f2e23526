"""hubsync commands as child processes: one launcher (``Child``) and one pipeline harness.

The demo, the benchmarks and the tests start relays and hub consumers through
these, so every child starts the same way from any current directory, with the
same clean environment, its output in a log file, and its death noticed.
"""

from hubsync.processes.child import (
    Child,
    ChildDied,
    child_environment,
    hubsync_command,
    python_command,
    run_hubsync,
)
from hubsync.processes.pipeline import PipelineProcesses, PipelineTimeout, poll_until

__all__ = [
    "Child",
    "ChildDied",
    "PipelineProcesses",
    "PipelineTimeout",
    "child_environment",
    "hubsync_command",
    "poll_until",
    "python_command",
    "run_hubsync",
]
