"""The ``forge`` executor: ``pr-create`` and ``tracker-issue`` on the GitHub REST API (or a
forge speaking it: GitHub Enterprise at ``https://HOST/api/v3``, and compatible ones).

It is idempotent by looking first, since a forge offers no idempotency key:

* ``pr-create`` (target ``OWNER/REPO:BASE...HEAD``) lists the open pull requests
  from HEAD into BASE and returns the one it finds as the receipt;
* ``tracker-issue`` (target ``OWNER/REPO``, or ``OWNER/REPO#NAME`` to open more
  than one issue from one step) writes the effect key into the issue body as a
  hidden marker (an HTML comment) and looks for it in the repository's issues.

Only when nothing is found does it create. Failures follow the executor errors
(``consumers.jobs.effect_executors.http_exchange``): 429 and 503 mean nothing was
created; a refused look changed nothing either. A create whose outcome is unknown
(a timeout once the request was sent, a connection lost, another 5xx) or that
was refused (GitHub refuses a second pull request for one head and base) is
settled by looking again: found, it is the receipt; not found, the attempt is
parked ``blocked_uncertain`` (a slow forge may still create it), and an
operator's ``hubsync effects resolve --not-executed`` lets a retry, which
looks first, run it.

The token comes from ``HUBSYNC_FORGE_TOKEN`` or the file named by
``HUBSYNC_FORGE_TOKEN_FILE``, never from the effect, the ledger or a log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from pydantic import Field, SecretStr

from consumers.jobs.effect_executors import ExecutionContext, http_exchange
from hubsync.core.errors import ConfigError
from hubsync.core.redis_credentials import read_secret_file
from hubsync.core.settings import HubsyncSettings, safe_url
from producers.effects.errors import (
    EffectFailedError,
    NothingExecutedError,
    OutcomeUncertainError,
)
from producers.effects.kinds import EffectKind

GITHUB_API_URL = "https://api.github.com"
PAGE_SIZE = 100
_NAME = r"[A-Za-z0-9_.-]{1,100}"
_PR_TARGET = re.compile(rf"({_NAME})/({_NAME}):([^\s:]+(?::[^\s:]+)?)\.\.\.(\S+)")
_ISSUE_TARGET = re.compile(rf"({_NAME})/({_NAME})(?:#\S{{1,200}})?")


class ForgeSettings(HubsyncSettings):
    """Where the forge is and how to reach it (env prefix ``HUBSYNC_``)."""

    forge_api_url: str = Field(
        default=GITHUB_API_URL,
        description="Base URL of the forge's REST API (GitHub Enterprise: https://HOST/api/v3).",
    )
    forge_token: SecretStr | None = Field(
        default=None, description="API token (prefer forge_token_file)."
    )
    forge_token_file: Path | None = Field(
        default=None, description="File holding the API token (surrounding whitespace dropped)."
    )
    forge_timeout: float = Field(default=10.0, gt=0, description="Seconds per HTTP request.")
    forge_issue_pages: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="Pages of 100 issues, newest first, searched for an issue's marker.",
    )


def forge_token(settings: ForgeSettings) -> str:
    """The token of ``settings``: from the file, or the variable; exactly one of them."""
    if settings.forge_token is not None and settings.forge_token_file is not None:
        raise ConfigError(
            "HUBSYNC_FORGE_TOKEN_FILE: HUBSYNC_FORGE_TOKEN is set too; give the token in one place"
        )
    if settings.forge_token_file is not None:
        return read_secret_file(
            settings.forge_token_file, "HUBSYNC_FORGE_TOKEN_FILE", "the forge's API token"
        )
    if settings.forge_token is None or not settings.forge_token.get_secret_value().strip():
        raise ConfigError(
            "HUBSYNC_FORGE_TOKEN: missing; set it, or HUBSYNC_FORGE_TOKEN_FILE to a file "
            "holding the forge's API token"
        )
    return settings.forge_token.get_secret_value().strip()


def issue_marker(effect_key: str) -> str:
    """The hidden marker an issue body carries: an HTML comment naming the effect."""
    return f"<!-- hubsync-effect: {effect_key} -->"


@dataclass(frozen=True)
class _Operation:
    """One create, and how to look for what it creates."""

    what: str
    collection: str
    """``/repos/OWNER/REPO/pulls`` or ``.../issues``."""
    body: dict[str, Any]
    query: dict[str, str]
    marker: str | None = None
    """For an issue: the text its body carries."""
    pages: int = 1

    def matches(self, item: dict[str, Any]) -> bool:
        """Is ``item`` (one listed pull request or issue) what this operation creates?"""
        if self.marker is None:
            return True  # the list is filtered to the pull request's head and base
        return "pull_request" not in item and self.marker in str(item.get("body") or "")


def _text(payload: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = payload.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise EffectFailedError(f"the payload's {name!r} must be a non-empty string")
    return value


def pull_request_operation(target: str, payload: dict[str, Any]) -> _Operation:
    """``pr-create`` of ``OWNER/REPO:BASE...HEAD`` with the payload's title, body, draft."""
    found = _PR_TARGET.fullmatch(target)
    if found is None:
        raise EffectFailedError("a pr-create target reads OWNER/REPO:BASE...HEAD")
    owner, repo, base, head = found.groups()
    body = {"title": _text(payload, "title", required=True), "head": head, "base": base}
    text = _text(payload, "body", required=False)
    if text is not None:
        body["body"] = text
    if payload.get("draft") is not None:
        body["draft"] = bool(payload["draft"])
    qualified_head = head if ":" in head else f"{owner}:{head}"
    query = {"state": "open", "head": qualified_head, "base": base, "per_page": str(PAGE_SIZE)}
    return _Operation("pull request", _repo_path(owner, repo, "pulls"), body, query)


def issue_operation(target: str, payload: dict[str, Any], key: str, pages: int) -> _Operation:
    """``tracker-issue`` of ``OWNER/REPO[#NAME]`` with the payload's title, body, labels."""
    found = _ISSUE_TARGET.fullmatch(target)
    if found is None:
        raise EffectFailedError("a tracker-issue target reads OWNER/REPO or OWNER/REPO#NAME")
    owner, repo = found.groups()
    marker = issue_marker(key)
    text = _text(payload, "body", required=False) or ""
    body: dict[str, Any] = {
        "title": _text(payload, "title", required=True),
        "body": f"{text}\n\n{marker}" if text else marker,
    }
    labels = payload.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise EffectFailedError("the payload's 'labels' must be a list of strings")
        body["labels"] = labels
    query = {"state": "all", "sort": "created", "direction": "desc", "per_page": str(PAGE_SIZE)}
    return _Operation("issue", _repo_path(owner, repo, "issues"), body, query, marker, pages)


def _repo_path(owner: str, repo: str, collection: str) -> str:
    return f"/repos/{quote(owner, safe='')}/{quote(repo, safe='')}/{collection}"


class ForgeExecutor:
    """Creates pull requests and issues on a GitHub-API forge, looking first."""

    def __init__(
        self, api_url: str, token: str, *, timeout: float = 10.0, issue_pages: int = 10
    ) -> None:
        parts = urlsplit(api_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ConfigError(f"HUBSYNC_FORGE_API_URL: {safe_url(api_url)} is no http(s) URL")
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                "HUBSYNC_FORGE_API_URL: the URL carries a user or password; give the token in "
                "HUBSYNC_FORGE_TOKEN_FILE instead"
            )
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.issue_pages = issue_pages
        self.where = f"forge {parts.hostname}:{parts.port or ''}"

    @classmethod
    def from_environment(cls, settings: ForgeSettings | None = None) -> ForgeExecutor:
        """An executor configured by ``HUBSYNC_FORGE_*`` (or ``settings``)."""
        chosen = settings or ForgeSettings()
        return cls(
            chosen.forge_api_url,
            forge_token(chosen),
            timeout=chosen.forge_timeout,
            issue_pages=chosen.forge_issue_pages,
        )

    def __repr__(self) -> str:
        return f"ForgeExecutor({safe_url(self.api_url)!r})"  # never the token

    def execute(self, context: ExecutionContext) -> dict[str, Any]:
        """Look; create only if nothing is found; settle an unknown create by looking again."""
        operation = self.operation(context)
        try:
            existing = self._find(operation)
        except (OutcomeUncertainError, EffectFailedError) as exc:
            # a look only reads: whatever went wrong, nothing was created
            raise NothingExecutedError(f"looking for the {operation.what}: {exc}") from None
        if existing is not None:
            return _receipt(existing, "found")
        try:
            created = self._call("POST", operation.collection, operation.body)
        except (OutcomeUncertainError, EffectFailedError) as exc:
            return self._settle(operation, exc)
        return _receipt(created, "created")

    def operation(self, context: ExecutionContext) -> _Operation:
        """What the claimed effect asks for; ``EffectFailedError`` for a malformed one."""
        spec = context.claim.spec
        if spec.kind is EffectKind.PR_CREATE:
            return pull_request_operation(spec.target, spec.payload)
        if spec.kind is EffectKind.TRACKER_ISSUE:
            return issue_operation(
                spec.target, spec.payload, context.claim.effect_key, self.issue_pages
            )
        raise EffectFailedError(
            f"the forge executor runs pr-create and tracker-issue, not {spec.kind}"
        )

    def _settle(
        self, operation: _Operation, failure: EffectFailedError | OutcomeUncertainError
    ) -> dict[str, Any]:
        try:
            found = self._find(operation)
        except (NothingExecutedError, OutcomeUncertainError, EffectFailedError) as exc:
            if isinstance(failure, EffectFailedError):
                raise failure from None  # refused: this request created nothing
            raise OutcomeUncertainError(
                f"{failure}; looking for the {operation.what} afterwards failed too: {exc}"
            ) from None
        if found is not None:
            return _receipt(found, "found after an unknown outcome")
        if isinstance(failure, EffectFailedError):
            raise failure
        raise OutcomeUncertainError(
            f"{failure}; no {operation.what} was found afterwards, but the forge may still "
            "create it"
        )

    def _find(self, operation: _Operation) -> dict[str, Any] | None:
        for page in self._pages(operation):
            for item in page:
                if isinstance(item, dict) and operation.matches(item):
                    return item
        return None

    def _pages(self, operation: _Operation) -> Iterator[list[Any]]:
        for number in range(1, operation.pages + 1):
            query = urlencode(operation.query | {"page": str(number)})
            page = self._call("GET", f"{operation.collection}?{query}", None)
            if not isinstance(page, list):
                raise OutcomeUncertainError(f"{self.where} listed no JSON array")
            yield page
            if len(page) < PAGE_SIZE:
                return

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "User-Agent": "hubsync-effects",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode("utf-8")
        where = f"{self.where} {method} {path.partition('?')[0]}"
        _, answer = http_exchange(method, self.api_url + path, data, headers, self.timeout, where)
        try:
            return json.loads(answer)
        except ValueError:
            raise OutcomeUncertainError(f"{where} answered no JSON") from None


def _receipt(item: Any, how: str) -> dict[str, Any]:
    """A small receipt: number, web URL, API URL, and whether it was found or created."""
    if not isinstance(item, dict):
        raise OutcomeUncertainError("the forge answered no JSON object")
    return {
        "number": item.get("number"),
        "url": item.get("html_url"),
        "api_url": item.get("url"),
        "outcome": how,
    }
