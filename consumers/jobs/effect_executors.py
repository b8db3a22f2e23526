"""Executors: what actually performs an effect once it is claimed. Pluggable by name.

An executor takes the spec and the claim context and returns a receipt (a small
JSON object stored in the ledger). It reports failure by raising one of:

* ``NothingExecutedError``: certainly nothing happened; safe to retry;
* ``EffectFailedError``: the target refused for good; not retried;
* ``OutcomeUncertainError``: it may have happened; parked ``blocked_uncertain``.

Anything else it raises is treated as uncertain. ``webhook`` POSTs to a URL, ``forge``
opens pull requests and tracker issues on a GitHub-API forge (``consumers.jobs.forge``),
``record`` does nothing. Register more with
``register_executor(name, factory)``, or name ``"package.module:attribute"``.
"""

from __future__ import annotations

import hashlib
import importlib
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

from hubsync.core.canonical import canonical_json
from producers.effects.errors import (
    EffectFailedError,
    InvalidEffectError,
    NothingExecutedError,
    OutcomeUncertainError,
)
from producers.effects.git.executors import (
    GitBranchExecutor,
    GitCleanupExecutor,
    GitCommitExecutor,
    GitPushExecutor,
)
from producers.effects.records import EffectClaim

DEFAULT_WEBHOOK_TIMEOUT = 10.0
NOT_PROCESSED_STATUSES = frozenset({429, 503})
"""HTTP statuses by which a server says it did not process the request: safe to retry."""


@dataclass(frozen=True)
class ExecutionContext:
    """What an executor knows about the attempt: the claim (key, spec, lease token)."""

    claim: EffectClaim

    @property
    def fencing_token(self) -> int | None:
        """The lease token, for targets that can fence on their side too."""
        return self.claim.lease.token if self.claim.lease is not None else None


class EffectExecutor(Protocol):
    """Performs one effect and returns its receipt."""

    def execute(self, context: ExecutionContext) -> dict[str, Any]:
        """Do it; raise one of the executor errors on failure."""
        ...


def http_exchange(
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: float,
    where: str,
) -> tuple[int, bytes]:
    """One HTTP request (``url`` is http or https, checked by the caller); its status and body.

    Failures become the executor errors: 429 and 503 (the server did not process
    it) and an unreachable host are ``NothingExecutedError``; another 4xx is
    ``EffectFailedError``; another 5xx, a timeout or a connection lost once the
    request was sent are ``OutcomeUncertainError``. Messages name ``where``, never a
    header (one may hold a token) or the body.
    """
    request = urllib.request.Request(url, data=body, headers=headers, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        exc.close()  # it carries the open response
        if exc.code in NOT_PROCESSED_STATUSES:
            raise NothingExecutedError(f"{where} answered {exc.code}") from None
        if 400 <= exc.code < 500:
            raise EffectFailedError(f"{where} refused with {exc.code}") from None
        raise OutcomeUncertainError(f"{where} answered {exc.code}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError | socket.gaierror):
            raise NothingExecutedError(f"{where} unreachable: {exc.reason}") from None
        raise OutcomeUncertainError(f"{where} failed mid-request: {exc.reason}") from None
    except (TimeoutError, ConnectionError, OSError) as exc:
        raise OutcomeUncertainError(f"{where} failed mid-request: {type(exc).__name__}") from None


class WebhookExecutor:
    """POSTs the payload as canonical JSON to the target URL (http or https).

    Headers let the receiver dedupe and fence: ``Idempotency-Key`` is the effect
    key, ``X-Hubsync-Fencing-Token`` the lease token. The receipt keeps the
    status and a hash of the response body, never the body (it may hold secrets).

    With ``check`` (the ``webhook-checked`` executor), for a target that offers a way
    to check, an unknown outcome is settled by asking: ``GET <target>`` with the same
    ``Idempotency-Key`` answered 200 means it was processed (committed, the receipt
    says ``"settled": true``), 404 that it never was (nothing executed: retried); any
    other answer keeps it uncertain. Such a target must dedupe by that key.
    """

    def __init__(self, timeout: float = DEFAULT_WEBHOOK_TIMEOUT, *, check: bool = False) -> None:
        self.timeout = timeout
        self.check = check

    def execute(self, context: ExecutionContext) -> dict[str, Any]:
        """POST once; map the outcome onto the executor errors (settled by a check if asked)."""
        spec = context.claim.spec
        parts = urlsplit(spec.target)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise EffectFailedError(f"webhook target must be an http(s) URL, not {parts.scheme!r}")
        try:
            return self._post(context, parts)
        except OutcomeUncertainError as exc:
            if not self.check:
                raise
            return self._settle(context, str(exc))

    def _post(self, context: ExecutionContext, parts: SplitResult) -> dict[str, Any]:
        spec = context.claim.spec
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": context.claim.effect_key,
            "User-Agent": "hubsync-effects",
        }
        if context.fencing_token is not None:
            headers["X-Hubsync-Fencing-Token"] = str(context.fencing_token)
        where = f"webhook {parts.hostname}:{parts.port or ''}"
        status, body = http_exchange(
            "POST", spec.target, canonical_json(spec.payload), headers, self.timeout, where
        )
        return _webhook_receipt(status, body)

    def _settle(self, context: ExecutionContext, cause: str) -> dict[str, Any]:
        """Ask the target whether it processed the effect's key (see the class docstring)."""
        key = context.claim.effect_key
        request = urllib.request.Request(  # noqa: S310 - the scheme was checked
            context.claim.spec.target,
            headers={"Idempotency-Key": key, "User-Agent": "hubsync-effects"},
            method="GET",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                body, status = response.read(), int(response.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                raise NothingExecutedError(
                    f"{cause}; the target has no record of {key}: nothing executed"
                ) from None
            raise OutcomeUncertainError(f"{cause}; its check answered {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise OutcomeUncertainError(f"{cause}; its check failed: {reason}") from None
        if status != 200:
            raise OutcomeUncertainError(f"{cause}; its check answered {status}")
        return _webhook_receipt(status, body) | {"settled": True}


def _webhook_receipt(status: int, body: bytes) -> dict[str, Any]:
    return {
        "status": status,
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body_bytes": len(body),
    }


class RecordingExecutor:
    """Performs nothing and records a receipt: for lease-free kinds driven elsewhere, and demos."""

    def execute(self, context: ExecutionContext) -> dict[str, Any]:
        """Return a receipt naming the effect."""
        return {"recorded": context.claim.effect_key}


def forge_executor() -> EffectExecutor:
    """The ``forge`` executor (``pr-create``, ``tracker-issue``), configured from the
    environment (``consumers.jobs.forge``)."""
    from consumers.jobs.forge import ForgeExecutor

    return ForgeExecutor.from_environment()


_EXECUTORS: dict[str, Callable[[], EffectExecutor]] = {
    "forge": forge_executor,
    "webhook": WebhookExecutor,
    "webhook-checked": lambda: WebhookExecutor(check=True),
    "record": RecordingExecutor,
    # the git executors read their workspace from HUBSYNC_GIT_* when a job resolves them
    "git-branch": GitBranchExecutor.from_environment,
    "git-commit": GitCommitExecutor.from_environment,
    "git-push": GitPushExecutor.from_environment,
    "git-cleanup": GitCleanupExecutor.from_environment,
}


def register_executor(name: str, factory: Callable[[], EffectExecutor]) -> None:
    """Make ``factory`` available to effect jobs under ``name``."""
    _EXECUTORS[name] = factory


def resolve_executor(name: str) -> EffectExecutor:
    """The executor registered as ``name``, or the factory at ``"module:attribute"``."""
    factory = _EXECUTORS.get(name)
    if factory is None and ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise InvalidEffectError(f"executor {name!r} cannot be imported: {exc}") from None
    if factory is None:
        known = ", ".join(sorted(_EXECUTORS))
        raise InvalidEffectError(f"unknown executor {name!r}; known: {known}, or module:attr")
    return factory()
