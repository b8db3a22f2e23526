"""hubsync: exactly-once outbox-to-hub sync of workflow run events over Redis Streams.

This package holds what the runtime side (``producers``) and the hub side
(``consumers``, ``hubstore``) share: the wire model, canonical JSON and hashing,
Redis key names, settings and the ``hubsync`` command line.
"""

__version__ = "0.1.0"
