"""``LeaseClient``: fenced leases in Redis, each operation decided inside one function of
hubsync's Redis Functions library (``hubstore.redis_functions``).

Semantics (docs/contract.md, "Lease semantics"):

* acquire: a free resource gets a new token (INCR of its counter); the holder's own live
  lease, presented with its proof, is renewed under the same token; an expired
  lease (anyone's, or one whose deadline cannot be read) is taken over with a new
  token; any other live lease refuses ``held``.
* renew / release / check: only the holder, with its proof and the current token.
  Renewal never changes the token and never resurrects an expired lease.
* Tokens strictly increase per resource for the life of the dataset: the counter
  is apart from the hash and only ever INCRed.
* Deadlines are Redis ``TIME`` + TTL, so a client's clock never matters.
* The proof secret is generated here; the library's functions keep only its SHA-1,
  computed inside Redis from the secret presented, so a digest read from Redis proves
  nothing.
* Tokens come from ``hubsync:lease:{RES}:counter``, a string the functions only INCR.
* Every transition is appended to ``hubsync:lease:{RES}:log`` in the same function.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import redis

from hubstore.errors import (
    InvalidLeaseArgumentError,
    LeaseExpiredError,
    LeaseHeldError,
    LeaseMissingError,
    LeaseNotReplicatedError,
    LeaseRefusedError,
    LeaseStateCorruptError,
    LeaseSupersededError,
    LeaseUnavailableError,
)
from hubstore.leases import args as lease_args
from hubstore.leases.replication import ReplicatedCalls
from hubstore.leases.types import (
    FencedWrite,
    Lease,
    LeaseCurrent,
    LeaseGranted,
    LeaseInfo,
    LeaseRefusal,
    LeaseRefused,
    LeaseReleased,
    LeaseState,
    LeaseTransition,
)
from hubstore.redis_functions import functions_for
from hubsync.core import keys, metrics
from hubsync.core.connections import CLUSTER_UNAVAILABLE_ERRORS, RedisClient, is_cluster
from hubsync.core.redis_values import as_text, redis_now_ms

log = logging.getLogger(__name__)

DEFAULT_LOG_MAXLEN = 1000
"""Approximate cap of each lease's audit stream (``XADD MAXLEN ~``)."""
PROOF_BYTES = 32
"""Entropy of a proof secret (``secrets.token_urlsafe``)."""
DEFAULT_REPLICA_WAIT_MS = 1000
"""Longest a grant or renewal waits for one replica to confirm it (``WAIT 1``), capped at half
the lease's TTL; past it the operation is refused ``not_replicated``."""
_REFUSED_ERRORS: dict[LeaseRefusal, type[LeaseRefusedError]] = {
    LeaseRefusal.HELD: LeaseHeldError,
    LeaseRefusal.SUPERSEDED: LeaseSupersededError,
    LeaseRefusal.EXPIRED: LeaseExpiredError,
    LeaseRefusal.MISSING: LeaseMissingError,
    LeaseRefusal.NOT_REPLICATED: LeaseNotReplicatedError,
}

T = TypeVar("T")


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    text = as_text(value)
    return int(text) if text.isdigit() else None


_UNAVAILABLE: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.ReadOnlyError,
    *CLUSTER_UNAVAILABLE_ERRORS,  # a cluster mid-failover: CLUSTERDOWN, TRYAGAIN...
)
"""What makes a lease's state unknown until Redis answers again."""


@contextmanager
def _redis_errors(resource: str) -> Iterator[None]:
    """Translate redis-py's errors into the hub store's own hierarchy."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise LeaseUnavailableError(
            f"Redis did not answer about lease {resource!r} ({type(exc).__name__}); whether "
            "it is still held is unknown until Redis answers"
        ) from exc
    except redis.ResponseError as exc:
        if "hubsync corrupt fence" in str(exc):
            raise LeaseStateCorruptError(
                f"lease {resource!r} has an unreadable token counter (not an integer of at most "
                f"{lease_args.MAX_TOKEN}); restore {keys.lease_counter(resource)} from the "
                f"highest token in {keys.lease_log(resource)} before using the resource"
            ) from exc
        if "hubsync unmigrated fence" in str(exc):
            raise LeaseStateCorruptError(
                f"lease {resource!r} keeps its fence the way an older hubsync did; run "
                "`hubsync hub migrate --hub-url URL --redis-url REDIS_URL` (it moves every "
                "fence into its token counter) before using the resource"
            ) from exc
        if "hubsync tokens exhausted" in str(exc):
            raise LeaseStateCorruptError(
                f"lease {resource!r} has issued token {lease_args.MAX_TOKEN}, the largest one "
                "that stays exact; no larger token is granted. Use a resource of another name"
            ) from exc
        raise


def _lease_keys(resource: str) -> list[str]:
    """KEYS of the granting and releasing functions: the hash, its audit log, its counter."""
    return [keys.lease(resource), keys.lease_log(resource), keys.lease_counter(resource)]


def _counted(refused: LeaseRefused) -> LeaseRefused:
    """Every refusal Redis decides passes here once, so the metric counts each exactly once."""
    metrics.LEASE_REFUSALS.labels(refused.refusal.value).inc()
    return refused


def _refused(
    lease: Lease, status: str, holder: str, token: int, deadline: int, now: int
) -> LeaseRefused:
    """The (counted) refusal of an operation on ``lease``, with what Redis holds instead."""
    return _counted(
        LeaseRefused(
            lease.resource, LeaseRefusal(status), holder, token, deadline, now, lease.token
        )
    )


def refusal_error(refused: LeaseRefused) -> LeaseRefusedError:
    """The ``LeaseRefusedError`` subclass matching a refusal (for the caller to raise)."""
    return _REFUSED_ERRORS[refused.refusal](refused)


def _or_raise(result: T | LeaseRefused) -> T:
    if isinstance(result, LeaseRefused):
        raise refusal_error(result)
    return result


class LeaseClient:
    """Fenced leases on one Redis; every method validates its arguments first.

    Refusals come back as ``LeaseRefused`` values from ``acquire``, ``renew``,
    ``release`` and ``check``; the ``*_or_raise`` variants raise the matching
    ``LeaseRefusedError`` subclass. An unreachable Redis raises
    ``LeaseUnavailableError`` from every method.
    """

    def __init__(
        self,
        redis_client: RedisClient,
        *,
        log_maxlen: int = DEFAULT_LOG_MAXLEN,
        replica_wait_ms: int = DEFAULT_REPLICA_WAIT_MS,
    ) -> None:
        if log_maxlen < 1:
            raise InvalidLeaseArgumentError("log_maxlen must be at least 1")
        if replica_wait_ms < 1:
            raise InvalidLeaseArgumentError("replica_wait_ms must be at least 1")
        self.redis = redis_client
        self.log_maxlen = log_maxlen
        self.replica_wait_ms = replica_wait_ms
        self._functions = functions_for(redis_client)
        self._replication = ReplicatedCalls(redis_client, replica_wait_ms)

    # -- operations ---------------------------------------------------------------------

    def acquire(
        self, resource: str, holder: str, ttl_ms: int, *, proof: str | None = None
    ) -> LeaseGranted | LeaseRefused:
        """Take the lease on ``resource`` for ``ttl_ms`` (Redis clock).

        Pass ``proof`` (the secret of a lease this holder already has) to renew
        one's own live lease through acquire; without it a live lease under the
        same holder name refuses ``held``, so a name alone proves nothing.
        """
        lease_args.validate_resource(resource)
        lease_args.validate_holder(holder)
        lease_args.validate_ttl_ms(ttl_ms)
        presented = "" if proof is None else lease_args.validate_proof(proof)
        secret = secrets.token_urlsafe(PROOF_BYTES)
        with _redis_errors(resource):
            reply, replicated = self._replication.run(
                self._functions.lease_acquire,
                _lease_keys(resource),
                [holder, secret, ttl_ms, presented, self.log_maxlen],
                ttl_ms,
            )
        status, token, deadline, now, current_holder = self._parse(reply)
        if status == "held":
            return _counted(
                LeaseRefused(resource, LeaseRefusal.HELD, current_holder, token, deadline, now)
            )
        transition = LeaseTransition(status)
        kept = proof if transition is LeaseTransition.RENEWED and proof is not None else secret
        lease = Lease(resource, holder, token, kept, deadline, ttl_ms)
        if not replicated:
            return self._not_replicated(lease, now)
        log.debug("lease %s %s by %s, token %s", resource, transition.value, holder, token)
        return LeaseGranted(lease, transition, now)

    def renew(self, lease: Lease, ttl_ms: int | None = None) -> LeaseGranted | LeaseRefused:
        """Extend ``lease`` by ``ttl_ms`` (default: its own TTL) from Redis's now; same token."""
        self._validate_lease(lease)
        ttl = lease_args.validate_ttl_ms(ttl_ms if ttl_ms is not None else lease.ttl_ms)
        with _redis_errors(lease.resource):
            reply, replicated = self._replication.run(
                self._functions.lease_renew,
                _lease_keys(lease.resource),
                [lease.holder, lease.token, lease.proof, ttl, self.log_maxlen],
                ttl,
            )
        status, token, deadline, now, holder = self._parse(reply)
        if status != "renewed":
            return _refused(lease, status, holder, token, deadline, now)
        renewed = Lease(lease.resource, lease.holder, token, lease.proof, deadline, ttl)
        if not replicated:
            return self._not_replicated(renewed, now)
        return LeaseGranted(renewed, LeaseTransition.RENEWED, now)

    def release(self, lease: Lease) -> LeaseReleased | LeaseRefused:
        """Give ``lease`` back; the counter stays, so later tokens are still larger."""
        self._validate_lease(lease)
        with _redis_errors(lease.resource):
            reply = self._functions.lease_release(
                keys=_lease_keys(lease.resource),
                args=[lease.holder, lease.token, lease.proof, self.log_maxlen],
            )
        status, token, deadline, now, holder = self._parse(reply)
        if status != "released":
            return _refused(lease, status, holder, token, deadline, now)
        log.debug("lease %s released by %s, token %s", lease.resource, lease.holder, token)
        return LeaseReleased(lease.resource, token, now)

    def check(self, lease: Lease) -> LeaseCurrent | LeaseRefused:
        """Is ``lease`` live under exactly its token, holder and proof, on Redis's clock now?"""
        self._validate_lease(lease)
        with _redis_errors(lease.resource):
            reply = self._functions.lease_check(
                keys=[keys.lease(lease.resource), keys.lease_counter(lease.resource)],
                args=[lease.holder, lease.token, lease.proof],
            )
        status, token, deadline, now, holder = self._parse(reply)
        if status != "current":
            return _refused(lease, status, holder, token, deadline, now)
        return LeaseCurrent(lease.resource, token, deadline, now)

    def acquire_or_raise(
        self, resource: str, holder: str, ttl_ms: int, *, proof: str | None = None
    ) -> LeaseGranted:
        """``acquire``, raising ``LeaseHeldError`` on refusal."""
        return _or_raise(self.acquire(resource, holder, ttl_ms, proof=proof))

    def renew_or_raise(self, lease: Lease, ttl_ms: int | None = None) -> LeaseGranted:
        """``renew``, raising the ``LeaseRefusedError`` subclass of the refusal."""
        return _or_raise(self.renew(lease, ttl_ms))

    def release_or_raise(self, lease: Lease) -> LeaseReleased:
        """``release``, raising the ``LeaseRefusedError`` subclass of the refusal."""
        return _or_raise(self.release(lease))

    def check_or_raise(self, lease: Lease) -> LeaseCurrent:
        """``check``, raising the ``LeaseRefusedError`` subclass of the refusal."""
        return _or_raise(self.check(lease))

    # -- fenced writes -------------------------------------------------------------------

    def fenced_write(self, lease: Lease, name: str, value: bytes | str) -> FencedWrite:
        """Store ``value`` at ``hubsync:lease:{RES}:fenced:NAME`` only for ``lease``'s holder.

        Refused (``stale``/``superseded``/``unknown_token``) when the value was
        already written under a larger token, a larger token has been issued on
        the lease, or the token was never issued; ``not_holder`` when the token is
        current but the holder or proof are not its holder's (the token alone is
        public: ``lease show`` prints it), or another holder already wrote the
        value under this token.
        """
        self._validate_lease(lease)
        key = keys.fenced_resource(lease.resource, name)
        with _redis_errors(lease.resource):
            reply = self._functions.fenced_write(
                keys=[keys.lease(lease.resource), key, keys.lease_counter(lease.resource)],
                args=[lease.token, value, lease.holder, lease.proof],
            )
        written = FencedWrite(lease.resource, name, lease.token, as_text(reply[0]), int(reply[1]))
        if not written.ok:
            # A stale commit refused at the storage side: the refusal fencing exists for.
            metrics.LEASE_REFUSALS.labels(f"fenced_{written.status}").inc()
        return written

    def read_fenced(self, resource: str, name: str) -> tuple[bytes, int] | None:
        """The value of a fenced resource and the token it was written under, or None."""
        with _redis_errors(resource):
            value, token = self.redis.hmget(
                keys.fenced_resource(resource, name), ["value", "token"]
            )
        if value is None or token is None:
            return None
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return raw, int(as_text(token))

    # -- reading -------------------------------------------------------------------------

    def show(self, resource: str) -> LeaseInfo:
        """The lease on ``resource`` as Redis sees it now (free, live or expired)."""
        lease_args.validate_resource(resource)
        with _redis_errors(resource):
            ((fields, counter),), now = self._read_leases([resource])
        return self._info(resource, fields, counter, now)

    def list(self, *, limit: int = 10_000) -> builtins.list[LeaseInfo]:
        """Every lease hash (up to ``limit``), sorted by resource; SCAN, never KEYS."""
        found: builtins.list[str] = []
        with _redis_errors("*"):
            for key in self.redis.scan_iter(match=keys.LEASE_SCAN_PATTERN, count=500):
                resource = keys.hub_project_of(as_text(key))
                with contextlib.suppress(InvalidLeaseArgumentError):  # not a name hubsync made
                    found.append(lease_args.validate_resource(resource))
                if len(found) >= limit:
                    break
            replies, now = self._read_leases(found)
        infos = [
            self._info(resource, fields, counter, now)
            for resource, (fields, counter) in zip(found, replies, strict=True)
            if fields
        ]
        return sorted(infos, key=lambda info: info.resource)

    def history(self, resource: str, count: int = 20) -> builtins.list[dict[str, str]]:
        """The last ``count`` entries of the lease's audit stream, oldest first."""
        lease_args.validate_resource(resource)
        with _redis_errors(resource):
            entries: Any = self.redis.xrevrange(keys.lease_log(resource), count=count)
        return [
            {"id": as_text(entry_id)} | {as_text(k): as_text(v) for k, v in fields.items()}
            for entry_id, fields in reversed(entries)
        ]

    # -- helpers -------------------------------------------------------------------------

    def _read_leases(self, resources: Sequence[str]) -> tuple[builtins.list[Any], int]:
        """(HGETALL of the hash, GET of the counter) of each lease and Redis's clock (ms), in one
        round trip.

        On one server, in one MULTI: every lease as of the same instant. A cluster
        refuses a MULTI over keys of several slots (each resource has its own), so
        there the reads go in a plain pipeline (one round trip per node) and the
        clock is one node's ``TIME``, read after them.
        """
        transaction = not is_cluster(self.redis)
        pipe = self.redis.pipeline(transaction=transaction)
        for resource in resources:
            pipe.hgetall(keys.lease(resource))
            pipe.get(keys.lease_counter(resource))
        if transaction:
            pipe.time()
        replies = pipe.execute()
        pairs = [(replies[i], replies[i + 1]) for i in range(0, 2 * len(resources), 2)]
        if not transaction:
            return pairs, redis_now_ms(self.redis)  # a cluster pipeline refuses TIME
        seconds, micros = replies[-1]
        return pairs, int(seconds) * 1000 + int(micros) // 1000

    def _not_replicated(self, lease: Lease, now: int) -> LeaseRefused:
        """A grant no replica confirmed: give it back if Redis lets us, and refuse it."""
        with contextlib.suppress(LeaseUnavailableError, LeaseRefusedError, redis.RedisError):
            self.release(lease)
        log.warning(
            "lease %s: token %s was not confirmed by a replica within %d ms; refused and given "
            "back",
            lease.resource,
            lease.token,
            self.replica_wait_ms,
        )
        return _counted(
            LeaseRefused(
                lease.resource,
                LeaseRefusal.NOT_REPLICATED,
                lease.holder,
                lease.token,
                lease.deadline_ms,
                now,
                lease.token,
            )
        )

    @staticmethod
    def _validate_lease(lease: Lease) -> None:
        lease_args.validate_resource(lease.resource)
        lease_args.validate_holder(lease.holder)
        lease_args.validate_token(lease.token)
        lease_args.validate_proof(lease.proof)

    @staticmethod
    def _parse(reply: Any) -> tuple[str, int, int, int, str]:
        status, token, deadline, now, holder = reply
        return as_text(status), int(token), int(deadline), int(now), as_text(holder)

    @staticmethod
    def _info(resource: str, raw: dict[Any, Any], counter: Any, now: int) -> LeaseInfo:
        fields = {as_text(k): as_text(v) for k, v in raw.items()}
        holder = fields.get("holder")
        token = _int_or_none(fields.get("token"))
        deadline = _int_or_none(fields.get("deadline_ms"))
        # the counter; before `hub migrate` moved it there, the fence an older hubsync kept
        fence = _int_or_none(counter)
        if fence is None:
            fence = _int_or_none(fields.get("fence")) or 0
        if token is not None and token > fence:
            token = None  # never issued: the functions count it as no lease
        if holder is None or token is None:
            state = LeaseState.FREE
        elif deadline is None or deadline <= now:
            state = LeaseState.EXPIRED  # unreadable deadline = expired, as in the functions
        else:
            state = LeaseState.LIVE
        return LeaseInfo(
            resource=resource,
            state=state,
            holder=holder if state is not LeaseState.FREE else None,
            token=token if state is not LeaseState.FREE else None,
            fence=fence,
            deadline_ms=deadline if state is not LeaseState.FREE else None,
            remaining_ms=max(0, deadline - now) if deadline is not None and holder else 0,
            redis_now_ms=now,
            acquired_ms=_int_or_none(fields.get("acquired_ms")),
            ttl_ms=_int_or_none(fields.get("ttl_ms")),
        )


def call_with_lease(
    client: LeaseClient, resource: str, holder: str, ttl_ms: int, work: Callable[[Lease], T]
) -> T:
    """Acquire, run ``work(lease)``, release: for short critical sections without renewal."""
    granted = client.acquire_or_raise(resource, holder, ttl_ms)
    try:
        return work(granted.lease)
    finally:
        client.release(granted.lease)
