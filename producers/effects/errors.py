"""Errors of the shared-effects machinery (below ``producers.errors.ProducerError``).

Most refusals are values (``EffectRefused`` with an ``EffectRefusalCode``);
these exceptions are for misuse and for the raising helpers.
"""

from __future__ import annotations

from hubsync.errors import ConfigError
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
