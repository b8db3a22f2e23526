"""The relay's enrollment: the key it signs with and the hub whose outcomes it believes.

A runtime syncs only once its hub has enrolled it and it has joined
(``hubsync runtime join`` keeps the token in the registry). The relay reads
that enrollment at start and again every project refresh, so a join (or a
re-key) takes effect without a restart:

* not joined yet: it says so once and sends nothing (rows wait in the outbox,
  and go out signed once it has joined);
* a project whose hub project the enrollment does not name: said once, not
  sent (the hub would refuse every entry as ``not_enrolled``);
* outcomes are applied only when signed with this runtime's key and naming the
  hub id the enrollment came from (the hub the runtime pinned when it joined).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from hubsync.core.enrollment import Enrollment
from hubsync.core.signing import RuntimeKey
from producers.registry import RuntimeRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Credentials:
    """One enrollment in the form the relay uses it: the key (with its HMAC contexts ready)."""

    hub_id: str
    hub_projects: frozenset[str]
    key: RuntimeKey

    @classmethod
    def of(cls, enrollment: Enrollment) -> Credentials:
        """The credentials an enrollment gives."""
        return cls(
            enrollment.hub_id, frozenset(enrollment.hub_projects), RuntimeKey(enrollment.key)
        )


class RelayCredentials:
    """The current enrollment of a runtime, re-read from its registry on ``refresh``.

    Shared by the relay's threads: ``current`` is one attribute read, and
    ``refresh`` replaces it whole.
    """

    def __init__(self, registry: RuntimeRegistry) -> None:
        self._registry = registry
        self._current: Credentials | None = None
        self._said_not_enrolled = False
        self._said_not_for: set[str] = set()
        self._lock = threading.Lock()

    @property
    def current(self) -> Credentials | None:
        """The enrollment in force, or None before the runtime joined a hub."""
        return self._current

    def refresh(self) -> Credentials | None:
        """Read the registry's enrollment again; say once when there is none."""
        enrollment = self._registry.enrollment()
        current = self._current
        if enrollment is None:
            self._current = None
            if not self._said_not_enrolled:
                self._said_not_enrolled = True
                runtime_id = self._registry.runtime_id
                log.warning(
                    "relay %s: this runtime is not enrolled with a hub, so nothing is sent; on "
                    "the hub run `hubsync enroll %s --hub-project P ...`, then here `hubsync "
                    "runtime join --state-dir %s -` with the token it prints (the outbox keeps "
                    "every event until then)",
                    runtime_id,
                    runtime_id,
                    self._registry.state_dir,
                )
            return None
        if (
            current is None
            or current.hub_id != enrollment.hub_id
            or current.hub_projects != frozenset(enrollment.hub_projects)
            or current.key.reveal() != enrollment.key
        ):
            current = Credentials.of(enrollment)
            self._current = current
            with self._lock:
                self._said_not_for.clear()
            if self._said_not_enrolled:
                log.info(
                    "relay %s: enrolled with hub %s; sending",
                    self._registry.runtime_id,
                    current.hub_id,
                )
            self._said_not_enrolled = False
        return current

    def signer_for(self, hub_project: str) -> RuntimeKey | None:
        """The key to sign entries for ``hub_project`` with, or None (said once) when the
        runtime may not write there."""
        current = self._current
        if current is None:
            return None
        if hub_project in current.hub_projects:
            return current.key
        with self._lock:
            if hub_project in self._said_not_for:
                return None
            self._said_not_for.add(hub_project)
        log.warning(
            "relay %s: this runtime is not enrolled for hub project %s, so its projects that sync "
            "there are not sent; enroll it for that hub project too (hubsync enroll %s "
            "--hub-project %s ...) and join with the new token",
            self._registry.runtime_id,
            hub_project,
            self._registry.runtime_id,
            hub_project,
        )
        return None
