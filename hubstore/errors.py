"""Errors of the hub side's persistence: the hub store and the Redis leases.

``HubstoreError`` is the root; a caller that only cares "the lease is not
mine" catches ``LeaseRefusedError`` and reads ``.refusal`` for why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hubsync.core.errors import ConfigError, HubsyncError, RedisUnavailableError

if TYPE_CHECKING:
    from hubstore.leases.types import LeaseRefused


class HubstoreError(HubsyncError):
    """Root of every error the hub store and the lease client raise."""


class InvalidLeaseArgumentError(HubstoreError, ConfigError):
    """A resource name, holder id, TTL, token or proof is malformed; nothing was sent to Redis."""


class LeaseUnavailableError(HubstoreError, RedisUnavailableError):
    """Redis could not be reached, so nobody can say whether the lease is still ours."""


class LeaseRefusedError(HubstoreError):
    """Redis refused a lease operation; ``refused`` carries the typed refusal."""

    def __init__(self, refused: LeaseRefused) -> None:
        super().__init__(refused.describe())
        self.refused = refused

    @property
    def refusal(self) -> str:
        """The refusal code (``held``, ``superseded``, ``expired`` or ``missing``)."""
        return self.refused.refusal.value


class LeaseHeldError(LeaseRefusedError):
    """Another holder has a live lease on the resource (or the proof did not match)."""


class LeaseSupersededError(LeaseRefusedError):
    """The presented token is no longer current: a newer token has been issued."""


class LeaseExpiredError(LeaseRefusedError):
    """The lease's deadline (on Redis's clock) has passed; it is never resurrected."""


class LeaseMissingError(LeaseRefusedError):
    """There is no lease on the resource (never taken, or released)."""


class LeaseNotReplicatedError(LeaseRefusedError):
    """Granted on the Redis master but not confirmed by a replica in time (``WAIT``): not ours."""


class LeaseLostError(LeaseRefusedError):
    """An auto-renewing lease was lost (a renewal was refused or failed); every later fenced
    commit under it refuses. ``refused`` is None when Redis could not be reached."""

    def __init__(self, resource: str, token: int, refused: LeaseRefused | None) -> None:
        cause = refused.refusal.value if refused is not None else "renewal failed"
        HubstoreError.__init__(
            self,
            f"lease {resource!r} under token {token} was lost ({cause}); refusing to act under "
            "it. Acquire the lease again (a new token) before retrying.",
        )
        self.resource = resource
        self.token = token
        self.lost_refusal = refused

    @property
    def refusal(self) -> str:
        """The refusal code that lost the lease, or ``unavailable`` if Redis did not answer."""
        return self.lost_refusal.refusal.value if self.lost_refusal is not None else "unavailable"


class FencedWriteRefusedError(HubstoreError):
    """A write under a fencing token was refused: a newer token has been seen (``stale``), or
    this token with another holder (``not_holder``)."""

    def __init__(self, resource: str, token: int, highest: int, reason: str) -> None:
        why = "is not current" if reason == "stale" else "was written under by another holder"
        super().__init__(
            f"fenced write to {resource!r} refused ({reason}): token {token} {why}; "
            f"the highest token seen is {highest}. The lease was lost: stop and let the new "
            "holder act."
        )
        self.resource = resource
        self.token = token
        self.highest = highest
        self.reason = reason


class StoreError(HubstoreError):
    """The hub store (the database of sync events, presence and alerts) failed.

    A locked database or one of another schema raises the shared
    ``hubsync.core.errors.StoreBusyError`` or ``SchemaVersionError`` instead.
    """


class StoreOpenError(StoreError):
    """The hub database could not be opened or created at the given URL or path."""


class HubNotInitializedError(StoreError):
    """The hub store has no hub id yet (``hubsync hub init`` makes it), so it cannot enroll."""


class RuntimeNotEnrolledError(StoreError, ConfigError):
    """The runtime named was never enrolled on this hub."""


class ProjectMoveRefusedError(StoreError, ConfigError):
    """A project cannot be moved to the runtime named (see ``HubStore.move_project``)."""


class LeaseStateCorruptError(HubstoreError):
    """A lease hash holds a fence Redis cannot read; tokens could repeat, so nothing is granted.

    An operator must inspect ``hubsync:lease:{RES}`` and its ``:log`` stream (the
    highest token in the log is the fence to restore).
    """
