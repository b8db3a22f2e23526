"""Errors of the shared-effects machinery (below ``producers.errors.ProducerError``).

Most refusals are values (``EffectRefused`` with an ``EffectRefusalCode``);
these exceptions are for misuse and for the raising helpers.
"""

from __future__ import annotations

from hubsync.core.errors import ConfigError
from producers.errors import ProducerError


class EffectError(ProducerError):
    """Root of every error the effects ledger and its runners raise."""


class InvalidEffectError(EffectError, ConfigError):
    """An effect spec is malformed (unknown kind, bad id, target too long, payload not JSON)."""


class EffectRefusedError(EffectError):
    """A claim, heartbeat or commit was refused; ``code`` is the refusal code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class VerdictRefusedError(EffectError, ConfigError):
    """An operator's verdict names an effect that is missing or not parked
    ``blocked_uncertain``; nothing was changed (exit 2 in the CLI)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NothingExecutedError(EffectError):
    """The executor certainly did not touch the outside world (connection refused, 503):
    the attempt is dropped and the effect may safely be tried again."""


class EffectFailedError(EffectError):
    """The target refused the effect for good (a 4xx): nothing landed and retrying will not
    help; the attempt is dropped and the job fails without retry."""


class OutcomeUncertainError(EffectError):
    """The executor cannot tell whether the effect landed (timeout mid-request, 5xx): the
    attempt is parked blocked_uncertain and nothing retries it."""


class RetryLaterError(EffectError):
    """Raised by an effect job when nothing executed and trying again later is safe
    (lease held elsewhere, Redis unreachable at claim, target said "not processed");
    RQ's ``Retry`` policy re-runs the job."""
