"""The parts of a Redis URL and password file that make a ``RedisTarget``'s credentials.

A password comes from the URL or from a file, never both; messages name the URL through
``safe_url`` and the file by its path, never a password.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from hubsync.core.errors import ConfigError
from hubsync.core.settings import safe_url


def read_password_file(
    path: Path, option: str = "--redis-password-file", what: str = "the Redis password"
) -> str:
    """The secret a file holds (``what``, given by ``option``), surrounding whitespace
    dropped; ``ConfigError`` if none.

    The message names the file, never its content.
    """
    try:
        password = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            f"{option} {path}: cannot read it ({reason}); give a readable file holding {what}"
        ) from None
    if not password:
        raise ConfigError(f"{option} {path}: the file is empty; put {what} in it")
    return password


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
