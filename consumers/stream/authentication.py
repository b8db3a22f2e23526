"""Who wrote an entry: a hub worker's check of every event and presence beat before use.

An entry is authenticated when it has exactly its kind's fields
(``hubsync.core.entries.event_entry_field_set``: ``EVENT_ENTRY_FIELDS``, or
``TRACED_EVENT_ENTRY_FIELDS`` with a ``traceparent``; ``PRESENCE_ENTRY_FIELDS``) and its
``sig`` verifies under a key the hub enrolled for the runtime it names
(``hubsync.core.signing``), and authorised when that runtime is enrolled for the
hub project whose stream carried it. An event is authentic only as a whole:
besides, the hub project it signed is that stream's, and its ``event`` bytes are
the signed content (at most ``MAX_FIELD_BYTES``, their SHA-256 the signed
``content_hash``). Nothing else about an entry is looked at before that: an
entry that fails is dead-lettered with the reason below, raises a security
alert, and its runtime is told nothing (a forged or tampered copy must not be
able to park a genuine outbox row).

Keys come from the hub store's enrolled-runtimes table and are kept for
``ttl`` seconds, so verifying costs no store read per batch. A revocation
takes effect within ``ttl``; a re-key takes effect at once, because an entry
that fails under the cached keys makes the worker read the record again (at
most once per ``refresh_floor`` per runtime, so a flood of forgeries cannot
turn into a flood of store reads). With a ``RevocationCheck``, each record read
loses the keys Redis holds a verified revocation of (``hubsync:revocations``),
so a store restored from before a revocation cannot bring the key back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from consumers.stream.revocation_check import RevocationCheck
from hubstore.store import EnrolledRuntime, HubStore
from hubsync.core.canonical import content_hash
from hubsync.core.clock import utc_now
from hubsync.core.entries import (
    MAX_FIELD_BYTES,
    PRESENCE_ENTRY_FIELDS,
    SecurityReason,
    event_entry_field_set,
    field_set_problem,
)
from hubsync.core.names import validate_name
from hubsync.core.redis_values import printable
from hubsync.core.resync import RESYNC_REPORT_ENTRY_FIELDS, verify_resync_report
from hubsync.core.signing import (
    RuntimeKey,
    verify_event_entry,
    verify_presence_entry,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An entry that did not authenticate: why, and a one-line detail safe to print."""

    reason: SecurityReason
    detail: str


@dataclass(slots=True)
class _Cached:
    record: EnrolledRuntime | None
    keys: dict[bytes, RuntimeKey]
    loaded_at: float
    valid: list[RuntimeKey] | None
    """The keys an entry may be signed with, when that cannot change before the record is
    read again; None during a rotation's grace period (the wall clock decides, per entry)."""


VerifyFn = Callable[[list[RuntimeKey], Mapping[str, bytes]], RuntimeKey | None]


class RuntimeAuthenticator:
    """Verifies entries against the runtimes a hub store enrolled; caches their keys."""

    def __init__(
        self,
        store: HubStore,
        ttl: float = 5.0,
        refresh_floor: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = utc_now,
        revocations: RevocationCheck | None = None,
    ) -> None:
        self.store = store
        self.revocations = revocations
        self.ttl = ttl
        self.refresh_floor = refresh_floor
        self.clock = clock
        self.wall_clock = wall_clock
        self._cache: dict[str, _Cached] = {}
        self._names: dict[bytes, str] = {}  # runtime ids as read -> validated, as in _runtime_id

    def event(self, fields: Mapping[str, bytes], hub_project: str) -> RuntimeKey | Refusal:
        """The key that signed this event entry, bytes and all, or why it is refused."""
        problem = field_set_problem(fields, event_entry_field_set(fields))
        if problem is not None:
            return _unauthenticated(problem, fields)
        key = self._check(fields, hub_project, verify_event_entry)
        if isinstance(key, Refusal):
            return key
        problem = _unsigned_content(fields, hub_project)
        return key if problem is None else _unauthenticated(problem, fields)

    def presence(self, fields: Mapping[str, bytes], hub_project: str) -> RuntimeKey | Refusal:
        """The key that signed this presence beat, or why it is refused."""
        problem = field_set_problem(fields, PRESENCE_ENTRY_FIELDS)
        if problem is not None:
            return _unauthenticated(problem, fields)
        return self._check(fields, hub_project, verify_presence_entry)

    def resync_report(self, fields: Mapping[str, bytes], hub_project: str) -> RuntimeKey | Refusal:
        """The key that signed this resync report, or why it is refused."""
        problem = field_set_problem(fields, RESYNC_REPORT_ENTRY_FIELDS)
        if problem is not None:
            return _unauthenticated(problem, fields)
        return self._check(fields, hub_project, verify_resync_report)

    def cached_keys(self, hub_project: str, raw_runtime_id: bytes) -> list[RuntimeKey] | None:
        """The keys an event entry naming ``raw_runtime_id`` (as read) may be signed with,
        from the keys already cached; None when ``event`` must decide (and say why).

        Only a runtime id ``event`` has seen before (its name checked there), keys that
        cannot change with the wall clock (no rotation's grace running) and a runtime
        enrolled for ``hub_project`` get an answer here, so a None costs nothing but the
        general path: no key is re-read on its account. The consumer's fast path
        (``consumers.stream.fast_event_check``) verifies the signature under these keys.
        """
        runtime_id = self._names.get(raw_runtime_id)
        if runtime_id is None:
            return None
        cached = self._lookup(runtime_id, refresh=False)
        if not cached.valid or cached.record is None or not cached.record.may_write(hub_project):
            return None
        return cached.valid

    def _check(
        self, fields: Mapping[str, bytes], hub_project: str, verify: VerifyFn
    ) -> RuntimeKey | Refusal:
        raw_id = fields.get("runtime_id")
        runtime_id = self._names.get(raw_id) if raw_id is not None else None
        if runtime_id is None:
            runtime_id = _runtime_id(raw_id)
            if runtime_id is not None and raw_id is not None:
                if len(self._names) >= _MAX_CACHED:
                    self._names.clear()
                self._names[raw_id] = runtime_id
        if runtime_id is None:
            return Refusal(SecurityReason.UNAUTHENTICATED, "the entry names no valid runtime id")
        if "sig" not in fields:
            return Refusal(
                SecurityReason.UNAUTHENTICATED,
                f"the entry is not signed (claims runtime {runtime_id})",
            )
        cached = self._lookup(runtime_id, refresh=False)
        key = self._verify(cached, fields, verify)
        if key is None and self._may_refresh(cached):
            # A key enrolled since the cache was filled (a re-key, a new runtime).
            cached = self._lookup(runtime_id, refresh=True)
            key = self._verify(cached, fields, verify)
        if key is None:
            return Refusal(SecurityReason.UNAUTHENTICATED, _why_not(cached.record, runtime_id))
        record = cached.record
        if record is None or not record.may_write(hub_project):
            return Refusal(
                SecurityReason.NOT_ENROLLED,
                f"runtime {runtime_id} is not enrolled for hub project {hub_project}",
            )
        return key

    def _verify(
        self, cached: _Cached, fields: Mapping[str, bytes], verify: VerifyFn
    ) -> RuntimeKey | None:
        valid = cached.valid
        if valid is None:
            if cached.record is None:
                return None
            valid = [cached.keys[secret] for secret in cached.record.keys_at(self.wall_clock())]
        return verify(valid, fields) if valid else None

    def _may_refresh(self, cached: _Cached) -> bool:
        return self.clock() - cached.loaded_at >= self.refresh_floor

    def _lookup(self, runtime_id: str, refresh: bool) -> _Cached:
        now = self.clock()
        cached = self._cache.get(runtime_id)
        if cached is not None and not refresh and now - cached.loaded_at < self.ttl:
            return cached
        record = self.store.enrolled_runtime(runtime_id)
        if record is not None and self.revocations is not None:
            record = self.revocations.apply(record, self.wall_clock())
        keys: dict[bytes, RuntimeKey] = {}
        if record is not None:
            for secret in (record.key, record.previous_key):
                if secret is not None:
                    # Reuse the keyed HMAC contexts of a key already cached.
                    known = cached.keys.get(secret) if cached is not None else None
                    keys[secret] = known or RuntimeKey(secret)
        fresh = _Cached(record, keys, now, self._fixed_keys(record, keys))
        if len(self._cache) >= _MAX_CACHED and runtime_id not in self._cache:
            self._cache.clear()  # forged runtime ids must not grow the cache without bound
        self._cache[runtime_id] = fresh
        return fresh

    def _fixed_keys(
        self, record: EnrolledRuntime | None, keys: dict[bytes, RuntimeKey]
    ) -> list[RuntimeKey] | None:
        """The record's valid keys if no grace period can end while it is cached, else None."""
        if record is None:
            return []
        secrets = record.keys_at(self.wall_clock())
        return None if len(secrets) > 1 else [keys[secret] for secret in secrets]


_MAX_CACHED = 10_000


def _runtime_id(raw: bytes | None) -> str | None:
    if raw is None or len(raw) > 256:
        return None
    try:
        return validate_name(raw.decode("utf-8"), "runtime id")
    except (UnicodeDecodeError, ValueError):
        return None


def _unsigned_content(fields: Mapping[str, bytes], hub_project: str) -> str | None:
    """Why a validly signed event entry is still not authentic as a whole, or None: it was
    signed for another hub project's stream, or its bytes are not the signed content."""
    if fields["hub_project"] != hub_project.encode():
        return f"it was signed for another hub project than {hub_project}'s stream"
    data = fields["event"]
    if len(data) > MAX_FIELD_BYTES:
        # a relay never sends such bytes: not worth hashing to tell
        return f"its event bytes are {len(data)} bytes, over {MAX_FIELD_BYTES}"
    if content_hash(data).encode() != fields["content_hash"]:
        return "its event bytes are not the signed content (their hash is not content_hash)"
    return None


def _unauthenticated(problem: str, fields: Mapping[str, bytes]) -> Refusal:
    claimed = printable(fields.get("runtime_id", b"")[:200].decode("utf-8", "replace"))
    return Refusal(SecurityReason.UNAUTHENTICATED, f"{problem} (claims runtime {claimed!r})")


def _why_not(record: EnrolledRuntime | None, runtime_id: str) -> str:
    shown = printable(runtime_id)
    if record is None:
        return f"runtime {shown} is not enrolled on this hub"
    if not record.key:
        return f"runtime {shown} is revoked"
    return f"the signature does not verify under runtime {shown}'s keys"
