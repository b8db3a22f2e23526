"""The relay daemon: a runtime's outboxes onto Redis Streams, acknowledged end to end."""

from producers.relay.daemon import Relay
from producers.relay.summary import RelaySummary

__all__ = ["Relay", "RelaySummary"]
