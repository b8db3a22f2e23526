"""hubstore: the hub's durable state, the hub store of sync events and the Redis leases.

* ``store``: the ``HubStore`` contract every hub database keeps (``sqlite``,
  ``postgres`` and ``memory`` implement it; the SQL two share ``sql_store`` and
  the statements of ``sql_statements``). A batch is ingested in one
  transaction; the dedupe key is ``(project_id, run_id, sequence)``; the same bytes again are a
  ``duplicate``, other bytes under a used key a ``conflict`` that is recorded
  and never overwritten; a project belongs to the runtime that first wrote it,
  and another runtime's events for it are a ``not_owner`` conflict. Verdicts
  are reached in ``decide``, apart from SQL, so every backend judges alike.
* ``leases``: fenced leases in Redis, each operation decided inside one Lua
  script, deadlines on Redis's own clock, fencing tokens that only grow per
  resource; ``leases.fence`` makes a store refuse, at commit, a write under a token
  smaller than one it has already seen (a holder that lost its lease).

``open_store(url)`` opens the hub store a URL names (``factory``: ``sqlite:///PATH``,
``postgresql://…`` with the ``postgres`` extra, ``memory://``); ``migrate_store(url)``
creates or upgrades its schema. From outside, import ``open_store``, ``migrate_store`` and
``hub_url_from_path`` from here, the contract's types from ``store``, ``decide`` and
``errors``, and the leases from ``leases``; the backends (``sqlite``, ``postgres``,
``memory``) are reached through ``open_store``, never imported directly.
"""

from hubstore.factory import hub_url_from_path, migrate_store, open_store

__all__ = ["hub_url_from_path", "migrate_store", "open_store"]
