"""What a relay did: the one-line summary it logs at exit, and ``--json``'s document."""

from __future__ import annotations

from dataclasses import dataclass, field

from producers.relay.acks import AckStats
from producers.relay.sender import SenderStats


@dataclass
class RelaySummary:
    """What a relay did, for the one-line summary at exit and ``--json``."""

    runtime_id: str
    projects: int
    sender: SenderStats
    acks: AckStats
    outages: int
    seconds: float
    pending: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    """Projects whose store could not be read, with the reason (they were not synced)."""

    def line(self) -> str:
        """The one-line summary logged at shutdown."""
        unreadable = (
            f", {len(self.unreadable)} unreadable ({', '.join(sorted(self.unreadable))})"
            if self.unreadable
            else ""
        )
        return (
            f"relay {self.runtime_id}: {self.projects} projects, sent {self.sender.sent} "
            f"(resent {self.sender.resent}), acked {self.acks.acked}, conflict "
            f"{self.acks.conflict}, rejected {self.acks.rejected + self.sender.rejected_locally}, "
            f"foreign {self.acks.foreign}, contradicted {self.acks.contradicted}, "
            f"unverified outcomes entries {self.acks.unverified}, "
            f"Redis outages {self.outages}, "
            f"{self.pending} pending{unreadable}, in {self.seconds:.1f}s"
        )

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "runtime_id": self.runtime_id,
            "projects": self.projects,
            "sent": self.sender.sent,
            "resent": self.sender.resent,
            "acked": self.acks.acked,
            "conflict": self.acks.conflict,
            "rejected": self.acks.rejected + self.sender.rejected_locally,
            "foreign": self.acks.foreign,
            "contradicted": self.acks.contradicted,
            "unverified": self.acks.unverified,
            "redis_outages": self.outages,
            "pending": self.pending,
            "seconds": round(self.seconds, 3),
            "unreadable": dict(self.unreadable),
        } | self.extra
