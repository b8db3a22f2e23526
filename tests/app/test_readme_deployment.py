"""The README's "A real deployment in six steps" runs as written, in its order.

Each ``sh`` block of that section is read from README.md and its commands run
as real processes against a private Redis (standing in for step 1's
``redis-server``), with ``/var/lib/hubsync`` and ``/srv/checkout`` moved under
a temp directory. A daemon the README starts in the background (``&``) runs
with ``--once`` once every step before the last has run (the relay first, then
the consumers, then the relay again for the acks), as if it had been running.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hubstore import hub_url_from_path, open_store
from hubsync.processes import child_environment, hubsync_command
from tests.helpers.support import REPO_ROOT

ROOT = REPO_ROOT
SECTION = (ROOT / "README.md").read_text().split("## A real deployment in six steps\n")[1]
SECTION = SECTION.split("\n## ")[0]


def readme_commands() -> list[str]:
    """The section's shell commands, in order: continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", SECTION, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #")[0].strip()
            if command and not command.startswith("#"):
                commands.append(" ".join(command.split()))
    return commands


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


@pytest.mark.e2e
def test_the_six_steps_run_in_order_and_every_event_reaches_the_hub(
    tmp_path: Path, private_redis: Any
) -> None:
    moved = {"/var/lib/hubsync": tmp_path / "var", "/srv/checkout": tmp_path / "srv"}
    environment = {"HUBSYNC_REDIS_URL": private_redis.url}
    background: list[list[str]] = []

    def words(command: str) -> list[str]:
        parts = shlex.split(command)
        for i, part in enumerate(parts):
            for inside, outside in moved.items():
                if part == inside or part.startswith(inside + "/"):
                    parts[i] = str(outside) + part[len(inside) :]
        return parts

    def run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
        assert args[0] == "hubsync", args
        done = subprocess.run(
            hubsync_command(*args[1:]),
            input=stdin,
            capture_output=True,
            text=True,
            env=child_environment(environment),
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (args, done.stderr)
        return done

    commands = readme_commands()
    for command in commands[2:-1]:
        for part in command.split(" && "):
            args = words(part)
            if args[-1] == "&":
                background.append(args[:-1])
            elif args[0] == "shred":
                assert args[1] == "-u"
                (tmp_path / args[2]).unlink()
            elif "<" in args:
                source = args.index("<")
                run(args[:source], (tmp_path / args[source + 1]).read_text())
            elif ">" in args:
                target = args.index(">")
                (tmp_path / args[target + 1]).write_text(run(args[:target]).stdout)
            else:
                run(args)
    relays = [args for args in background if args[1] == "relay"]
    consumers = [args for args in background if args[1] == "consume"]
    assert relays and len(consumers) >= 2
    for daemon in (*relays, *consumers, *relays):
        run([*daemon, "--once"])

    shown = run(words(commands[-1]))
    assert "shop" in shown.stdout
    [hub_db] = (tmp_path / "var").glob("hub.db")
    with open_store(hub_url_from_path(hub_db), create_schema=False) as hub:
        assert hub.count_events() == 10 * 20  # step 4's --runs 10 --events-per-run 20
    assert not list(tmp_path.glob("*.token")), "the README deletes the token once joined"
