"""producers.store: a project's local event store and its outbox in one SQLite file.

``event_store.RunEventStore`` (with ``NewEvent``) is what code outside imports;
``outbox`` is its outbox (send, acks, marks), ``outbox_status`` its counts, ``retention``
the pruning of acked rows and old events, ``late_secrets`` the scrub of a secret
registered after the fact, ``unreadable`` the refusal of a file that is not one.
"""
