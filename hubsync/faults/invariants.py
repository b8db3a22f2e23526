"""The end checks of a pipeline run under faults, once everything has drained.

Each check returns a ``Check``: figures for the report, and failures naming the first
offending keys or places (never event bytes) when its invariant does not hold:

* hub rows equal the committed local events, key by key and byte for byte, with zero
  duplicates;
* every outbox row is acked, or parked in a state an injected fault explains;
* every injected conflict raised an alert (hub table and alert stream), every forgery a
  security alert (on the alert stream, and counted in the hub table's one row per hub
  project, claimed runtime and reason), and no genuine event ever did;
* no relay was told anything about a forgery; every forged ack was ignored;
* every garbage entry was dead-lettered with its reason, every forgery as
  ``unauthenticated``, and nothing genuine was, except for over-delivery
  (``max_deliveries``);
* no event a runtime signed into another runtime's project was stored, each was alerted
  ``not_owner``, and its owner was told nothing; no lease proof read from Redis was
  accepted;
* no planted secret is in Redis or the files given; the planted texts were redacted
  where they crossed.

The hub is read through the ``HubStore`` contract, so the same checks hold on every
backend.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hubstore.store import AlertRecord, HubStore, StoredEvent
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.entries import decode_fields
from hubsync.faults.local import LocalEvents, Row, read_local_events
from hubsync.faults.records import FORGERY_REASON, Injections, Key, RuntimeUnderTest
from hubsync.faults.secrets import Scan, scan_files, scan_redis

SHOWN = 5
"""How many offending keys a failure names."""
ALERT_LIMIT = 1_000_000

AlertKey = tuple[str, str, int, str]
"""``(project_id, run_id, sequence, offered_hash)``."""


class InvariantBroken(AssertionError):
    """An invariant did not hold; the message names the check and its failures."""


@dataclass(frozen=True)
class Check:
    """One invariant: whether it held (no failures), and the figures it counted."""

    name: str
    failures: tuple[str, ...] = ()
    figures: dict[str, int] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        """Whether the invariant held."""
        return not self.failures

    def expect(self) -> dict[str, int]:
        """The figures; ``InvariantBroken`` if the invariant did not hold."""
        return expect_all([self])


def _check(name: str, failures: Sequence[str | None], **figures: int) -> Check:
    return Check(name, tuple(f for f in failures if f), figures)


def _fail(condition: object, message: str) -> str | None:
    """``message`` if ``condition`` holds: a failure, written beside its condition."""
    return message if condition else None


def _first(keys_: Sequence[object]) -> str:
    return str(sorted(keys_)[:SHOWN])  # type: ignore[type-var]


@dataclass
class InvariantChecker:
    """Checks a drained pipeline against what its runtimes committed and what ``injections``
    did to it. ``relay_logs`` maps each runtime's id to its relay's log text.

    The outboxes and the alerts are read once, by the first check that needs them: make a
    checker once the pipeline has drained, and a new one to check again.
    """

    hub: HubStore
    client: RedisClient
    runtimes: Sequence[RuntimeUnderTest]
    injections: Injections
    relay_logs: Mapping[str, str]

    @property
    def hub_projects(self) -> list[str]:
        """The hub projects of the runtimes."""
        return sorted({r.hub_project for r in self.runtimes})

    def standard(self) -> list[Check]:
        """Every check of the pipeline and the injected faults (the secret scans aside)."""
        return [
            self.hub_equals_local(),
            self.outbox_terminal(),
            self.conflicts_alerted(),
            self.forgeries_alerted(),
            self.alerts_explained(),
            self.forgeries_told_nothing(),
            self.forged_acks_ignored(),
            self.garbage_dead_lettered(),
            self.cross_runtime_refused(),
            self.lease_replays_refused(),
        ]

    # ----- what was read -----

    @cached_property
    def local(self) -> LocalEvents:
        """What the runtimes committed (read once)."""
        return read_local_events(self.runtimes)

    def hub_events(self) -> Iterator[StoredEvent]:
        """Every event the hub store holds, page by page (keyset paging: each row once)."""
        for hub_project in self.hub_projects:
            after = None
            while page := self.hub.events(hub_project, after=after, limit=10_000):
                yield from page
                after = page[-1].position

    @cached_property
    def hub_alerts(self) -> list[AlertRecord]:
        """The hub's alerts about the runtimes' hub projects (read once)."""
        alerts = self.hub.alerts(limit=ALERT_LIMIT)
        return [a for a in alerts if a.hub_project in self.hub_projects]

    @cached_property
    def alert_table(self) -> dict[AlertKey, tuple[str, str | None]]:
        """The hub's alerts: ``(*key, offered_hash) -> (reason, existing_hash)``. An alert
        folding refused entries names the latest of them."""
        return {
            (a.project_id, a.run_id, a.sequence, a.offered_hash): (str(a.reason), a.existing_hash)
            for a in self.hub_alerts
        }

    @cached_property
    def alert_stream(self) -> set[tuple[str, str, int, str, str]]:
        """The alert streams' entries: ``(*key, offered_hash, reason)``."""
        streamed = set()
        for hub_project in self.hub_projects:
            for f in self._entries(keys.alerts_stream(hub_project)):
                key = (f["project_id"].decode(), f["run_id"].decode(), int(f["sequence"]))
                streamed.add((*key, f["offered_hash"].decode(), f["reason"].decode()))
        return streamed

    def _entries(self, stream: str) -> list[dict[str, bytes]]:
        """The fields of every entry of ``stream``."""
        entries: Any = self.client.xrange(stream)
        return [decode_fields(raw) for _, raw in entries]

    # ----- the checks -----

    def hub_equals_local(self) -> Check:
        """Hub rows == committed local events, key by key, same hash and bytes; no duplicates."""
        local = self.local
        hub: dict[Key, Row] = {}
        rows = 0
        for event in self.hub_events():
            rows += 1
            key = (event.project_id, event.run_id, event.sequence)
            hub[key] = (event.content_hash, bytes(event.record))
        missing = local.rows.keys() - hub.keys()
        extra = hub.keys() - local.rows.keys()
        differ = [k for k in local.rows.keys() & hub.keys() if local.rows[k] != hub[k]]
        return _check(
            "every committed event is in the hub once, byte for byte",
            [
                *local.broken,
                _fail(rows > len(hub), f"{rows - len(hub)} keys stored twice"),
                _fail(
                    missing,
                    f"{len(missing)} committed events never reached the hub: "
                    f"{_first(list(missing))}",
                ),
                _fail(extra, f"{len(extra)} hub rows no runtime committed: {_first(list(extra))}"),
                _fail(
                    differ, f"{len(differ)} hub rows differ from the local bytes: {_first(differ)}"
                ),
            ],
            local_events=local.run_events,
            outbox_rows=len(local.rows),
            hub_rows=len(hub),
        )

    def outbox_terminal(self) -> Check:
        """Every outbox row acked, or parked by an outcome an injected fault explains."""
        states = self.local.states
        explained = self.injections.explained_keys()
        unexplained = [k for k, s in states.items() if s != "acked" and k not in explained]
        shown = [(k, states[k]) for k in sorted(unexplained)[:SHOWN]]
        counts = Counter(states.values())
        return _check(
            "every outbox row acknowledged, or parked by an injected fault",
            [
                _fail(
                    unexplained,
                    f"{len(unexplained)} outbox rows not acked and not explained "
                    f"by an injected fault: {shown}",
                )
            ],
            **{f"outbox_{state}": n for state, n in sorted(counts.items())},
        )

    def _alerted(self, key: Key, offered: str, reason: str, existing: str | None) -> str | None:
        """What is wrong with the alert an offer under ``key`` must have raised, if anything."""
        found = self.alert_table.get((*key, offered))
        if found != (reason, existing):
            return f"{key} is not in sync_alerts as {reason} (found {found})"
        if (*key, offered, reason) not in self.alert_stream:
            return f"{key} raised no stream alert"
        return None

    def conflicts_alerted(self) -> Check:
        """Each signed conflicting offer is in ``sync_alerts`` as ``sequence_reused`` over the
        genuine hash, and on the alert stream."""
        conflicts = self.injections.conflicts
        failures = [
            self._alerted(c.key, c.forged_hash, "sequence_reused", c.genuine_hash)
            for c in conflicts
        ]
        return _check(
            "every conflicting entry was refused and alerted",
            [_fail(f, f"conflicting offer for {f}") for f in failures],
            conflicts_injected=len(conflicts),
        )

    def forgeries_alerted(self) -> Check:
        """Each forgery is on the alert stream as ``unauthenticated``; ``sync_alerts`` folds
        them into one row per hub project, claimed runtime and reason, whose occurrences count
        at least the forgeries of each hub project (a redelivery after a crash counts again)."""
        forgeries = self.injections.forgeries
        unstreamed = [
            f for f in forgeries if (*f.key, f.forged_hash, FORGERY_REASON) not in self.alert_stream
        ]
        injected = Counter(f.hub_project for f in forgeries)
        counted: Counter[str] = Counter()
        for a in self.hub_alerts:
            if str(a.reason) == FORGERY_REASON:
                counted[a.hub_project] += a.occurrences
        short = {p: (counted[p], n) for p, n in injected.items() if counted[p] < n}
        failures = [_fail(f, f"{f.how} forgery for {f.key} raised no stream alert")
                    for f in unstreamed]  # fmt: skip
        failures.append(_fail(short, f"sync_alerts counts fewer forgeries than made: {short}"))
        return _check(
            "every forgery was refused unread and alerted",
            failures,
            forgeries_injected=len(forgeries),
        )

    def alerts_explained(self) -> Check:
        """No alert that no injection explains."""
        unexplained = set(self.alert_table) - self.injections.alerted_keys()
        return _check(
            "no alert but for an injected fault",
            [_fail(unexplained, f"alerts no injection explains: {_first(list(unexplained))}")],
            alerts=len(self.alert_table),
        )

    def forgeries_told_nothing(self) -> Check:
        """No relay heard of a forgery: none logged a verdict on other bytes under a forged key
        (as each does for a signed conflict, whose outcome names bytes its row does not hold)."""
        logs = "\n".join(self.relay_logs.values())

        conflicts = self.injections.conflicts
        conflicts_told = sum(relay_told(logs, c.key) for c in conflicts)
        conflicted = {c.key for c in conflicts}
        forgeries = self.injections.forgeries
        heard = [f.key for f in forgeries if f.key not in conflicted and relay_told(logs, f.key)]
        return _check(
            "no relay was told of a forgery",
            [
                # the line looked for is the one relays do write for a verdict on other bytes
                _fail(
                    conflicts and not conflicts_told,
                    "no relay logged the verdict on any signed conflicting offer",
                ),
                _fail(heard, f"relays were told about forgeries: {_first(heard)}"),
            ],
            conflicts_told_to_relays=conflicts_told,
        )

    def forged_acks_ignored(self) -> Check:
        """No forged ack was applied: the rows it claimed accepted (their entries deleted) and
        those it claimed parked are all acked, the former being in the hub; and each targeted
        runtime's relay logged that it ignored an outcomes entry its hub did not sign."""
        states = self.local.states
        failures: list[str | None] = []
        claimed = 0
        for forged in self.injections.forged_acks:
            decided = [k for k in (*forged.deleted, *forged.parked) if states.get(k) != "acked"]
            claimed += len(forged.deleted) + len(forged.parked)
            log = self.relay_logs.get(forged.runtime_id, "")
            failures += [
                _fail(decided, f"a forged ack ({forged.how}) decided rows {_first(decided)}"),
                _fail(
                    "security: ignored outcomes entry" not in log,
                    f"{forged.runtime_id}'s relay never said it ignored a forged ack",
                ),
            ]
        return _check(
            "every forged ack was ignored",
            failures,
            forged_acks_injected=len(self.injections.forged_acks),
            forged_ack_rows=claimed,
        )

    def garbage_dead_lettered(self) -> Check:
        """Every garbage entry dead-lettered with its reason, every forgery as unauthenticated;
        genuine entries only for over-delivery."""
        by_source: dict[str, list[str]] = defaultdict(list)
        reasons: Counter[str] = Counter()
        for hub_project in self.hub_projects:
            for f in self._entries(keys.dead_stream(hub_project)):
                by_source[f["source_id"].decode()].append(f["reason"].decode())
                reasons[f["reason"].decode()] += 1
        injected = self.injections
        expected = [(g.kind, g.entry_id, g.expected_reason) for g in injected.garbage]
        expected += [(f"{f.how} forgery", f.entry_id, FORGERY_REASON) for f in injected.forgeries]
        failures = [
            _fail(
                reason not in by_source.get(entry_id, []),
                f"{kind} entry {entry_id} was not dead-lettered as {reason} "
                f"(got {by_source.get(entry_id, [])})",
            )
            for kind, entry_id, reason in expected
        ]
        ids = {entry_id for _, entry_id, _ in expected}
        genuine = {s: got for s, got in by_source.items() if s not in ids}
        stray = sorted((s, got) for s, got in genuine.items() if set(got) != {"max_deliveries"})
        failures.append(_fail(stray, f"genuine entries dead-lettered: {stray[:SHOWN]}"))
        return _check(
            "every garbage entry and forgery was dead-lettered with its reason",
            failures,
            garbage_injected=len(injected.garbage),
            forgeries_dead_lettered=len(injected.forgeries),
            dead_letters=sum(reasons.values()),
            dead_max_deliveries_genuine=len(genuine),
            **{f"dead_{reason}": n for reason, n in sorted(reasons.items())},
        )

    def cross_runtime_refused(self) -> Check:
        """Each event a runtime signed into another's project is not in the hub, is alerted
        ``not_owner``, and the project's owner was told nothing of it."""
        logs = {r.runtime_id: self.relay_logs.get(r.runtime_id, "") for r in self.runtimes}
        stored = {(e.project_id, e.run_id, e.sequence) for e in self.hub_events()}
        failures: list[str | None] = []
        for crossed in self.injections.cross_runtime:
            failures += [
                _fail(crossed.key in stored, f"{crossed} was stored"),
                self._alerted(crossed.key, crossed.offered_hash, "not_owner", None),
                _fail(
                    relay_told(logs.get(crossed.victim, ""), crossed.key),
                    f"{crossed.victim}'s relay was told of {crossed.key}",
                ),
            ]
        return _check(
            "no runtime wrote into another's project",
            failures,
            cross_runtime_injected=len(self.injections.cross_runtime),
        )

    def lease_replays_refused(self) -> Check:
        """Every proof read from a lease's hash was refused, and no fenced value changed."""
        replays = self.injections.lease_replays
        failures = [
            _fail(r.refused != r.attempts or not r.fenced_intact, f"lease replay on {r}")
            for r in replays
        ]
        return _check(
            "no lease proof read from Redis was accepted",
            failures,
            lease_replays=len(replays),
            lease_replay_attempts=sum(r.attempts for r in replays),
        )

    def no_secret(self, needles: Sequence[bytes], places: Sequence[Path]) -> Check:
        """No needle in any Redis key nor in any file among and below ``places``."""
        return secrets_check(scan_files(places, needles, scan_redis(self.client, needles)))

    def redaction_happened(self, markers: Sequence[str]) -> Check:
        """The planted texts did cross in allowlisted fields: each redaction marker (such as
        ``env`` for ``[REDACTED:env]``) is in some hub row."""
        wanted = {kind: f"[REDACTED:{kind}]".encode() for kind in markers}
        counts = dict.fromkeys(wanted, 0)
        for event in self.hub_events():
            for kind, marker in wanted.items():
                counts[kind] += marker in event.record
        return _check(
            "the planted secrets were redacted where they crossed",
            [
                _fail(
                    not all(counts.values()),
                    f"planted secrets never reached a crossing field: {counts}",
                )
            ],
            **{f"hub_rows_redacted_{kind}": n for kind, n in counts.items()},
        )


def relay_told(logs: str, key: Key) -> bool:
    """Whether a relay logged, in ``logs``, the hub's verdict on other bytes under ``key``."""
    project_id, run_id, sequence = key
    return f"project {project_id} run {run_id} sequence {sequence};" in logs


def expect_all(checks: Sequence[Check]) -> dict[str, int]:
    """Every check's figures; ``InvariantBroken`` naming every check that did not hold."""
    broken = [c for c in checks if not c.held]
    if broken:
        raise InvariantBroken(" | ".join(f"{c.name}: {'; '.join(c.failures)}" for c in broken))
    return {name: value for check in checks for name, value in check.figures.items()}


def secrets_check(scan: Scan) -> Check:
    """The check of a secret scan: it held if nothing was found."""
    return Check(
        "no secret in Redis, the hub, state dirs or logs",
        tuple(f"a planted secret is in {place}" for place in scan.found),
        {
            "redis_keys_scanned": scan.redis_keys,
            "redis_bytes_scanned": scan.redis_bytes,
            "file_bytes_scanned": scan.file_bytes,
        },
    )
