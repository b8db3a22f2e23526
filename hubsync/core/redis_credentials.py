"""The parts of a Redis URL and password file that make a ``RedisTarget``'s credentials.

A password comes from the URL or from a file, never both; messages name the URL through
``safe_url`` and the file by its path, never a password.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from hubsync.core.errors import ConfigError
from hubsync.core.settings import safe_url


def read_secret_file(path: Path, option: str, what: str) -> str:
    """The secret a file holds, surrounding whitespace dropped; ``ConfigError`` if none.

    ``option`` (``--redis-password-file``) and ``what`` (``the Redis password``)
    word the message, which names the file, never its content.
    """
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            f"{option} {path}: cannot read it ({reason}); give a readable file holding {what}"
        ) from None
    if not secret:
        raise ConfigError(f"{option} {path}: the file is empty; put {what} in it")
    return secret


def read_password_file(path: Path) -> str:
    """The Redis password a ``--redis-password-file`` holds (``read_secret_file``)."""
    return read_secret_file(path, "--redis-password-file", "the Redis password")


def refuse_two_passwords(url: str) -> None:
    """A ``ConfigError`` if ``url`` carries a password beside the one of a password file."""
    if url_password(url):
        raise ConfigError(
            f"--redis-password-file: the Redis URL {safe_url(url)} carries a password too; "
            "give it in one place only"
        )


def url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None  # from_url names the malformed URL


def url_user(url: str) -> str | None:
    try:
        return urlsplit(url).username
    except ValueError:
        return None
