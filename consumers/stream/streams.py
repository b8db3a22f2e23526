"""Which events streams a hub consumer reads: one per enrolled runtime and hub project.

The list comes from the hub store (each active runtime and each hub project it
is enrolled for), never from a Redis key a runtime can write: a runtime can
neither add a stream to it nor hide one. Each stream gets group ``hub`` (from
``0``, MKSTREAM, so a runtime whose relay has not sent yet is followed too).

The shared ``hubsync:{P}:events`` of before per-runtime streams is followed
only while it holds something for group ``hub``: entries never delivered to
it, or delivered and not acknowledged. Entries waiting there at an upgrade
are so read, stored and acknowledged like any other, and the stream is left
alone once drained (a dead letter replayed onto it is picked up again).

A stream Redis will not serve (the key holds another type, group ``hub``
cannot be created on it, a read or a reclaim of it is refused) is set aside:
one log line and one alert on the hub project's alert stream when that
starts, counted in ``hubsync_consumer_stream_failures_total``, and tried again
on every refresh (about once a second), so the other streams, and this one
once repaired, go on. Nothing about one key can stop a worker or make it
crash on restart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import redis

from hubsync.core import keys, metrics
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import UNAVAILABLE_ERRORS, RedisClient
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import as_text, printable

log = logging.getLogger(__name__)

STREAM_UNREADABLE = "stream_unreadable"
"""Reason of the alert raised when a stream is set aside."""

_DETAIL_CHARS = 200

NOT_THE_KEYS_FAULT: tuple[type[BaseException], ...] = (
    *UNAVAILABLE_ERRORS,
    redis.exceptions.NoPermissionError,
)
"""Error replies that say nothing about one key: Redis unavailable (CLUSTERDOWN, READONLY,
...: waited out like an outage) or a user that may not run the command (a deployment's
mistake, said by the command's one-line error)."""


def key_refused(exc: BaseException) -> bool:
    """True when ``exc`` is Redis refusing a command for what one key holds (another type, a
    missing group, a stream at its last id), which sets that key aside; False for anything
    else, which the caller raises."""
    return isinstance(exc, redis.ResponseError) and not isinstance(exc, NOT_THE_KEYS_FAULT)


def stream_id(value: object) -> tuple[int, int]:
    """A stream entry id (``<ms>-<seq>``) as a pair that sorts as Redis sorts ids."""
    ms, _, seq = as_text(value).partition("-")
    return int(ms or 0), int(seq or 0)


def alert_fields(stream: str, detail: str) -> dict[str, str]:
    """The alert-stream entry saying ``stream`` is set aside, and why."""
    return {
        "reason": STREAM_UNREADABLE,
        "stream": stream,
        "runtime_id": keys.runtime_of(stream) or "",
        "detail": detail,
        "detected_at": utc_now_iso(),
    }


class FollowedStreams:
    """The events streams one worker reads now, and the ones it has set aside."""

    def __init__(self, client: RedisClient, max_projects: int) -> None:
        self.client = client
        self.max_projects = max_projects
        self.ready: list[str] = []
        """Streams with group ``hub``, read by every poll."""
        self.set_aside: dict[str, str] = {}
        """Stream -> why Redis would not serve it (tried again on every refresh)."""
        self._listed: set[str] = set()  # hub projects added to hubsync:projects by this worker
        self._over_bound_logged = False
        self._projects_refused = False  # said once until a SADD goes through

    # ----- the refresh -----

    def refresh(self, enrolled: Iterable[tuple[str, str]]) -> list[str]:
        """Follow the streams of ``enrolled`` ((hub project, runtime) pairs) and the shared
        streams still to drain; the streams ready to read."""
        pairs = self._bounded(sorted(set(enrolled)))
        projects = sorted({project for project, _ in pairs})
        wanted = [keys.events_stream(project, runtime) for project, runtime in pairs]
        known = set(self.ready)
        fresh = [stream for stream in wanted if stream not in known]
        ready = [stream for stream in wanted if stream in known]
        ready += self._create_groups(fresh, mkstream=True)
        ready += self._shared_to_drain(projects)
        followed = {*wanted, *map(keys.shared_events_stream, projects)}
        for stream in list(self.set_aside):
            if stream not in followed:
                del self.set_aside[stream]  # a runtime no longer enrolled: nothing to read
        self.ready = ready
        metrics.STREAMS_SET_ASIDE.set(len(self.set_aside))
        self._list_projects(projects)
        return ready

    def forget(self) -> None:
        """Drop every stream, so that the next refresh makes their groups again."""
        self.ready = []

    def _bounded(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``pairs`` of the first ``max_projects`` hub projects, with valid names only."""
        projects: set[str] = set()
        kept = []
        for project, runtime in pairs:
            try:
                keys.events_stream(project, runtime)
            except ConfigError:
                continue  # the hub store validates names; an older row is skipped, never keyed
            if project not in projects and len(projects) >= self.max_projects:
                if not self._over_bound_logged:
                    self._over_bound_logged = True
                    log.warning(
                        "the enrolled runtimes name more hub projects than --max-projects %d; "
                        "following the first %d only",
                        self.max_projects,
                        self.max_projects,
                    )
                continue
            projects.add(project)
            kept.append((project, runtime))
        return kept

    def _create_groups(self, streams: Sequence[str], *, mkstream: bool) -> list[str]:
        """Create group ``hub`` (from ``0``) on each stream; the streams that have it."""
        if not streams:
            return []
        pipe = self.client.pipeline(transaction=False)
        for stream in streams:
            pipe.xgroup_create(stream, keys.CONSUMER_GROUP, id="0", mkstream=mkstream)
        ready = []
        for stream, result in zip(streams, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(result, Exception) and not key_refused(result):
                raise result
            if not isinstance(result, redis.ResponseError):
                log.info("created group %s on %s", keys.CONSUMER_GROUP, stream)
            elif "BUSYGROUP" not in str(result):
                self.refused(stream, result)
                continue
            self.readable(stream)
            ready.append(stream)
        return ready

    def _shared_to_drain(self, projects: Sequence[str]) -> list[str]:
        """The shared streams of ``projects`` that still hold something for group ``hub``."""
        if not projects:
            return []
        shared = [keys.shared_events_stream(project) for project in projects]
        pipe = self.client.pipeline(transaction=False)
        for stream in shared:
            pipe.xinfo_stream(stream)
            pipe.xinfo_groups(stream)
        replies = pipe.execute(raise_on_error=False)
        to_drain: list[str] = []
        without_group: list[str] = []
        for index, stream in enumerate(shared):
            info, groups = replies[2 * index], replies[2 * index + 1]
            for reply in (info, groups):
                if isinstance(reply, Exception) and not key_refused(reply):
                    raise reply
            if isinstance(info, Exception) or isinstance(groups, Exception):
                continue  # no such key (the usual case after the upgrade), or not a stream
            group = _group_hub(groups)
            if group is None:
                if int(info.get("length") or 0):
                    without_group.append(stream)
            elif _holds_work(info, group):
                to_drain.append(stream)
        return to_drain + self._create_groups(without_group, mkstream=False)

    def _list_projects(self, projects: Sequence[str]) -> None:
        """Add the hub projects followed to ``hubsync:projects`` (what operator tools list)."""
        new = [project for project in projects if project not in self._listed]
        if not new:
            return
        try:
            self.client.sadd(keys.PROJECTS, *new)
        except redis.ResponseError as exc:
            if not key_refused(exc):
                raise
            if not self._projects_refused:
                self._projects_refused = True
                metrics.STREAM_FAILURES.labels("projects", "").inc()
                log.error(
                    "could not list the hub projects in %s (%s); reading goes on, but operator "
                    "tools will not list them until the key is a set again",
                    keys.PROJECTS,
                    printable(str(exc)[:_DETAIL_CHARS]),
                )
            return
        self._projects_refused = False
        self._listed.update(new)

    # ----- streams Redis will not serve -----

    def refused(self, stream: str, exc: redis.ResponseError) -> None:
        """Set ``stream`` aside: Redis refused it. Said once, with an alert, until it recovers."""
        if stream in self.ready:
            self.ready.remove(stream)
        if stream in self.set_aside:
            self.set_aside[stream] = str(exc)
            return
        detail = printable(str(exc)[:_DETAIL_CHARS])
        self.set_aside[stream] = detail
        metrics.STREAMS_SET_ASIDE.set(len(self.set_aside))
        hub_project = keys.hub_project_of(stream)
        metrics.STREAM_FAILURES.labels("events", hub_project).inc()
        log.error(
            "%s set aside: Redis refused it (%s); the other streams go on, it is tried again "
            "every second",
            stream,
            detail,
        )
        try:
            self.client.xadd(keys.alerts_stream(hub_project), alert_fields(stream, detail))  # type: ignore[arg-type]
        except redis.ResponseError as alert_exc:
            if not key_refused(alert_exc):
                raise
            metrics.STREAM_FAILURES.labels("alerts", hub_project).inc()
            log.error(
                "%s refused the alert (%s)",
                keys.alerts_stream(hub_project),
                printable(str(alert_exc)[:_DETAIL_CHARS]),
            )

    def readable(self, stream: str) -> None:
        """``stream`` is served again (if it was set aside)."""
        if self.set_aside.pop(stream, None) is not None:
            log.info("%s is readable again", stream)

    def diagnose(self) -> bool:
        """After a read of every stream failed: find the streams Redis refuses, and set them
        aside (a stream that lost its group gets it again); False when none was at fault."""
        if not self.ready:
            return False
        pipe = self.client.pipeline(transaction=False)
        for stream in self.ready:
            pipe.xinfo_groups(stream)
        lost = []
        refused = 0
        for stream, reply in zip(list(self.ready), pipe.execute(raise_on_error=False), strict=True):
            if isinstance(reply, Exception) and not key_refused(reply):
                raise reply
            if isinstance(reply, redis.ResponseError) and "no such key" in str(reply).lower():
                lost.append(stream)  # deleted: made again, with its group
            elif isinstance(reply, redis.ResponseError):
                self.refused(stream, reply)
                refused += 1
            elif _group_hub(reply) is None:
                lost.append(stream)
        for stream in lost:
            self.ready.remove(stream)
        if lost:
            log.warning("group %s missing on %s; recreating it", keys.CONSUMER_GROUP, lost)
            self.ready += self._create_groups(lost, mkstream=True)
        return bool(refused or lost)


def _group_hub(groups: Any) -> dict[Any, Any] | None:
    """Group ``hub`` of an XINFO GROUPS reply, or None."""
    return next((g for g in groups if as_text(g.get("name")) == keys.CONSUMER_GROUP), None)


def _holds_work(info: dict[Any, Any], group: dict[Any, Any]) -> bool:
    """True while group ``hub`` has pending entries or entries it was never given."""
    if int(group.get("pending") or 0):
        return True
    if not int(info.get("length") or 0):
        return False
    last = stream_id(info.get("last-generated-id") or "0-0")
    return stream_id(group.get("last-delivered-id") or "0-0") < last
