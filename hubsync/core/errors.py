"""The root of every error hubsync raises, and the errors the shared core raises.

Each package has its own root below ``HubsyncError`` (``producers.errors``,
``consumers.errors``, ``hubstore.errors``) so a caller can catch at the depth
it cares about. Messages say what was wrong and what to do; they never carry
event bytes or secret values.
"""

from __future__ import annotations


class HubsyncError(Exception):
    """Root of every hubsync error."""


class ConfigError(HubsyncError, ValueError):
    """A setting or argument is invalid; the message names it and the accepted form."""


class WireError(HubsyncError, ValueError):
    """Bytes or fields from the wire do not form a valid hubsync message.

    ``reason`` is a short stable code (``bad_json``, ``hash_mismatch``, ...) used
    as the dead-letter reason; the message is the human explanation.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.detail = message


class RedisUnavailableError(HubsyncError, ConnectionError):
    """Redis cannot be reached (down, loading, read-only replica). Exit code 3 in the CLI."""


class RedisCredentialsError(HubsyncError):
    """Redis refused the user and password the process gave (or asked for one none was given).

    Not a ``RedisUnavailableError``: waiting never fixes it. Exit code 1 in the
    CLI; the message names the user and the URL without its password.
    """


class MissingDependencyError(HubsyncError):
    """An optional part of hubsync is not installed (the PostgreSQL driver, for a
    ``postgresql://`` hub URL); the message names the ``pip install`` that adds it.
    Exit code 1 in the CLI: nothing was opened or written."""


class StoreBusyError(HubsyncError):
    """A SQLite file stayed locked by other writers past its busy budget; nothing was written."""


class SchemaVersionError(HubsyncError):
    """A database has no schema, another schema version, or is not hubsync's; it is left untouched.

    Files are refused, never reshaped: the message says which version was found
    and what to do (use a matching hubsync, create the schema, or another path).
    """


class UnsafeFileError(HubsyncError):
    """A file hubsync keeps private (a key's, a store's) is a symbolic link, not a regular file,
    or open to group or others and not this user's to tighten; nothing was opened or written.

    The message names the path and its real mode or link target. Exit code 1 in the CLI.
    """
