"""Resync: the hub asks a runtime to resend what it may lack; the runtime says how far it got.

Two signed messages (docs/contract.md, "Resync"), both HMAC-SHA256 under the runtime's
key like every other entry (``hubsync.core.tagged_signing.sign_tagged``), each with its own
domain tag and an exact field set:

* a **request** (hub -> runtime, ``kind=resync``) on the runtime's acks stream
  ``hubsync:{P}:acks:{R}``, where the relay already believes only what the hub it joined
  signed. It names the hub, the hub project and the runtime, carries a request id, the
  time it was issued, a scope (a project, a run) and the exact point to resync from:
  either the hub's per-run cursors (``RunCursor``: below and at ``cursor`` the hub holds
  every sequence of the run) or a time (``since``). Cursors travel in parts: part ``i``
  of ``n`` covers the runs ``(project_id, run_id)`` after ``after`` up to ``through``
  (None: no bound), so each part is exact on its own: a run it covers but does not list
  is one the hub holds nothing of.
* a **report** (runtime -> hub, ``kind=resync_report``) on the runtime's events stream:
  how many rows the request put back to pending and re-derived, and how many of them
  the hub has since judged (accepted, duplicate, refused) or not yet (``pending``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from hubsync.core.canonical import canonical_json
from hubsync.core.clock import format_timestamp, parse_timestamp
from hubsync.core.entries import field_set_problem
from hubsync.core.errors import ConfigError, WireError
from hubsync.core.names import validate_name
from hubsync.core.signing import HUB_ID_FIELD, SIGNATURE_FIELD, RuntimeKey
from hubsync.core.tagged_signing import sign_tagged, verify_tagged

KIND_RESYNC: Final = "resync"
KIND_RESYNC_REPORT: Final = "resync_report"
RESYNC_TAG: Final = b"hubsync/resync/v1"
RESYNC_REPORT_TAG: Final = b"hubsync/resync-report/v1"

RESYNC_SIGNED_FIELDS: Final = (
    HUB_ID_FIELD,
    "hub_project",
    "runtime_id",
    "request_id",
    "issued_at",
    "scope",
    "point",
    "part",
    "parts",
)
"""What a request's signature covers, in order."""

RESYNC_ENTRY_FIELDS: Final = frozenset(("kind", *RESYNC_SIGNED_FIELDS, SIGNATURE_FIELD))

REPORT_COUNTS: Final = ("requeued", "rederived", "accepted", "duplicate", "refused", "pending")
"""A report's counts, in the order they are signed."""

RESYNC_REPORT_SIGNED_FIELDS: Final = (
    "runtime_id",
    "hub_project",
    "request_id",
    *REPORT_COUNTS,
    "reported_at",
)
"""What a report's signature covers, in order."""

RESYNC_REPORT_ENTRY_FIELDS: Final = frozenset(
    ("kind", *RESYNC_REPORT_SIGNED_FIELDS, SIGNATURE_FIELD)
)

CURSORS_PER_PART: Final = 500
"""Run cursors one request entry carries at most (about 40 KB of JSON at the longest ids)."""

MAX_PARTS: Final = 100_000


class RunCursor(NamedTuple):
    """A run the hub holds: every sequence up to and including ``cursor`` is there."""

    project_id: str
    run_id: str
    cursor: int


RunKey = tuple[str, str]
"""``(project_id, run_id)``: the order parts cover runs in."""


@dataclass(frozen=True, slots=True)
class ResyncScope:
    """Which of the runtime's rows a request is about: all, one project's, one run's."""

    project_id: str | None = None
    run_id: str | None = None

    def includes(self, project_id: str, run_id: str | None = None) -> bool:
        """Whether ``project_id`` (and ``run_id``, when given) is in the scope."""
        if self.project_id is not None and project_id != self.project_id:
            return False
        return run_id is None or self.run_id is None or run_id == self.run_id

    def encoded(self) -> str:
        """The ``scope`` field."""
        return canonical_json({"project_id": self.project_id, "run_id": self.run_id}).decode()


@dataclass(frozen=True, slots=True)
class ResyncPoint:
    """Where to resync from: the hub's run cursors of one part, or a time."""

    since: str | None = None
    """Resend every row recorded at or after this time (canonical UTC text)."""
    cursors: tuple[RunCursor, ...] = ()
    after: RunKey | None = None
    through: RunKey | None = None
    _by_run: dict[RunKey, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_run.update(((c.project_id, c.run_id), c.cursor) for c in self.cursors)

    def covers(self, project_id: str, run_id: str) -> bool:
        """Whether this part speaks of the run (a ``since`` point covers every run)."""
        key = (project_id, run_id)
        if self.after is not None and key <= self.after:
            return False
        return self.through is None or key <= self.through

    def cursor_of(self, project_id: str, run_id: str) -> int:
        """The hub's cursor of a covered run: 0 for one it holds nothing of."""
        return self._by_run.get((project_id, run_id), 0)

    def encoded(self) -> str:
        """The ``point`` field."""
        if self.since is not None:
            return canonical_json({"since": self.since}).decode()
        document: dict[str, Any] = {
            "cursors": [list(c) for c in self.cursors],
            "after": None if self.after is None else list(self.after),
            "through": None if self.through is None else list(self.through),
        }
        return canonical_json(document).decode()


def cursor_parts(cursors: Sequence[RunCursor], size: int = CURSORS_PER_PART) -> list[ResyncPoint]:
    """The hub's cursors as the points of consecutive parts, which together cover every run."""
    ordered = sorted(cursors, key=lambda c: (c.project_id, c.run_id))
    chunks = [tuple(ordered[i : i + size]) for i in range(0, len(ordered), size)] or [()]
    points = []
    after: RunKey | None = None
    for n, chunk in enumerate(chunks, start=1):
        through = None if n == len(chunks) else (chunk[-1].project_id, chunk[-1].run_id)
        points.append(ResyncPoint(cursors=chunk, after=after, through=through))
        after = through
    return points


@dataclass(frozen=True, slots=True)
class ResyncRequest:
    """One part of a request to resync, as signed."""

    hub_id: str
    hub_project: str
    runtime_id: str
    request_id: str
    issued_at: str
    scope: ResyncScope
    point: ResyncPoint
    part: int = 1
    parts: int = 1

    def signed_fields(self, key: RuntimeKey) -> dict[str, str]:
        """The acks-stream entry of this part, signed with ``key``."""
        fields = {
            "kind": KIND_RESYNC,
            HUB_ID_FIELD: self.hub_id,
            "hub_project": self.hub_project,
            "runtime_id": self.runtime_id,
            "request_id": self.request_id,
            "issued_at": self.issued_at,
            "scope": self.scope.encoded(),
            "point": self.point.encoded(),
            "part": str(self.part),
            "parts": str(self.parts),
        }
        return _signed(fields, key, RESYNC_TAG, RESYNC_SIGNED_FIELDS)


@dataclass(frozen=True, slots=True)
class ResyncReport:
    """How far a runtime got with a request, for one hub project, as signed."""

    runtime_id: str
    hub_project: str
    request_id: str
    requeued: int
    rederived: int
    accepted: int
    duplicate: int
    refused: int
    pending: int
    reported_at: str

    @property
    def done(self) -> bool:
        """Whether the hub has judged every row the request put back."""
        return self.pending == 0

    def signed_fields(self, key: RuntimeKey) -> dict[str, str]:
        """The events-stream entry of this report, signed with ``key``."""
        fields = {"kind": KIND_RESYNC_REPORT}
        fields |= {name: str(getattr(self, name)) for name in RESYNC_REPORT_SIGNED_FIELDS}
        return _signed(fields, key, RESYNC_REPORT_TAG, RESYNC_REPORT_SIGNED_FIELDS)


def _signed(
    fields: dict[str, str], key: RuntimeKey, tag: bytes, signed: Sequence[str]
) -> dict[str, str]:
    """``fields`` with the ``sig`` of ``signed`` of them, in order, under ``tag``."""
    values = [fields[name].encode() for name in signed]
    return fields | {SIGNATURE_FIELD: sign_tagged(key, tag, values)}


def verify_resync_request(
    keys: Sequence[RuntimeKey], fields: Mapping[str, bytes]
) -> RuntimeKey | None:
    """The key among ``keys`` that signed this request entry, exactly its fields; or None."""
    return _verify(keys, fields, RESYNC_ENTRY_FIELDS, RESYNC_TAG, RESYNC_SIGNED_FIELDS)


def verify_resync_report(
    keys: Sequence[RuntimeKey], fields: Mapping[str, bytes]
) -> RuntimeKey | None:
    """The key among ``keys`` that signed this report entry, exactly its fields; or None."""
    return _verify(
        keys, fields, RESYNC_REPORT_ENTRY_FIELDS, RESYNC_REPORT_TAG, RESYNC_REPORT_SIGNED_FIELDS
    )


def _verify(
    keys: Sequence[RuntimeKey],
    fields: Mapping[str, bytes],
    expected: frozenset[str],
    tag: bytes,
    signed: Sequence[str],
) -> RuntimeKey | None:
    if field_set_problem(fields, expected) is not None:
        return None
    return verify_tagged(keys, tag, [fields[name] for name in signed], fields[SIGNATURE_FIELD])


def parse_resync_request(fields: Mapping[str, bytes]) -> ResyncRequest:
    """A verified request entry's content; ``WireError`` (``bad_resync``) if malformed."""
    text = _texts(fields, RESYNC_ENTRY_FIELDS)
    part, parts = _count(text, "part"), _count(text, "parts")
    if not 1 <= part <= parts <= MAX_PARTS:
        raise WireError("bad_resync", f"part {part} of {parts} is not a part")
    try:
        scope = json.loads(text["scope"])
        point = json.loads(text["point"])
        return ResyncRequest(
            hub_id=text[HUB_ID_FIELD],
            hub_project=_name(text["hub_project"], "hub project"),
            runtime_id=_name(text["runtime_id"], "runtime id"),
            request_id=_name(text["request_id"], "request id"),
            issued_at=_time(text["issued_at"]),
            scope=ResyncScope(_optional_name(scope["project_id"]), _optional_name(scope["run_id"])),
            point=_point(point),
            part=part,
            parts=parts,
        )
    except (ValueError, TypeError, KeyError, ConfigError) as exc:
        raise WireError("bad_resync", f"malformed resync request ({type(exc).__name__})") from None


def parse_resync_report(fields: Mapping[str, bytes]) -> ResyncReport:
    """A verified report entry's content; ``WireError`` (``bad_resync_report``) if malformed."""
    text = _texts(fields, RESYNC_REPORT_ENTRY_FIELDS)
    try:
        return ResyncReport(
            runtime_id=_name(text["runtime_id"], "runtime id"),
            hub_project=_name(text["hub_project"], "hub project"),
            request_id=_name(text["request_id"], "request id"),
            **{name: _count(text, name) for name in REPORT_COUNTS},
            reported_at=_time(text["reported_at"]),
        )
    except (ValueError, ConfigError) as exc:
        raise WireError("bad_resync_report", f"malformed resync report: {exc}") from None


def _texts(fields: Mapping[str, bytes], expected: frozenset[str]) -> dict[str, str]:
    problem = field_set_problem(fields, expected)
    if problem is not None:
        raise WireError("bad_resync", problem)
    try:
        return {name: value.decode("utf-8") for name, value in fields.items()}
    except UnicodeDecodeError:
        raise WireError("bad_resync", "a field is not UTF-8") from None


def _count(text: Mapping[str, str], name: str) -> int:
    value = text[name]
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise WireError("bad_resync", f"{name} is not a count")
    return int(value)


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(what)
    return validate_name(value, what)


def _optional_name(value: object) -> str | None:
    return None if value is None else _name(value, "scope")


def _time(value: str) -> str:
    return format_timestamp(parse_timestamp(value))


def _run_key(value: object) -> RunKey | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise TypeError("a run key is [project_id, run_id]")
    return (_name(value[0], "project id"), _name(value[1], "run id"))


def _point(document: dict[str, Any]) -> ResyncPoint:
    if set(document) == {"since"}:
        return ResyncPoint(since=_time(document["since"]))
    if set(document) != {"cursors", "after", "through"}:
        raise KeyError("point")
    cursors = []
    for item in document["cursors"]:
        project_id, run_id, cursor = item
        if type(cursor) is not int or cursor < 0:
            raise TypeError("cursor")
        cursors.append(RunCursor(_name(project_id, "project id"), _name(run_id, "run id"), cursor))
    return ResyncPoint(
        cursors=tuple(cursors),
        after=_run_key(document["after"]),
        through=_run_key(document["through"]),
    )
