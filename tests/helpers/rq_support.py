"""``rq`` as the tests start it: a real process, its environment scrubbed as every child's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from hubsync.core import keys
from hubsync.processes import child_environment
from tests.helpers.support import REPO_ROOT


def start_rq(
    args: list[str], redis_url: str, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``rq ARGS --url REDIS_URL`` from the checkout, its output appended to ``log``.

    Its environment is ``child_environment(env)``: none of this process's
    ``HUBSYNC_*`` or ``REDIS_URL``, only what ``env`` gives.
    """
    rq = Path(sys.executable).with_name("rq")
    command = [str(rq) if rq.exists() else "rq", *args, "--url", redis_url]
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_environment(env),
        )


def burst_worker(redis_url: str, log: Path) -> subprocess.Popen[bytes]:
    """An ``rq worker`` of the effects queue that runs what is queued (and due), then exits."""
    return start_rq(["worker", keys.EFFECTS_QUEUE, "--burst", "--with-scheduler"], redis_url, log)


def environment_names() -> list[str]:
    """A job: the names in the environment of the worker that runs it."""
    return sorted(os.environ)
