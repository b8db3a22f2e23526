"""hubsync: exactly-once outbox-to-hub sync of workflow run events over Redis Streams.

Two floors share this name. ``hubsync.core`` is the kernel: the wire model, canonical
JSON and hashing, signing, Redis key names and connections, settings, the SQLite layer;
it imports nothing outside itself. ``producers`` (the runtime side), ``consumers`` and
``hubstore`` (the hub side) build on it. The application sits on top of them all and
nothing below imports it: the ``hubsync`` command line (``cli``), the demo, the
benchmarks, ``doctor``, the private servers (``servers``), the process launcher
(``processes``) and enrollment provisioning (``provisioning``).
"""

from hubsync.core.version import __version__

__all__ = ["__version__"]
