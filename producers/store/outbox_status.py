"""The outbox state of every project of one runtime's state directory, read-only.

What ``hubsync status --state-dir`` shows per local project: rows pending
(not yet acknowledged by the hub, sent or not), attempted (sent at least once,
awaiting an outcome), acked, conflict and rejected (parked: never resent, an
operator must look), and the age of the oldest pending row on this machine's
clock (rows are stamped with it at commit).

Each project has a state: ``ok``; ``no_store`` (no store file yet: nothing
appended, or the file was removed; zero rows, truly); or ``unreadable``, with
the reason and no counts (None, never zeros: a refused store is not an empty
one). One unreadable store never hides the others. ``pruned_outbox_rows`` and
``pruned_run_events`` count what the relay's retention has deleted so far, and
``pruned_at`` says when it last did.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from producers.registry import ProjectRegistration, RuntimeRegistry
from producers.store.retention import PruneTotals
from producers.store.unreadable import UNREADABLE_STORE_ERRORS, unreadable_reason

COUNTS = ("pending", "attempted", "acked", "conflict", "rejected", "total")


@dataclass(frozen=True, slots=True)
class LocalProjectStatus:
    """The outbox of one local project; the counts are None when its store is unreadable."""

    project_id: str
    hub_project: str
    store_path: str
    pending: int | None
    attempted: int | None
    acked: int | None
    conflict: int | None
    rejected: int | None
    total: int | None
    oldest_pending_age_seconds: float | None
    state: str = "ok"
    """``ok``, ``no_store`` or ``unreadable``."""
    reason: str | None = None
    """Why the store is unreadable, naming its file."""
    pruned_outbox_rows: int = 0
    pruned_run_events: int = 0
    pruned_at: float | None = None


@dataclass
class LocalStatus:
    """Every project of one runtime."""

    state_dir: str
    runtime_id: str
    projects: list[LocalProjectStatus] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def local_status(state_dir: Path | str, now: float | None = None) -> LocalStatus:
    """The outbox state of every project registered in ``state_dir``.

    Refuses (``StateDirNotFoundError``, a usage error) a directory without a
    registry rather than creating one: a typo must not look like an idle runtime.
    A project whose store file does not exist shows state ``no_store`` and
    zero rows; one whose store cannot be read, state ``unreadable``.
    """
    moment = time.time() if now is None else now
    with RuntimeRegistry(state_dir, create=False) as registry:
        status = LocalStatus(state_dir=str(registry.state_dir), runtime_id=registry.runtime_id)
        for registration in registry.projects():
            status.projects.append(_project_status(registry, registration, moment))
    return status


def _project_status(
    registry: RuntimeRegistry, registration: ProjectRegistration, moment: float
) -> LocalProjectStatus:
    counts: dict[str, int | None] = dict.fromkeys(COUNTS, 0)
    age: float | None = None
    pruned = PruneTotals(0, 0, None)
    state, reason = "ok", None
    path = registration.store_path
    if not path.exists():
        state = "no_store"
    else:
        try:
            with registry.open_store(registration) as store:
                counts.update(store.outbox_counts())
                age = store.oldest_pending_age(moment)
                pruned = store.prune_totals()
        except UNREADABLE_STORE_ERRORS as exc:
            counts = dict.fromkeys(COUNTS, None)
            state, reason = "unreadable", unreadable_reason(exc, path)
    return LocalProjectStatus(
        project_id=registration.project_id,
        hub_project=registration.hub_project,
        store_path=str(path),
        pending=counts["pending"],
        attempted=counts["attempted"],
        acked=counts["acked"],
        conflict=counts["conflict"],
        rejected=counts["rejected"],
        total=counts["total"],
        oldest_pending_age_seconds=age,
        state=state,
        reason=reason,
        pruned_outbox_rows=pruned.outbox_rows,
        pruned_run_events=pruned.run_events,
        pruned_at=pruned.pruned_at,
    )
