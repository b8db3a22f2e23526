"""Errors of the hub consumer workers (``consumers``).

``ConsumerError`` is the root; the CLI turns ``ConsumerUnhealthyError`` into
exit code 1 for ``hubsync consume --check``.
"""

from __future__ import annotations

from hubsync.errors import HubsyncError


class ConsumerError(HubsyncError):
    """Root of every error the hub consumer workers raise."""


class ConsumerUnhealthyError(ConsumerError):
    """A consumer's health key is missing or expired: the worker is dead, stuck or never ran."""
