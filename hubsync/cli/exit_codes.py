"""Documented exit codes of every ``hubsync`` command."""

OK = 0
"""Success."""
FAILURE = 1
"""The command ran and failed (an invariant broke, a check was unhealthy, ...)."""
USAGE = 2
"""Bad arguments or settings (also: a state dir or consumer name that a running relay or
consumer holds); one line on stderr says which."""
REDIS_UNREACHABLE = 3
"""Redis could not be reached."""
LEASE_HELD = 10
"""``hubsync lease``: another holder has a live lease (or the proof did not match)."""
LEASE_SUPERSEDED = 11
"""``hubsync lease``: the token was superseded by a newer one."""
LEASE_EXPIRED = 12
"""``hubsync lease``: the lease expired on Redis's clock."""
LEASE_MISSING = 13
"""``hubsync lease``: no lease is held on the resource."""
LEASE_NOT_REPLICATED = 14
"""``hubsync lease``: granted on the Redis master, but no replica confirmed it in time."""
STOPPED_BY_SIGNAL = 128
"""``hubsync demo`` stopped by signal N, after cleaning up, exits ``STOPPED_BY_SIGNAL + N`` (130
SIGINT, 143 SIGTERM, 129 SIGHUP), as a shell reports a process a signal ended."""
