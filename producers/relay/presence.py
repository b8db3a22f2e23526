"""The relay's presence beats: one signed ``kind=presence`` entry per hub project.

Every ``presence_interval`` seconds the relay writes to the events stream of each hub
project it syncs a beat saying who it is (host, pid, version) and the backlog of that hub
project's outboxes, signed with the runtime's key for that hub project; a hub project the
runtime is not enrolled for gets none (the hub would refuse it). A beat the stream refuses
is counted (``SEND_FAILURES``) and logged once per refusal episode.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import redis

from hubsync.core import keys, metrics
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import UNAVAILABLE_ERRORS, RedisClient
from hubsync.core.entries import PresenceBeat
from hubsync.core.redis_values import printable
from hubsync.core.signing import SIGNATURE_FIELD, sign_presence_entry
from hubsync.core.version import __version__
from producers.relay.credentials import RelayCredentials

log = logging.getLogger(__name__)


@dataclass
class PresenceBeats:
    """When each hub project's next beat is due (``interval`` seconds after its last), and the
    beats written."""

    runtime_id: str
    host: str
    credentials: RelayCredentials
    interval: float
    _next_beat: dict[str, float] = field(default_factory=dict, init=False)
    _refused: set[str] = field(default_factory=set, init=False)
    """Hub projects whose last beat was refused."""

    def due(self, hub_project: str, now: float) -> bool:
        """Whether ``hub_project``'s next beat is due at ``now`` (monotonic seconds)."""
        return now >= self._next_beat.get(hub_project, 0.0)

    def send(self, client: RedisClient, backlogs: dict[str, int], now: float) -> None:
        """A beat to each hub project of ``backlogs`` (its backlog in rows), in one pipeline;
        the next ones are due ``interval`` after ``now``."""
        if not backlogs:
            return
        pipe = client.pipeline(transaction=False)
        sent_to: list[str] = []
        for hub_project, backlog in backlogs.items():
            key = self.credentials.signer_for(hub_project)
            if key is None:
                continue  # not enrolled there: the hub would refuse the beat
            beat = PresenceBeat(
                runtime_id=self.runtime_id,
                hub_project=hub_project,
                host=self.host,
                pid=os.getpid(),
                version=__version__,
                backlog=backlog,
                heartbeat=utc_now_iso(),
            )
            fields = beat.to_fields()
            fields[SIGNATURE_FIELD] = sign_presence_entry(key, fields)
            pipe.xadd(keys.events_stream(hub_project, self.runtime_id), fields)  # type: ignore[arg-type]
            sent_to.append(hub_project)
        if sent_to:
            replies = pipe.execute(raise_on_error=False)
            for hub_project, reply in zip(sent_to, replies, strict=True):
                if isinstance(reply, UNAVAILABLE_ERRORS):
                    raise reply  # Redis's, not the stream's: waited out as an outage
                if isinstance(reply, redis.ResponseError):
                    self._refused_beat(hub_project, reply)
                else:
                    self._refused.discard(hub_project)
        for hub_project in backlogs:
            self._next_beat[hub_project] = now + self.interval

    def _refused_beat(self, hub_project: str, exc: redis.ResponseError) -> None:
        """A beat the stream refused: counted, and logged once per refusal episode (the
        project's batches say so already when they are refused too)."""
        metrics.SEND_FAILURES.labels(hub_project).inc()
        if hub_project not in self._refused:
            self._refused.add(hub_project)
            log.error(
                "relay %s: the events stream of hub project %s refused a presence beat (%s)",
                self.runtime_id,
                hub_project,
                printable(str(exc)[:200]),
            )
