"""Deprecated: ``producers.event_store`` moved to ``producers.store.event_store``.

This module re-exports it, with a ``DeprecationWarning``, for one release; import
``producers.store.event_store`` instead.
"""

import warnings

from producers.store.event_store import NewEvent, RunEventStore

warnings.warn(
    "producers.event_store moved to producers.store.event_store; import it from there",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["NewEvent", "RunEventStore"]
