"""Operator actions on a hub project's dead letters (``hubsync:{P}:dead``): list, replay, purge.

A dead letter keeps its entry's original fields as ``field.<name>`` (see
``consumers.stream.publishing``). Replay puts exactly those fields back on
``hubsync:{P}:events`` and deletes the letter, both inside one Redis function
(``dead_replay.lua``), so a letter is replayed at most once even when two
operators replay it at the same time. A letter whose fields were cut to a
preview when it was recorded (listed in its ``truncated`` field) can never be
replayed: the bytes are gone, and what is left would only die again. Nor can a
forgery's (an entry that did not authenticate: ``FORGERY_REASONS``): replay cannot
make it genuine, it would only be refused and raise its alert again.

Listing shows what a letter is about (reason, detail, source entry, the key it
named) but never the event bytes or other field values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from consumers.errors import DeadLetterNotFoundError, DeadLetterNotReplayableError
from consumers.stream.publishing import DeadLetter, parse_dead_letter
from consumers.views.projects import require_hub_project
from hubstore.redis_functions import functions_for
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.entries import SecurityReason, decode_fields
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import as_text, redis_now_ms

STREAM_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
"""A full stream entry id, ``<milliseconds>-<sequence>``."""

PAGE = 500
"""Entries read per XRANGE while walking a dead-letter stream."""

KEY_FIELDS = ("project_id", "run_id", "sequence", "runtime_id", "event_type", "kind")
"""Original fields a listing shows as text (ids, bounded): what the letter was about."""

_SHOWN_FIELD_CHARS = 128

FORGERY_REASONS = frozenset({SecurityReason.UNAUTHENTICATED, SecurityReason.NOT_ENROLLED})
"""Dead-letter reasons of entries that did not authenticate: never replayable."""


def validate_entry_id(text: str) -> str:
    """``text`` if it is a full stream entry id (``1700000000000-0``); ``ConfigError`` if not."""
    if not STREAM_ID.fullmatch(text):
        raise ConfigError(
            f"{text[:40]!r} is not a dead-letter id; ids look like 1700000000000-0 "
            "(see `hubsync dead list`)"
        )
    return text


@dataclass(frozen=True, slots=True)
class ListedDeadLetter:
    """One dead letter and its entry id on the dead-letter stream."""

    entry_id: str
    letter: DeadLetter

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: metadata and the key it named, never field values beyond ids."""
        letter = self.letter
        return {
            "id": self.entry_id,
            "reason": letter.reason,
            "detail": letter.detail,
            "source_stream": letter.source_stream,
            "source_id": letter.source_id,
            "consumer": letter.consumer,
            "dead_at": letter.dead_at,
            "deliveries": letter.deliveries,
            "replayable": self.replayable,
            "truncated": dict(letter.truncated),
            "fields": {name: len(value) for name, value in letter.fields.items()},
            "key": self.key_fields(),
        }

    @property
    def replayable(self) -> bool:
        """True when replay can put the original entry back whole, and it was no forgery."""
        return self.not_replayable_because is None

    @property
    def not_replayable_because(self) -> str | None:
        """Why replay refuses this letter: ``truncated`` (only a preview of its fields was
        kept), ``forged`` (it did not authenticate) or ``empty``; None if it may."""
        if not self.letter.replayable:
            return "truncated"
        if self.letter.reason in FORGERY_REASONS:
            return "forged"
        return None if self.letter.fields else "empty"

    def key_fields(self) -> dict[str, str]:
        """The identifying fields the entry carried, when they are short printable text."""
        shown: dict[str, str] = {}
        for name in KEY_FIELDS:
            value = self.letter.fields.get(name)
            if value is None or len(value) > _SHOWN_FIELD_CHARS:
                continue
            text = value.decode("utf-8", "replace")
            if text.isprintable():
                shown[name] = text
        return shown


@dataclass
class ReplayResult:
    """What a replay did: ``(dead id, new events id)`` pairs, and letters it left alone."""

    replayed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """``(dead id, why)``: ``forged``, ``truncated``, ``empty``, ``missing``, or ``unknown_stream`` (it
    names no events stream of its hub project to go back to)."""
    streams: set[str] = field(default_factory=set)
    """The events streams letters went back to."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "replayed": [{"id": dead, "new_id": new} for dead, new in self.replayed],
            "skipped": [{"id": dead, "why": why} for dead, why in self.skipped],
        }


class DeadLetters:
    """The dead-letter stream of one hub project, for operator tools."""

    def __init__(self, client: RedisClient, hub_project: str) -> None:
        """Open ``hub_project``'s dead letters; ``UnknownHubProjectError`` if Redis never saw it."""
        self.client = client
        self.hub_project = require_hub_project(client, hub_project)
        self.stream = keys.dead_stream(self.hub_project)
        self._replay = functions_for(client).dead_replay

    def count(self) -> int:
        """How many dead letters the project has."""
        return int(self.client.xlen(self.stream))

    def letters(self, count: int = 50, reason: str | None = None) -> list[ListedDeadLetter]:
        """Up to ``count`` dead letters, oldest first, optionally only those of ``reason``."""
        out: list[ListedDeadLetter] = []
        for listed in self._walk():
            if reason is None or listed.letter.reason == reason:
                out.append(listed)
                if len(out) >= count:
                    break
        return out

    def get(self, ids: Sequence[str]) -> dict[str, ListedDeadLetter]:
        """The letters among ``ids`` that exist (ids are validated first)."""
        wanted = [validate_entry_id(i) for i in ids]
        pipe = self.client.pipeline(transaction=False)
        for entry_id in wanted:
            pipe.xrange(self.stream, entry_id, entry_id)
        found: dict[str, ListedDeadLetter] = {}
        replies: list[Any] = pipe.execute()
        for entry_id, reply in zip(wanted, replies, strict=True):
            for raw_id, raw in reply:
                found[entry_id] = _listed(raw_id, raw)
        return found

    def home_stream(self, letter: DeadLetter) -> str | None:
        """The events stream ``letter`` goes back to: the one it came from, when that is an
        events stream of this hub project (a runtime's, or the shared one); else None."""
        source = letter.source_stream
        runtime = keys.runtime_of(source)
        try:
            home = (
                keys.shared_events_stream(self.hub_project)
                if runtime is None
                else keys.events_stream(self.hub_project, runtime)
            )
        except ConfigError:
            return None
        return home if home == source else None

    def replay(self, ids: Sequence[str]) -> ReplayResult:
        """Put these letters back on the events streams they came from; all or nothing.

        Every id must name an existing, whole letter, or nothing is replayed:
        ``DeadLetterNotFoundError`` / ``DeadLetterNotReplayableError`` say which.
        """
        found = self._require(ids)
        refused = {i: found[i].not_replayable_because for i in dict.fromkeys(ids)}
        forged = [i for i, why in refused.items() if why == "forged"]
        cut = [i for i, why in refused.items() if why not in (None, "forged")]
        if forged or cut:
            reasons = []
            if cut:
                reasons.append(
                    f"dead letter(s) {', '.join(cut[:10])} kept only a preview of their fields "
                    "(see 'truncated' in `hubsync dead list --json`)"
                )
            if forged:
                reasons.append(
                    f"dead letter(s) {', '.join(forged[:10])} are of entries that did not "
                    "authenticate (forgeries: replay cannot make them genuine)"
                )
            raise DeadLetterNotReplayableError(
                "; ".join(reasons) + ", so they cannot be replayed; nothing was replayed. "
                "Purge them once you have read them"
            )
        return self._run_replay([found[i] for i in dict.fromkeys(ids)])

    def replay_all(self, reason: str | None = None) -> ReplayResult:
        """Replay every whole letter (of ``reason``); cut ones are skipped and listed."""
        result = ReplayResult()
        batch: list[ListedDeadLetter] = []
        for listed in self._walk():
            if reason is not None and listed.letter.reason != reason:
                continue
            why = listed.not_replayable_because
            if why is not None:
                result.skipped.append((listed.entry_id, why))
                continue
            batch.append(listed)
            if len(batch) >= PAGE:
                _merge(result, self._run_replay(batch))
                batch = []
        if batch:
            _merge(result, self._run_replay(batch))
        return result

    def purge(self, ids: Sequence[str]) -> int:
        """Delete these letters; all or nothing (``DeadLetterNotFoundError`` if one is missing)."""
        self._require(ids)
        return int(self.client.xdel(self.stream, *dict.fromkeys(ids)))

    def purge_all(self) -> int:
        """Delete every letter of the project; how many."""
        return int(self.client.xtrim(self.stream, maxlen=0, approximate=False))

    def purge_older_than(self, seconds: float) -> int:
        """Delete letters dead-lettered more than ``seconds`` ago (Redis's clock); how many."""
        cutoff_ms = redis_now_ms(self.client) - int(seconds * 1000)
        if cutoff_ms <= 0:
            return 0
        # An entry id starts with the Redis time it was added at: MINID keeps the newer ones.
        return int(self.client.xtrim(self.stream, minid=f"{cutoff_ms}-0", approximate=False))

    # ----- internals -----

    def _require(self, ids: Sequence[str]) -> dict[str, ListedDeadLetter]:
        if not ids:
            raise ConfigError("name at least one dead-letter id (or use --all)")
        found = self.get(ids)
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            raise DeadLetterNotFoundError(
                f"no dead letter {', '.join(missing[:10])} in {self.stream}; nothing was changed "
                "(list them with `hubsync dead list`)"
            )
        return found

    def _run_replay(self, letters: list[ListedDeadLetter]) -> ReplayResult:
        """Replay ``letters``: one script call per events stream they go back to."""
        result = ReplayResult()
        by_stream: dict[str, list[str]] = {}
        for listed in letters:
            home = self.home_stream(listed.letter)
            if home is None:
                result.skipped.append((listed.entry_id, "unknown_stream"))
            else:
                by_stream.setdefault(home, []).append(listed.entry_id)
        for stream, ids in by_stream.items():
            reply = self._replay(keys=[self.stream, stream], args=ids)
            for entry_id, (status, new_id) in zip(ids, reply, strict=True):
                status_text = as_text(status)
                if status_text == "replayed":
                    result.replayed.append((entry_id, as_text(new_id)))
                    result.streams.add(stream)
                else:
                    result.skipped.append((entry_id, status_text))
        return result

    def _walk(self) -> Iterator[ListedDeadLetter]:
        start = "-"
        while True:
            page: Any = self.client.xrange(self.stream, start, "+", count=PAGE)
            for raw_id, raw in page:
                yield _listed(raw_id, raw)
            if len(page) < PAGE:
                return
            start = "(" + as_text(page[-1][0])


def _listed(raw_id: bytes | str, raw: Any) -> ListedDeadLetter:
    return ListedDeadLetter(as_text(raw_id), parse_dead_letter(decode_fields(raw or {})))


def _merge(into: ReplayResult, other: ReplayResult) -> None:
    into.replayed.extend(other.replayed)
    into.skipped.extend(other.skipped)
    into.streams.update(other.streams)
