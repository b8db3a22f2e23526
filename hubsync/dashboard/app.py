"""The dashboard's Starlette application: its pages, its confirmed actions, its sampler.

Pages are rendered on the server by Jinja2 with autoescape on, and every value
goes first through the CLI's printable rule (``shown``): control characters,
line separators and bidi overrides escaped as ``\\x..``/``\\u....``, then HTML
escaping. The main page polls ``/live`` for its live part. Actions (replay
and purge dead letters, remove a consumer, resolve a parked effect) exist only with
``allow_actions``:
each is a confirmation page whose form carries a ``Confirmations`` token,
then a POST that runs the CLI's own code.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import anyio
import redis
from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from consumers.errors import UnknownHubProjectError
from hubsync.cli.effects import default_actor
from hubsync.cli.paging import (
    decode_event_cursor,
    decode_run_cursor,
    encode_cursor,
)
from hubsync.cli.status_view import age
from hubsync.core.errors import ConfigError, HubsyncError, RedisUnavailableError
from hubsync.core.names import validate_name
from hubsync.core.redis_values import printable
from hubsync.dashboard.guard import LOOPBACK_NAMES, BearerGuard, Confirmations, is_loopback
from hubsync.dashboard.history import WINDOW_SECONDS, sparkline_points
from hubsync.dashboard.sources import PAGE_ROWS, Sources
from producers.effects import EffectRefused, review

log = logging.getLogger(__name__)

PAGE_HEADERS = {
    # No script but the dashboard's own file, no frame around a page (a confirmation button
    # cannot be clicked through someone else's page), forms post only here.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; "
    "style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Headers of every page the dashboard serves."""


@dataclass(frozen=True)
class DashboardConfig:
    """How one dashboard serves: where, to whom, what it may do, how it judges ages."""

    host: str
    token: str | None
    allow_actions: bool
    amber_after: float
    """Oldest-pending age (seconds) shown amber from."""
    red_after: float
    """Oldest-pending age (seconds) shown red from."""
    refresh: float
    """Seconds between the main page's live updates, and between samples."""


def shown(value: object) -> object:
    """Every ``{{ value }}`` of a template: markup built here as it is, None as ``-``, anything
    else through the CLI's printable rule (HTML escaping follows, by autoescape)."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return "-"
    return printable(value)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("hubsync.dashboard", "templates"),
        autoescape=True,
        finalize=shown,
    )
    env.filters["age"] = age
    env.filters["spark"] = lambda points: sparkline_points(points, 240, 40)
    return env


class Dashboard:
    """The routes, bound to one deployment's ``Sources``."""

    def __init__(self, sources: Sources, config: DashboardConfig) -> None:
        self.sources = sources
        self.config = config
        self.confirmations = Confirmations()
        self.templates = Jinja2Templates(env=_environment())
        self._poll_script = (
            resources.files("hubsync.dashboard").joinpath("templates/poll.js").read_bytes()
        )

    def app(self) -> Starlette:
        """The ASGI application: routes, the host check on loopback, the bearer guard."""
        middleware = []
        if self.config.token is not None:
            middleware.append(Middleware(BearerGuard, token=self.config.token))
        if is_loopback(self.config.host):
            hosts = [*LOOPBACK_NAMES, "[::1]"]
            middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
        routes = [
            Route("/", self.index),
            Route("/live", self.live),
            Route("/healthz", self.healthz),
            Route("/poll.js", self.poll_script),
            Route("/dead", self.dead),
            Route("/dead/{action}", self.dead_action, methods=["GET", "POST"]),
            Route("/runs", self.runs),
            Route("/events", self.events),
            Route("/consumers/remove", self.remove_consumer, methods=["GET", "POST"]),
            Route("/effects/resolve", self.resolve_effect, methods=["GET", "POST"]),
        ]
        return Starlette(
            routes=routes,
            middleware=middleware,
            lifespan=self._lifespan,
            exception_handlers={
                HubsyncError: self._refused,
                redis.ConnectionError: self._unreachable,
                redis.TimeoutError: self._unreachable,
                redis.RedisError: self._redis_refused,
            },
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Sample every ``refresh`` seconds while serving, so the sparklines fill unwatched."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._sample_forever)
            yield
            tasks.cancel_scope.cancel()

    async def _sample_forever(self) -> None:
        while True:
            try:
                await anyio.to_thread.run_sync(self.sources.sample)
            except (HubsyncError, redis.RedisError) as exc:  # a busy store, a refused command
                log.warning("dashboard sample skipped: %s", printable(exc))
            await anyio.sleep(self.config.refresh)

    # ----- pages -----

    def healthz(self, request: Request) -> Response:
        """Liveness: 200 while serving."""
        return PlainTextResponse("ok\n")

    def poll_script(self, request: Request) -> Response:
        """The main page's polling script (no inline script anywhere: see ``PAGE_HEADERS``)."""
        return Response(self._poll_script, media_type="text/javascript", headers=PAGE_HEADERS)

    def index(self, request: Request) -> Response:
        """The main page: alerts first, then a card per hub project, runtimes, daemons."""
        return self._page(request, "index.html", self._overview())

    def live(self, request: Request) -> Response:
        """The main page's live part alone, which the page polls."""
        return self._page(request, "live.html", self._overview())

    def dead(self, request: Request) -> Response:
        """A hub project's dead letters by reason, with replay and purge under actions."""
        project = _project(request.query_params)
        reason = request.query_params.get("reason") or None
        page = self.sources.dead_letters(project, reason)
        return self._page(
            request, "dead.html", {"project": project, "reason": reason, "page": page}
        )

    def runs(self, request: Request) -> Response:
        """The runs the hub stored, a page at a time: events, sync cursor, gaps."""
        project = _project(request.query_params)
        after = _cursor(request, decode_run_cursor)
        limit = _limit(request)
        found = self.sources.runs(project, after, limit)
        page, more = found[:limit], len(found) > limit
        context = {
            "project": project,
            "runs": page,
            "limit": limit,
            "next": encode_cursor("runs", page[-1].position) if more else None,
        }
        return self._page(request, "runs.html", context)

    def events(self, request: Request) -> Response:
        """The events the hub stored (of one run), a page at a time; never their bytes."""
        project = _project(request.query_params)
        run = request.query_params.get("run") or None
        run_id = None if run is None else validate_name(run, "run id")
        after = _cursor(request, decode_event_cursor)
        limit = _limit(request)
        found = self.sources.events(project, run_id, after, limit)
        page, more = found[:limit], len(found) > limit
        context = {
            "project": project,
            "run_id": run_id,
            "events": page,
            "limit": limit,
            "next": encode_cursor("events", page[-1].position) if more else None,
        }
        return self._page(request, "events.html", context)

    # ----- actions -----

    async def dead_action(self, request: Request) -> Response:
        """Replay or purge one dead letter: a confirmation page, then the POST that does it."""
        action = request.path_params["action"]
        if action not in ("replay", "purge"):
            return self._error(request, 404, "no such action on dead letters (replay, purge)")
        if not self.config.allow_actions:
            return self._actions_off(request)
        form = await request.form() if request.method == "POST" else request.query_params
        project = _project(form)
        entry_id = str(form.get("id", ""))
        target = f"{project}/dead"
        if request.method == "GET":
            letter = await anyio.to_thread.run_sync(self.sources.dead_letter, project, entry_id)
            if letter is None:
                return self._error(request, 404, f"no dead letter {entry_id} in {project}")
            context = {
                "action": action,
                "project": project,
                "letter": letter,
                "id": entry_id,
                "csrf": self.confirmations.token(action, target, [entry_id]),
            }
            return self._page(request, "confirm.html", context)
        if not self.confirmations.valid(str(form.get("csrf", "")), action, target, [entry_id]):
            return self._error(request, 403, "this action was not confirmed on its own page")
        if action == "replay":
            result = await anyio.to_thread.run_sync(self.sources.replay, project, [entry_id])
            done = f"replayed {len(result.replayed)} dead letter(s) onto " + (
                ", ".join(sorted(result.streams)) or "no stream"
            )
            if result.skipped:
                done += "; skipped " + ", ".join(f"{i} ({why})" for i, why in result.skipped)
        else:
            removed = await anyio.to_thread.run_sync(self.sources.purge, project, [entry_id])
            done = f"purged {removed} dead letter(s) from {project}"
        back = "/dead?" + urlencode({"project": project})
        return self._page(request, "done.html", {"done": done, "back": back})

    async def remove_consumer(self, request: Request) -> Response:
        """``consumers remove NAME``: a confirmation page, then the POST that does it."""
        if not self.config.allow_actions:
            return self._actions_off(request)
        form = await request.form() if request.method == "POST" else request.query_params
        name = validate_name(str(form.get("name", "")), "consumer name")
        if request.method == "GET":
            csrf = self.confirmations.token("remove", name)
            return self._page(
                request, "confirm.html", {"action": "remove", "name": name, "csrf": csrf}
            )
        if not self.confirmations.valid(str(form.get("csrf", "")), "remove", name):
            return self._error(request, 403, "this action was not confirmed on its own page")
        removal = await anyio.to_thread.run_sync(self.sources.remove_consumer, name)
        handed = (
            f"{removal.moved} pending entries handed to {removal.to}"
            if removal.moved
            else "nothing pending"
        )
        done = f"removed consumer {removal.name} from {removal.streams} stream(s); {handed}"
        return self._page(request, "done.html", {"done": done, "back": "/"})

    async def resolve_effect(self, request: Request) -> Response:
        """``effects resolve KEY``: a confirmation page asking the verdict and the note, then
        the POST that gives it (audited: this dashboard's user and host, and the note)."""
        if not self.config.allow_actions:
            return self._actions_off(request)
        form = await request.form() if request.method == "POST" else request.query_params
        ledger_text, key = str(form.get("ledger", "")), str(form.get("key", ""))
        if not ledger_text.isdecimal():
            raise ConfigError("ledger must be the number of a ledger the dashboard lists")
        ledger = int(ledger_text)
        if request.method == "GET":
            view = await anyio.to_thread.run_sync(self.sources.effect, ledger, key)
            if view is None:
                return self._error(request, 404, f"no effect {key} parked blocked_uncertain")
            context = {
                "action": "resolve",
                "ledger": ledger,
                "effect": view.as_dict(),
                "csrf": self.confirmations.token("resolve", str(ledger), [key]),
            }
            return self._page(request, "confirm.html", context)
        if not self.confirmations.valid(str(form.get("csrf", "")), "resolve", str(ledger), [key]):
            return self._error(request, 403, "this action was not confirmed on its own page")
        verdict_text = str(form.get("verdict", ""))
        if verdict_text not in {v.value for v in review.Verdict}:
            raise ConfigError("choose a verdict: committed or not-executed")
        verdict = review.Verdict(verdict_text)
        actor = f"dashboard {default_actor()}"
        note = str(form.get("note", ""))
        done = await anyio.to_thread.run_sync(
            self.sources.resolve_effect, ledger, key, verdict, note, actor
        )
        if isinstance(done, EffectRefused):
            return self._error(request, 409, done.message)
        after = (
            "committed"
            if verdict is review.Verdict.COMMITTED
            else "its row dropped; a retry may claim it"
        )
        message = f"{key}: resolved {verdict.value} by {actor}; {after}"
        return self._page(request, "done.html", {"done": message, "back": "/"})

    # ----- helpers -----

    def _overview(self) -> dict[str, Any]:
        return {"o": self.sources.overview(), "has_hub_store": self.sources.has_hub_store}

    def _page(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> Response:
        context = {
            "config": self.config,
            "series": self.sources.history.series,
            "window_minutes": int(WINDOW_SECONDS // 60),
            **context,
        }
        return self.templates.TemplateResponse(
            request, name, context, status_code=status, headers=PAGE_HEADERS
        )

    def _error(self, request: Request, status: int, message: str) -> Response:
        return self._page(request, "error.html", {"message": message}, status)

    def _actions_off(self, request: Request) -> Response:
        return self._error(
            request, 403, "actions are off: this dashboard was started without --allow-actions"
        )

    async def _unreachable(self, request: Request, exc: Exception) -> Response:
        """Redis did not answer: a 503 page naming the error's kind (never its text, which may
        name the URL); the next request tries again."""
        await anyio.to_thread.run_sync(self.sources.drop_redis)
        return self._error(request, 503, f"cannot reach Redis ({type(exc).__name__})")

    async def _redis_refused(self, request: Request, exc: Exception) -> Response:
        """Redis refused a command (an ACL user without the right, a key of another type):
        a 502 page with Redis's one line (it names the command, never a secret)."""
        return self._error(request, 502, f"Redis refused a command: {exc}")

    async def _refused(self, request: Request, exc: Exception) -> Response:
        """A hubsync error (bad id, unknown project, refused action) as a page, never a trace."""
        if isinstance(exc, RedisUnavailableError):
            return await self._unreachable(request, exc)
        status = 404 if isinstance(exc, UnknownHubProjectError) else 400
        if not isinstance(exc, ConfigError):
            status = 409  # a refusal of the action as asked (not replayable, consumer running)
        return self._error(request, status, str(exc))


def _project(params: Mapping[str, Any]) -> str:
    """The ``project`` parameter, checked as the CLI checks a hub project (else a 400 page)."""
    return validate_name(str(params.get("project", "")), "hub project")


def _limit(request: Request) -> int:
    """Rows per page: ``limit`` (1 to ``PAGE_ROWS``), as ``--limit`` of the commands."""
    text = request.query_params.get("limit", str(PAGE_ROWS))
    if not text.isdecimal() or not 1 <= int(text) <= PAGE_ROWS:
        raise ConfigError(f"limit must be a whole number from 1 to {PAGE_ROWS}")
    return int(text)


def _cursor(request: Request, decode: Callable[[str], Any]) -> Any:
    after = request.query_params.get("after")
    return None if after is None else decode(after)
