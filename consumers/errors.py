"""Errors of the hub consumer workers (``consumers``).

``ConsumerError`` is the root; the CLI turns ``ConsumerUnhealthyError`` into
exit code 1 for ``hubsync consume --check``.
"""

from __future__ import annotations

from hubsync.core.errors import ConfigError, HubsyncError


class ConsumerError(HubsyncError):
    """Root of every error the hub consumer workers raise."""


class ConsumerUnhealthyError(ConsumerError):
    """A consumer's health key is missing or expired: the worker is dead, stuck or never ran."""


class ConsumerNameTakenError(ConsumerError, ConfigError):
    """Another live consumer holds the name (its health key is fresh): exit 2, naming its pid
    and host. Two workers of one name would share one pending list and recover each other's
    entries as their own."""


class UnknownHubProjectError(ConsumerError, ConfigError):
    """An operator named a hub project that has no stream (exit code 2 in the CLI)."""


class DeadLetterNotFoundError(ConsumerError):
    """A dead-letter id given by the operator is not on the project's dead-letter stream."""


class DeadLetterNotReplayableError(ConsumerError):
    """A dead letter cannot be replayed: its original fields were cut when it was recorded."""
