"""Errors of the runtime side: event store, outbox, registry, redaction, derivation.

``ProducerError`` is the root; catch it to handle anything the runtime side
refuses. A locked or foreign SQLite file raises the shared
``hubsync.core.errors.StoreBusyError`` or ``SchemaVersionError``. Messages say what
was wrong and what to do, and never carry a secret value or event bytes (a
secret in an error message would end up in a log).
"""

from __future__ import annotations

from hubsync.core.errors import ConfigError, HubsyncError


class ProducerError(HubsyncError):
    """Root of every error the runtime side (``producers``) raises."""


class UnsafeSecretError(ProducerError, ConfigError):
    """A value cannot be registered as secret because redacting it would not be safe."""


class SecretTooShortError(UnsafeSecretError):
    """A value registered as secret is too short to redact safely."""


class RebindError(ProducerError, ConfigError):
    """A runtime, project or store is being bound to an identity other than its recorded one."""


class ForeignEnrollmentError(RebindError):
    """An enrollment token names another runtime, or another hub than the one joined."""


class DerivationError(ProducerError):
    """A local event cannot be turned into a sync event (not JSON, bad id, bad time)."""


class SecretInIdError(DerivationError):
    """A run id or event type holds a secret; ids are never redacted, so the event is refused."""


class EventTooLargeError(DerivationError):
    """The derived sync event exceeds ``hubsync.core.wire.MAX_EVENT_BYTES``."""


class StoreClosedError(ProducerError):
    """The store was used after ``close()``."""


class StateDirNotFoundError(ProducerError, ConfigError):
    """A state directory given to read from holds no runtime registry."""


class StateDirAccessError(ProducerError, ConfigError):
    """The state dir or its registry cannot be created or opened by this user (permissions, a
    read-only filesystem, a path through a file); nothing was created."""


class RelayAlreadyRunningError(ProducerError, ConfigError):
    """Another relay holds the state dir's lock: one relay per runtime (exit 2, naming its pid)."""


class RegistryDamagedError(ProducerError):
    """``registry.sqlite`` is not a SQLite database (damaged, truncated or overwritten); it was
    left untouched."""


class UnreadableStoreError(ProducerError):
    """A project's event store could not be read, so it was not synced (the others were)."""
