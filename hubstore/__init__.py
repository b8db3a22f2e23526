"""The hub store: where the hub keeps every accepted event, and the leases of shared effects.

``open_store(url)`` opens a hub store by URL; ``sqlite:///PATH`` is the one
backend so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hubsync.errors import ConfigError

if TYPE_CHECKING:
    from hubstore.store import HubStore


def open_store(url: str) -> HubStore:
    """The hub store at ``url`` (``sqlite:///PATH``); another scheme is a ``ConfigError``."""
    from hubstore.sqlite_store import SqliteHubStore

    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix:
        raise ConfigError(
            f"--hub-url: {url.split(':', 1)[0]!r} is not a hub store URL; use sqlite:///PATH"
        )
    return SqliteHubStore(url.removeprefix(prefix))
