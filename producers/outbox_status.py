"""The outbox state of every project of one runtime's state directory, read-only.

What ``hubsync status --state-dir`` shows per local project: rows pending
(not yet acknowledged by the hub, sent or not), attempted (sent at least once,
awaiting an outcome), acked, conflict and rejected (parked: never resent, an
operator must look), and the age of the oldest pending row on this machine's
clock (rows are stamped with it at commit). ``pruned_outbox_rows`` and
``pruned_run_events`` count what the relay's retention has deleted so far, and
``pruned_at`` says when it last did.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from producers.registry import RuntimeRegistry
from producers.retention import PruneTotals


@dataclass(frozen=True, slots=True)
class LocalProjectStatus:
    """The outbox of one local project."""

    project_id: str
    hub_project: str
    store_path: str
    pending: int
    attempted: int
    acked: int
    conflict: int
    rejected: int
    total: int
    oldest_pending_age_seconds: float | None
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
    A project whose store file was never created shows zero rows.
    """
    moment = time.time() if now is None else now
    with RuntimeRegistry(state_dir, create=False) as registry:
        status = LocalStatus(state_dir=str(registry.state_dir), runtime_id=registry.runtime_id)
        for registration in registry.projects():
            counts = dict.fromkeys(("pending", "attempted", "acked", "conflict", "rejected"), 0)
            counts["total"] = 0
            age: float | None = None
            pruned = PruneTotals(0, 0, None)
            if registration.store_path.is_file():
                with registry.open_store(registration) as store:
                    counts = store.outbox_counts()
                    age = store.oldest_pending_age(moment)
                    pruned = store.prune_totals()
            status.projects.append(
                LocalProjectStatus(
                    project_id=registration.project_id,
                    hub_project=registration.hub_project,
                    store_path=str(registration.store_path),
                    pending=counts["pending"],
                    attempted=counts["attempted"],
                    acked=counts["acked"],
                    conflict=counts["conflict"],
                    rejected=counts["rejected"],
                    total=counts["total"],
                    oldest_pending_age_seconds=age,
                    pruned_outbox_rows=pruned.outbox_rows,
                    pruned_run_events=pruned.run_events,
                    pruned_at=pruned.pruned_at,
                )
            )
    return status
