"""The README's "A real deployment in six steps" runs as written, in its order.

Each ``sh`` block of that section is read from README.md and its commands run
as real processes against a private Redis (standing in for step 1's
``redis-server``), with ``/var/lib/hubsync`` and ``/srv/checkout`` moved under
a temp directory. A daemon the README starts in the background (``&``) runs
with ``--once`` once every step before the last has run (the relay first, then
the consumers, then the relay again for the acks), as if it had been running.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import redis

from hubstore import hub_url_from_path, open_store
from hubsync.demo.embedded_redis import RedisServerProcess
from tests.helpers.deployment_docs import readme_commands, run_documented


def test_the_six_steps_run_in_order_and_every_event_reaches_the_hub(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    moved = {"/var/lib/hubsync": tmp_path / "var", "/srv/checkout": tmp_path / "srv"}
    environment = {"HUBSYNC_REDIS_URL": private_redis.url}
    background: list[list[str]] = []

    def words(command: str) -> list[str]:
        parts = shlex.split(command.replace("$HUBSYNC_REDIS_URL", private_redis.url))
        for i, part in enumerate(parts):
            for inside, outside in moved.items():
                if part == inside or part.startswith(inside + "/"):
                    parts[i] = str(outside) + part[len(inside) :]
        return parts

    def run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_documented(args, environment, stdin, cwd=tmp_path)

    # a Redis as step 1 starts it: without hubsync's functions, which step 2 loads
    with redis.Redis.from_url(private_redis.url) as admin:
        admin.function_flush()
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
