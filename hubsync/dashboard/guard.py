"""Who may read the dashboard, and proof that an action was confirmed on its own page.

* Bearer token: with ``--token-file``, every request must carry
  ``Authorization: Bearer <token>``, compared in constant time
  (``hmac.compare_digest``); anything else is answered 401 with no page.
* Host: on a loopback address, only requests naming a loopback host are
  answered, so a web page cannot reach the dashboard through a name it
  rebinds to 127.0.0.1.
* Confirmation (CSRF): an action runs only when its form carries the token the
  confirmation page put in it, an HMAC under a secret made at start-up of the
  action and exactly what it acts on. A page of another site can post to the
  dashboard but cannot read the confirmation page, so it cannot make the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Sequence
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from hubsync.core.errors import ConfigError
from hubsync.core.redis_credentials import read_secret_file

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str:
    """The bearer token ``path`` holds; ``ConfigError`` if it is missing or short."""
    token = read_secret_file(path, "--token-file", "the bearer token")
    if len(token) < 16:
        raise ConfigError(
            f"--token-file {path}: the token is shorter than 16 characters; put a long random "
            "one in it (e.g. `openssl rand -hex 32`)"
        )
    return token


class BearerGuard:
    """ASGI middleware: a request without the bearer token gets 401 and nothing else."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on only if its ``Authorization`` header is the token."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"www-authenticate", b'Bearer realm="hubsync"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"bearer token required\n"})


class Confirmations:
    """Tokens binding a confirmation form to the one action and targets it names."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def token(self, action: str, target: str, ids: Sequence[str] = ()) -> str:
        """The token of ``action`` on ``target`` (and ``ids``), for the confirmation form."""
        message = "\0".join((action, target, *ids)).encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def valid(self, given: str, action: str, target: str, ids: Sequence[str] = ()) -> bool:
        """Whether ``given`` is the token of exactly this action (constant-time compare)."""
        return hmac.compare_digest(given.encode(), self.token(action, target, ids).encode())
