"""What the tests of ``hubsync acl`` share: the lines applied as an administrator would, and
a URL that logs in as a user."""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import quote

import redis

from hubsync.processes import run_hubsync

HUB_PROJECT = "acme"
PASSWORD = "s3cret-Password-for-tests"
PREFIX = "t-"


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


def lock_down(server_url: str) -> redis.Redis:
    """Switch the default user of the server at ``server_url`` off, leaving one ``admin`` user
    allowed everything; a client logged in as that admin (its ACL LOG emptied)."""
    admin_password = "admin-" + PASSWORD
    setup = redis.Redis.from_url(server_url)
    setup.execute_command(
        "ACL", "SETUSER", "admin", "on", f">{admin_password}", "~*", "&*", "+@all"
    )
    setup.execute_command("ACL", "SETUSER", "default", "off")
    setup.close()
    admin = redis.Redis.from_url(user_url(server_url, "admin", admin_password))
    admin.execute_command("ACL", "LOG", "RESET")
    return admin
