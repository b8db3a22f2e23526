"""What a hub store's reads ask its backend for: which events (``EventFilter``), which page.

``HubStore.events``, ``runs`` and ``count_events`` take their filters as separate
arguments, with defaults; they hand the backend one of these instead, so each
backend reads its request from one value (``matches`` and ``past`` in memory,
``columns`` and ``after`` in SQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from hubstore.store import EventPosition, RunPosition, StoredEvent

P = TypeVar("P", "EventPosition", "RunPosition")
"""The position a listing pages by."""


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which stored events a read takes: those of ``hub_project``, ``project_id`` and ``run_id``,
    each where given (None: any)."""

    hub_project: str | None = None
    project_id: str | None = None
    run_id: str | None = None

    @property
    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """``(column, value)`` of each filter (the columns are ``StoredEvent``'s fields)."""
        return (
            ("hub_project", self.hub_project),
            ("project_id", self.project_id),
            ("run_id", self.run_id),
        )

    def matches(self, event: StoredEvent) -> bool:
        """Whether ``event`` has every value given."""
        return all(value is None or getattr(event, c) == value for c, value in self.columns)


@dataclass(frozen=True, slots=True)
class Page(Generic[P]):
    """One page of a listing (``events``, ``runs``) as a backend is asked for it: rows that
    ``of`` takes, past ``after`` in the listing's order, at most ``limit`` of them."""

    of: EventFilter
    after: P | None
    limit: int

    def past(self, position: P) -> bool:
        """Whether ``position`` comes after ``after`` (on this page or a later one)."""
        return self.after is None or position > self.after
