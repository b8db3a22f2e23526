"""Deprecated for one release: ``producers.store.event_store`` is the event store's path."""

from hubsync.core.moved import warn_moved
from producers.store.event_store import NewEvent, RunEventStore

warn_moved("producers.event_store", "producers.store.event_store")
__all__ = ["NewEvent", "RunEventStore"]
