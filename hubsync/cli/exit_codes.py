"""Documented exit codes of every ``hubsync`` command."""

OK = 0
"""Success."""
FAILURE = 1
"""The command ran and failed (an invariant broke, a check was unhealthy, ...)."""
USAGE = 2
"""Bad arguments or settings; one line on stderr says which."""
REDIS_UNREACHABLE = 3
"""Redis could not be reached."""
