"""What every daemon's ``--check`` does with Redis's answers, said once.

A check reads a health record (a relay's or consumer's heartbeat key, the RQ
worker registry) and turns it into an exit code a container health check can
use. The reading fails in two ways that every check reports alike: a refused
user or password is a refusal (one line, exit 1), not an outage; an unreachable
Redis is one line ``<what>: cannot reach Redis`` and exit 3.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from hubsync.cli import exit_codes
from hubsync.core.connections import (
    CREDENTIAL_ERRORS,
    UNREACHABLE_ERRORS,
    RedisTarget,
    credentials_refused,
)


@contextmanager
def reading_health(target: RedisTarget, what: str) -> Iterator[None]:
    """Run a check's Redis reads of ``target``; ``what`` names the daemon in the outage line."""
    try:
        yield
    except CREDENTIAL_ERRORS as exc:
        raise credentials_refused(target, exc) from None
    except UNREACHABLE_ERRORS:
        click.echo(f"{what}: cannot reach Redis", err=True)
        raise SystemExit(exit_codes.REDIS_UNREACHABLE) from None
