"""The typed results of lease operations: what was granted, what was refused and why.

Refusals are values, not exceptions, on the plain methods of ``LeaseClient``
(callers on a hot path branch on ``.ok``); the ``*_or_raise`` variants turn a
``LeaseRefused`` into the matching ``LeaseRefusedError`` subclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class LeaseRefusal(StrEnum):
    """Why Redis did not grant, renew, release or confirm a lease."""

    HELD = "held"
    """Another holder's live lease, or the holder's name presented without its proof."""
    SUPERSEDED = "superseded"
    """A newer token has been issued since the presented one."""
    EXPIRED = "expired"
    """The deadline passed on Redis's clock (or could not be read); it is never resurrected."""
    MISSING = "missing"
    """No lease on the resource: never taken, or released."""
    NOT_REPLICATED = "not_replicated"
    """Granted or renewed on the master, but no replica confirmed it in time (``WAIT``): a
    failover could lose it, so it is not reported granted (and was given back if possible)."""


class LeaseTransition(StrEnum):
    """What a granted operation did (also the ``event`` of the audit stream entry)."""

    ACQUIRED = "acquired"
    TAKEN_OVER = "taken_over"
    RENEWED = "renewed"
    RELEASED = "released"


class LeaseState(StrEnum):
    """What ``show`` found on a resource."""

    FREE = "free"
    LIVE = "live"
    EXPIRED = "expired"


@dataclass(frozen=True)
class Lease:
    """What a holder keeps to act under a lease: who, which resource, which token, the proof.

    ``proof`` is the secret only this holder knows (Redis keeps its SHA-1); it is
    left out of ``repr`` so it never lands in a log line by accident.
    """

    resource: str
    holder: str
    token: int
    proof: str = field(repr=False)
    deadline_ms: int = 0
    """Deadline on Redis's clock (ms since the epoch) as of the last grant."""
    ttl_ms: int = 0


@dataclass(frozen=True)
class LeaseGranted:
    """Acquire or renew succeeded; ``lease`` is what to present next time."""

    lease: Lease
    transition: LeaseTransition
    redis_now_ms: int
    ok: Literal[True] = True

    @property
    def remaining_ms(self) -> int:
        """Milliseconds left before the deadline, on Redis's clock at the time of the grant."""
        return max(0, self.lease.deadline_ms - self.redis_now_ms)


@dataclass(frozen=True)
class LeaseReleased:
    """Release succeeded; the resource is free and its fence kept."""

    resource: str
    token: int
    redis_now_ms: int
    ok: Literal[True] = True


@dataclass(frozen=True)
class LeaseCurrent:
    """``check`` confirmed the lease is live under exactly this token, holder and proof."""

    resource: str
    token: int
    deadline_ms: int
    redis_now_ms: int
    ok: Literal[True] = True


@dataclass(frozen=True)
class LeaseRefused:
    """A refusal: ``refusal`` says why; ``holder``/``token``/``deadline_ms`` describe the
    lease currently on the resource ("" / 0 / 0 when there is none)."""

    resource: str
    refusal: LeaseRefusal
    holder: str
    token: int
    deadline_ms: int
    redis_now_ms: int
    presented_token: int | None = None
    ok: Literal[False] = False

    def describe(self) -> str:
        """One human line saying what happened and what to do."""
        presented = "" if self.presented_token is None else f"token {self.presented_token} "
        if self.refusal is LeaseRefusal.HELD:
            left = max(0, self.deadline_ms - self.redis_now_ms)
            return (
                f"lease {self.resource!r} {presented}refused: held by {self.holder!r} under token "
                f"{self.token} for {left} ms more (or the proof did not match); wait or pick "
                "another resource"
            )
        if self.refusal is LeaseRefusal.SUPERSEDED:
            return (
                f"lease {self.resource!r} {presented}refused: superseded, a newer token has been "
                "issued; the lease is lost, stop acting on it"
            )
        if self.refusal is LeaseRefusal.EXPIRED:
            return (
                f"lease {self.resource!r} {presented}refused: expired on Redis's clock; acquire "
                "it again (a new token) before acting"
            )
        if self.refusal is LeaseRefusal.NOT_REPLICATED:
            return (
                f"lease {self.resource!r} {presented}refused: not replicated, no replica of the "
                "Redis master confirmed the grant in time (a failover could lose it), so it was "
                "given back; try again, and check the master's replicas if it persists"
            )
        return (
            f"lease {self.resource!r} {presented}refused: missing, no lease is held on it; "
            "acquire it first"
        )


@dataclass(frozen=True)
class LeaseInfo:
    """A read-only view of one resource's lease (``show`` and ``list``); never the proof."""

    resource: str
    state: LeaseState
    holder: str | None
    token: int | None
    fence: int
    """Highest token ever issued on the resource; the next one is ``fence + 1``."""
    deadline_ms: int | None
    remaining_ms: int
    redis_now_ms: int
    acquired_ms: int | None = None
    ttl_ms: int | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict (for ``--json``)."""
        return {
            "resource": self.resource,
            "state": self.state.value,
            "holder": self.holder,
            "token": self.token,
            "fence": self.fence,
            "deadline_ms": self.deadline_ms,
            "remaining_ms": self.remaining_ms,
            "acquired_ms": self.acquired_ms,
            "ttl_ms": self.ttl_ms,
            "redis_now_ms": self.redis_now_ms,
        }


@dataclass(frozen=True)
class FencedWrite:
    """Outcome of a fenced write: ``status`` is ``written``, ``stale``, ``superseded``,
    ``unknown_token`` or ``not_holder`` (current token, but not its holder's proof);
    ``highest`` is the largest token the resource or its lease has seen."""

    resource: str
    name: str
    token: int
    status: str
    highest: int

    @property
    def ok(self) -> bool:
        """True when the value was stored."""
        return self.status == "written"


__all__ = [
    "FencedWrite",
    "Lease",
    "LeaseCurrent",
    "LeaseGranted",
    "LeaseInfo",
    "LeaseRefusal",
    "LeaseRefused",
    "LeaseReleased",
    "LeaseState",
    "LeaseTransition",
]
