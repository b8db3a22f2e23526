"""A local forge (127.0.0.1 only) speaking just enough of the GitHub REST API for the forge
executor's tests: list and create pull requests and issues. It records every request and
can answer a create with a status instead, or create and then hold its answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "forge-test-token-0123456789"


@dataclass
class ForgeRequest:
    """One request the forge received."""

    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: dict[str, Any] | None


@dataclass
class LocalForge:
    """The forge's state: what exists, what was asked, and how to misbehave."""

    url: str = ""
    pulls: list[dict[str, Any]] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    requests: list[ForgeRequest] = field(default_factory=list)
    refuse_creates: list[int] = field(default_factory=list)
    """Statuses to answer the next creates with, creating nothing (429, 503, 500, ...)."""
    blind_lists: int = 0
    """How many of the next listings to answer empty (a forge whose listing lags)."""
    hold_creates: int = 0
    """How many of the next creates to perform and then not answer until ``release``."""
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def creates(self) -> list[ForgeRequest]:
        """The POSTs received."""
        return [r for r in self.requests if r.method == "POST"]


def _pull(forge: LocalForge, owner: str, repo: str, body: dict[str, Any]) -> dict[str, Any]:
    number = len(forge.pulls) + len(forge.issues) + 1
    head = body["head"] if ":" in body["head"] else f"{owner}:{body['head']}"
    return {"number": number, "state": "open", "title": body["title"], "head_label": head,
            "base": body["base"], "html_url": f"{forge.url}/{owner}/{repo}/pull/{number}",
            "url": f"{forge.url}/repos/{owner}/{repo}/pulls/{number}"}  # fmt: skip


def _issue(forge: LocalForge, owner: str, repo: str, body: dict[str, Any]) -> dict[str, Any]:
    number = len(forge.pulls) + len(forge.issues) + 1
    return {"number": number, "state": "open", "title": body["title"], "body": body.get("body"),
            "html_url": f"{forge.url}/{owner}/{repo}/issues/{number}",
            "url": f"{forge.url}/repos/{owner}/{repo}/issues/{number}"}  # fmt: skip


def _listed(forge: LocalForge, collection: str, query: dict[str, str]) -> list[dict[str, Any]]:
    if collection == "pulls":
        return [p for p in forge.pulls
                if p["head_label"] == query.get("head") and p["base"] == query.get("base")]  # fmt: skip
    size, page = int(query.get("per_page", "30")), int(query.get("page", "1"))
    newest_first = list(reversed(forge.issues))
    return newest_first[(page - 1) * size : page * size]


@contextmanager
def forge_server() -> Iterator[LocalForge]:
    """Serve a fresh forge on a free loopback port until the block ends."""
    forge = LocalForge()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, document: Any) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str, str, dict[str, str]] | None:
            parts = urlsplit(self.path)
            segments = parts.path.strip("/").split("/")
            if (
                len(segments) != 4
                or segments[0] != "repos"
                or segments[3]
                not in {
                    "pulls",
                    "issues",
                }
            ):
                return None
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            return segments[1], segments[2], segments[3], query

        def _record(
            self, body: dict[str, Any] | None
        ) -> tuple[str, str, str, dict[str, str]] | None:
            route = self._route()
            parts = urlsplit(self.path)
            query = route[3] if route else {}
            with forge.lock:
                forge.requests.append(ForgeRequest(self.command, parts.path, query,
                                                   self.headers.get("Authorization"), body))  # fmt: skip
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._answer(401, {"message": "Bad credentials"})
                return None
            if route is None:
                self._answer(404, {"message": "Not Found"})
            return route

        def do_GET(self) -> None:
            route = self._record(None)
            if route is not None:
                with forge.lock:
                    blind = forge.blind_lists > 0
                    forge.blind_lists -= 1 if blind else 0
                    listed = [] if blind else _listed(forge, route[2], route[3])
                self._answer(200, listed)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            route = self._record(body)
            if route is None:
                return
            owner, repo, collection, _ = route
            with forge.lock:
                if forge.refuse_creates:
                    status = forge.refuse_creates.pop(0)
                    self._answer(status, {"message": f"refused with {status}"})
                    return
                if collection == "pulls":
                    label = body["head"] if ":" in body["head"] else f"{owner}:{body['head']}"
                    if any(p["head_label"] == label and p["base"] == body["base"]
                           for p in forge.pulls):  # fmt: skip
                        self._answer(422, {"message": "A pull request already exists"})
                        return
                    item = _pull(forge, owner, repo, body)
                    forge.pulls.append(item)
                else:
                    item = _issue(forge, owner, repo, body)
                    forge.issues.append(item)
                hold = forge.hold_creates > 0
                forge.hold_creates -= 1 if hold else 0
            if hold:
                forge.release.wait(30)  # created; the client times out before an answer
            self._answer(201, item)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    forge.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        forge.release.set()
        server.shutdown()
        server.server_close()
