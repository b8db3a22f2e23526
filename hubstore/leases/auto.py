"""``AutoRenewingLease``: a lease kept alive by a background thread that never fails silently.

The thread renews at a fraction of the TTL. The first renewal that is refused
(or that cannot reach Redis) marks the lease lost, calls the owner's
``on_lost`` callback at once from that thread, and stops; from then on every
fenced commit through this object raises ``LeaseLostError``. Leaving the
``with`` block stops the thread, joins it, and only then releases, so no
renewal can ever follow the release.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self, TypedDict, Unpack

from hubstore.errors import LeaseLostError
from hubstore.leases.client import LeaseClient
from hubstore.leases.types import FencedWrite, Lease, LeaseRefused
from hubsync.core.closing import ClosesOnExit
from hubsync.core.errors import HubsyncError

log = logging.getLogger(__name__)

DEFAULT_RENEW_FRACTION = 1 / 3
"""Renew after a third of the TTL: two renewals can fail to arrive before the deadline."""

LostCallback = Callable[[LeaseLostError], None]


class Renewal(TypedDict, total=False):
    """The options of an ``AutoRenewingLease`` (its constructor's keyword arguments)."""

    on_lost: LostCallback | None
    on_renewed: Callable[[Lease], None] | None
    renew_fraction: float


class AutoRenewingLease(ClosesOnExit):
    """A granted lease plus the thread that renews it; use as a context manager.

    ``on_lost(error)`` is called once, from the renewal thread, the moment a
    renewal is refused or fails. ``on_renewed(lease)`` runs after each good
    renewal (effects use it to refresh their ledger heartbeat); if it raises,
    the lease is treated as lost, because the owner can no longer vouch for it.
    """

    def __init__(
        self,
        client: LeaseClient,
        lease: Lease,
        *,
        on_lost: LostCallback | None = None,
        on_renewed: Callable[[Lease], None] | None = None,
        renew_fraction: float = DEFAULT_RENEW_FRACTION,
    ) -> None:
        if not 0.05 <= renew_fraction <= 0.9:
            raise ValueError("renew_fraction must be within 0.05..0.9 of the TTL")
        self.client = client
        self._lease = lease
        self._on_lost = on_lost
        self._on_renewed = on_renewed
        self._interval = lease.ttl_ms * renew_fraction / 1000
        self._lost: LeaseLostError | None = None
        self._closed = False
        self._stop = threading.Event()
        # Held across each renewal and across release, so a release never races a renewal.
        self._lock = threading.Lock()
        self._lost_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-renew:{lease.resource}", daemon=True
        )
        self.renewals = 0

    @classmethod
    def hold(
        cls,
        client: LeaseClient,
        resource: str,
        holder: str,
        ttl_ms: int,
        **options: Unpack[Renewal],
    ) -> AutoRenewingLease:
        """Acquire ``resource`` (raising ``LeaseHeldError`` if taken) and wrap it, with the
        constructor's ``options``."""
        granted = client.acquire_or_raise(resource, holder, ttl_ms)
        return cls(client, granted.lease, **options)

    # -- state -------------------------------------------------------------------------

    @property
    def lease(self) -> Lease:
        """The lease as of the last good renewal."""
        return self._lease

    @property
    def lost(self) -> LeaseLostError | None:
        """Why the lease was lost, or None while it is held."""
        return self._lost

    @property
    def renewing(self) -> bool:
        """Whether the renewal thread is running."""
        return self._thread.is_alive()

    def ensure_held(self) -> Lease:
        """Raise ``LeaseLostError`` unless the lease is still current on Redis right now.

        Call it immediately before a commit: it re-presents the token (a Lua check),
        so a lease lost while the thread slept is caught here too.
        """
        self._raise_if_lost()
        try:
            result = self.client.check(self._lease)
        except HubsyncError:
            raise self._mark_lost(None) from None
        if isinstance(result, LeaseRefused):
            raise self._mark_lost(result)
        return self._lease

    def fenced_write(self, name: str, value: bytes | str) -> FencedWrite:
        """A fenced write under this lease's token; refuses at once if the lease was lost."""
        self._raise_if_lost()
        return self.client.fenced_write(self._lease, name, value)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Start the renewal thread (``__enter__`` does this)."""
        self._thread.start()
        return self

    def close(self, *, release: bool = True) -> None:
        """Stop and join the renewal thread, then release the lease unless it was lost."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if release and self._lost is None:
                try:
                    self.client.release(self._lease)
                except HubsyncError as exc:
                    # The deadline frees it on Redis's clock; nothing the owner can do now.
                    log.warning("lease %s: release failed: %s", self._lease.resource, exc)

    def __enter__(self) -> Self:
        return self.start()

    # -- internals -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if self._closed or self._stop.is_set():
                    return
                if not self._renew_once():
                    return

    def _renew_once(self) -> bool:
        try:
            result = self.client.renew(self._lease)
        except HubsyncError as exc:
            log.warning("lease %s: renewal failed: %s", self._lease.resource, exc)
            self._mark_lost(None)
            return False
        if isinstance(result, LeaseRefused):
            log.warning("lease %s: renewal refused: %s", self._lease.resource, result.refusal)
            self._mark_lost(result)
            return False
        self._lease = result.lease
        self.renewals += 1
        if self._on_renewed is not None:
            try:
                self._on_renewed(self._lease)
            except Exception:
                log.exception("lease %s: on_renewed failed", self._lease.resource)
                self._mark_lost(None)
                return False
        return True

    def _raise_if_lost(self) -> None:
        if self._lost is not None:
            raise self._lost

    def _mark_lost(self, refused: LeaseRefused | None) -> LeaseLostError:
        with self._lost_lock:  # the thread and ensure_held may both find the loss
            if self._lost is not None:
                return self._lost
            lost = self._lost = LeaseLostError(self._lease.resource, self._lease.token, refused)
        self._stop.set()
        if self._on_lost is not None:
            try:
                self._on_lost(lost)
            except Exception:
                log.exception("lease %s: on_lost callback failed", self._lease.resource)
        return lost
