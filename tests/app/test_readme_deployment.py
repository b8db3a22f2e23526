"""The README's "A real deployment in six steps" holds only steps its run knows how to take
(the run itself, step by step, is ``tests/e2e/test_readme_six_steps.py``)."""

from __future__ import annotations

import shlex

from tests.helpers.deployment_docs import readme_commands


def test_the_steps_are_the_ones_this_test_knows_how_to_run() -> None:
    commands = readme_commands()
    assert commands[0].startswith("redis-server --appendonly yes")
    assert commands[1].startswith("export HUBSYNC_REDIS_URL=")
    programs = {shlex.split(c)[0] for c in commands[2:]}
    assert programs == {"hubsync"}, programs
    assert [c.split()[1] for c in commands[2:]] == [
        "hub",
        "consume",
        "consume",
        "enroll",
        "runtime",
        "produce",
        "relay",
        "status",
    ]
