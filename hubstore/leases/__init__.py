"""Fenced leases in Redis: the client, the auto-renewing holder and the typed results.

``LeaseClient`` decides every operation inside one Redis function; refusals come
back as ``LeaseRefused`` values (or raise with the ``*_or_raise`` variants).
``AutoRenewingLease`` keeps a granted lease alive from a thread and tells its
owner at once when it is lost. ``hubstore.leases.args`` validates what callers
pass before anything reaches Redis.
"""

from hubstore.leases import types
from hubstore.leases.auto import AutoRenewingLease, LostCallback
from hubstore.leases.client import LeaseClient, call_with_lease, refusal_error
from hubstore.leases.types import *  # noqa: F403 (the result types, listed once in types.__all__)

__all__ = [
    "AutoRenewingLease",
    "LeaseClient",
    "LostCallback",
    "call_with_lease",
    "refusal_error",
]
__all__ += types.__all__
