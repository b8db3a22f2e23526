"""What the tests of ``hubsync acl`` share: a server whose only open user is its admin, the
lines applied as an administrator would, and a URL that logs in as a user."""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import quote

import redis

from hubsync.processes import run_hubsync

HUB_PROJECT = "acme"
PASSWORD = "s3cret-Password-for-tests"
ADMIN_PASSWORD = "admin-" + PASSWORD
PREFIX = "t-"


def admin_only(server_url: str) -> redis.Redis:
    """Switch the server's default user off, leaving a user ``admin`` with every right; its
    client (the caller closes it). The server is then ACL-enabled as a deployment's is."""
    setup = redis.Redis.from_url(server_url)
    setup.execute_command(
        "ACL", "SETUSER", "admin", "on", f">{ADMIN_PASSWORD}", "~*", "&*", "+@all"
    )
    setup.execute_command("ACL", "SETUSER", "default", "off")
    setup.close()
    admin = redis.Redis.from_url(user_url(server_url, "admin", ADMIN_PASSWORD))
    admin.execute_command("ACL", "LOG", "RESET")
    return admin


def apply_lines(admin: redis.Redis, lines: list[str]) -> None:
    """Run each ``ACL SETUSER`` line as one command, as redis-cli would.

    Only the CLIENT SETINFO line may be refused, and only as an unknown command
    (Redis 7.0 and 7.1 do not have it).
    """
    for line in lines:
        try:
            admin.execute_command(*shlex.split(line))
        except redis.ResponseError as exc:
            if not (line.endswith("+client|setinfo") and "Unknown command" in str(exc)):
                raise


def user_url(server_url: str, user: str, password: str = PASSWORD) -> str:
    """``server_url`` authenticating as ``user``."""
    scheme, rest = server_url.split("://", 1)
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{rest}"


def hubsync_acl(tmp_path: Path, *argv: str) -> list[str]:
    """``hubsync acl ARGV --password-file F`` as a real command: its stdout lines."""
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    done = run_hubsync(
        ["acl", *argv, "--user-prefix", PREFIX, "--password-file", str(password_file)]
    )
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    return done.stdout.splitlines()
