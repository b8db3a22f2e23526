"""What ``hubsync status`` gathers (``StatusReport``) and how it is drawn with rich."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from consumers.views.queue_status import HealthKey, HubProjectStatus
from hubstore.resyncs import ResyncGroup
from hubsync.core.durations import format_duration
from hubsync.core.redis_values import printable
from producers.store.outbox_status import LocalStatus

UNWRAPPED_WIDTH = 10_000
"""Console width of one-shot output: wider than any table, so no cell is ever folded.

Tables keep their natural width (they do not expand); a terminal narrower than
a table shows its long lines as it shows any long line, and an id or a path is
never cut in two, on screen, in a pipe or in a log. Only ``--watch`` fits its
redraws to the terminal (folding cells), since a redraw must know its height.
"""


def unwrapped_console() -> Console:
    """The console one-shot status output goes to: colours on a terminal, never a folded cell."""
    return Console(highlight=False, width=UNWRAPPED_WIDTH)


@dataclass
class StatusReport:
    """One snapshot of the pipeline: Redis and hub side, and the local runtime."""

    generated_at: str
    redis_url: str
    redis_reachable: bool | None
    """None when Redis was not asked (``--no-redis``)."""
    redis_error: str | None = None
    hub_db: str | None = None
    hub_projects: list[HubProjectStatus] = field(default_factory=list)
    health: list[HealthKey] = field(default_factory=list)
    local: LocalStatus | None = None
    resyncs: list[ResyncGroup] = field(default_factory=list)
    """The resyncs in progress at the hub store, and the latest one once it is done."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``hubsync status --json``."""
        return {
            "generated_at": self.generated_at,
            "redis": {
                "url": self.redis_url,
                "reachable": self.redis_reachable,
                "error": self.redis_error,
            },
            "hub_db": self.hub_db,
            "hub_projects": [p.as_dict() for p in self.hub_projects],
            "health": [h.as_dict() for h in self.health],
            "local": None if self.local is None else self.local.as_dict(),
            "resyncs": [g.as_dict() | {"finished": g.finished} for g in self.resyncs],
            "unhealthy": self.unhealthy(),
        }

    def unhealthy(self) -> list[str]:
        """What ``--fail-on-stale`` fails on, one sentence each: a runtime flagged stale (no
        presence beat for ``--stale-after``), a member of group ``hub`` without a live
        health key (dead), and a hub project no live consumer reads."""
        found = []
        for p in self.hub_projects:
            project = printable(p.hub_project)
            for r in p.runtimes:
                if r.stale:
                    found.append(
                        f"runtime {printable(r.runtime_id)} of hub project {project}: stale, "
                        f"its last presence beat was {age(r.age_seconds)} ago"
                    )
            for c in p.group.consumers if p.group else ():
                if c.alive is False:
                    found.append(
                        f"consumer {printable(c.name)} in group hub of {project}: dead, "
                        f"no live health key (it holds {c.pending} pending)"
                    )
            if not p.live_consumers:
                found.append(f"hub project {project}: no live consumer reads it")
        return found


def age(seconds: float | None) -> str:
    """``4.2s``, ``3m07s``, ``2h05m``, ``3d04h`` (``format_duration``); ``-`` for None."""
    return "-" if seconds is None else format_duration(seconds)


def _number(value: int | None) -> str:
    return "?" if value is None else str(value)


def _cell(value: object) -> Text:
    """A cell of text that came from Redis or a store: control characters escaped, and a
    ``Text`` so rich never reads ``[...]`` in it as markup."""
    return Text(printable(value))


def render(report: StatusReport) -> RenderableType:
    """The whole report as rich tables."""
    parts: list[RenderableType] = [_redis_line(report)]
    if report.redis_reachable:
        parts.append(_projects_table(report))
        if any((p.group and p.group.consumers) or p.live_consumers for p in report.hub_projects):
            parts.append(_consumers_table(report))
        if any(p.streams for p in report.hub_projects):
            parts.append(_streams_table(report))
        if any(p.runtimes for p in report.hub_projects):
            parts.append(_runtimes_table(report))
        if report.health:
            parts.append(_health_table(report))
    if report.local is not None:
        parts.append(_local_table(report.local))
    for group in report.resyncs:
        parts.append(Text(group.line(), "green" if group.finished else "yellow"))
    unhealthy = report.unhealthy()
    if unhealthy:
        parts.append(Text("\n".join(["unhealthy:", *(f"  {u}" for u in unhealthy)]), "red"))
    return Group(*parts)


def _redis_line(report: StatusReport) -> Text:
    stamp = f"hubsync status at {report.generated_at}: "
    if report.redis_reachable is None:
        return Text(stamp + "Redis not asked (--no-redis)")
    if not report.redis_reachable:
        failure = printable(f"cannot reach Redis {report.redis_url}: {report.redis_error}")
        return Text(stamp + failure, "red")
    hub = f", hub db {report.hub_db}" if report.hub_db else ""
    return Text(stamp + f"Redis {report.redis_url}{hub}")


def _table(title: str, text_columns: int, *columns: str) -> Table:
    """A table whose first ``text_columns`` columns are text (left) and the rest numbers."""
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        justify: Literal["left", "right"] = "left" if index < text_columns else "right"
        table.add_column(column, justify=justify, overflow="fold")
    return table


def _projects_table(report: StatusReport) -> Table:
    table = _table(
        "hub projects (streams hubsync:{P}:events:{R}, group hub)",
        1,
        "project",
        "len",
        "lag",
        "pending",
        "oldest",
        "consumers",
        "dead",
        "alerts",
        "hub events",
        "hub alerts",
    )
    for p in report.hub_projects:
        group = p.group
        table.add_row(
            _cell(p.hub_project),
            str(p.length),
            _number(group.lag) if group else "no group",
            str(group.pending) if group else "-",
            age(group.oldest_pending_age_seconds) if group else "-",
            _consumer_count(p),
            Text(str(p.dead_letters), "yellow" if p.dead_letters else ""),
            Text(str(p.alerts), "red" if p.alerts else ""),
            str(p.hub_db.events) if p.hub_db else "-",
            str(p.hub_db.alerts) if p.hub_db else "-",
        )
    if not report.hub_projects:
        table.caption = "no hub project in hubsync:projects yet"
    return table


def _consumer_count(p: HubProjectStatus) -> Text:
    """``2 live``, or ``1 live, 1 DEAD`` in red: live health keys, and group members without."""
    dead = sum(c.alive is False for c in p.group.consumers) if p.group else 0
    text = Text(f"{len(p.live_consumers)} live", "" if p.live_consumers else "red")
    if dead:
        text.append(f", {dead} DEAD", "red")
    return text


def _consumers_table(report: StatusReport) -> Table:
    table = _table("consumers (group hub)", 3, "project", "consumer", "state", "pending", "idle")
    for p in report.hub_projects:
        members = p.group.consumers if p.group else []
        for c in members:
            state = Text("live") if c.alive is not False else Text("DEAD", "red")
            table.add_row(
                _cell(p.hub_project), _cell(c.name), state, str(c.pending), age(c.idle_seconds)
            )
        joined = {c.name for c in members}
        for name in p.live_consumers:
            if name not in joined:  # started, and has not read this project's group yet
                table.add_row(_cell(p.hub_project), _cell(name), "live, no read yet", "-", "-")
    return table


def _streams_table(report: StatusReport) -> Table:
    table = _table(
        "events streams, per runtime (not yet stored at the hub)",
        2,
        "project",
        "runtime",
        "len",
        "unstored",
        "oldest unstored",
    )
    for p in report.hub_projects:
        for r in p.streams:
            table.add_row(
                _cell(p.hub_project),
                _cell(r.runtime_id or "(shared, draining)"),
                str(r.length),
                Text(str(r.unstored), "yellow" if r.unstored else ""),
                age(r.oldest_unstored_age_seconds),
            )
    return table


def _runtimes_table(report: StatusReport) -> Table:
    table = _table(
        "runtimes",
        5,
        "project",
        "runtime",
        "host",
        "last heartbeat",
        "stale",
        "age",
        "backlog at beat",
        "unstored at hub",
        "oldest unstored",
        "from",
    )
    for p in report.hub_projects:
        for r in p.runtimes:
            table.add_row(
                _cell(p.hub_project),
                _cell(r.runtime_id),
                _cell(r.host),
                _cell(r.heartbeat),
                Text("STALE", "red") if r.stale else "no",
                age(r.age_seconds),
                # the outbox as it was at that beat: the local table shows it as it is now
                f"{r.backlog} ({age(r.age_seconds)} ago)",
                # the hub's lag on its stream now: with the backlog, where its rows are
                Text(_number(r.unstored), "yellow" if r.unstored else ""),
                age(r.oldest_unstored_age_seconds),
                _cell(r.source),
            )
    return table


def _health_table(report: StatusReport) -> Table:
    table = _table("health keys", 2, "kind", "name", "ttl", "last beat")
    for h in report.health:
        table.add_row(
            _cell(h.kind), _cell(h.name), age(h.ttl_seconds), _cell(h.record.get("at", "?"))
        )
    return table


def _local_table(local: LocalStatus) -> Table:
    table = _table(
        f"local outbox of runtime {local.runtime_id} ({local.state_dir})",
        3,
        "project",
        "hub project",
        "state",
        "pending",
        "attempted",
        "acked",
        "conflict",
        "rejected",
        "oldest",
    )
    for p in local.projects:
        table.add_row(
            _cell(p.project_id),
            _cell(p.hub_project),
            Text(p.state.upper(), "red") if p.state == "unreadable" else p.state,
            _number(p.pending),
            _number(p.attempted),
            _number(p.acked),
            Text(_number(p.conflict), "red" if p.conflict else ""),
            Text(_number(p.rejected), "yellow" if p.rejected else ""),
            age(p.oldest_pending_age_seconds),
        )
    if not local.projects:
        table.caption = "no project registered to this runtime"
    unreadable = [
        printable(f"{p.project_id} unreadable: {p.reason}") for p in local.projects if p.reason
    ]
    if unreadable:
        table.caption = Text("\n".join(unreadable), "red")
        table.caption_style, table.caption_justify = "red", "left"
    return table
