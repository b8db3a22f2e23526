"""The metrics HTTP server: one thread, a bounded number of connections, each with a deadline.

A scrape is one small GET, so the server is one thread watching every
connection through a selector: an idle connection costs a file descriptor and
a few bytes, never a thread. At most ``MAX_CONNECTIONS`` are open at once; one
more closes the oldest (nearest its deadline, and the likeliest to be idle), so
sockets left open, however many, cannot keep a scraper out. Each connection has
``CONNECTION_TIMEOUT`` seconds in all to send its request head (at most
``MAX_REQUEST_HEAD`` bytes) and read the answer, then it is closed. One
request per connection (``Connection: close``). The answer comes from a WSGI
app run in this thread (``hubsync.core.metrics.metrics_app``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
"""Connections open at once; one more closes the oldest."""
CONNECTION_TIMEOUT = 10.0
"""Seconds a connection has to send its request and read the answer."""
MAX_REQUEST_HEAD = 8192
"""Bytes of request line and headers read at most; a longer head is answered 431."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]

_POLL_SECONDS = 1.0  # the longest wait on the selector: a stop or a deadline is seen within it


@dataclass
class _Connection:
    sock: socket.socket
    deadline: float
    received: bytearray = field(default_factory=bytearray)
    answer: memoryview | None = None


class MetricsServer:
    """An HTTP server of one WSGI app on ``addr:port``, in one daemon thread (``start``).

    ``clock`` (monotonic seconds) decides the connections' deadlines.
    """

    def __init__(
        self,
        addr: str,
        port: int,
        app: WsgiApp,
        *,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = CONNECTION_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        self._listener = socket.create_server((addr, port), family=family[0][0], backlog=128)
        self._listener.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._app = app
        self._max_connections = max_connections
        self._timeout = timeout
        self._clock = clock
        self._connections: dict[socket.socket, _Connection] = {}  # oldest first
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="metrics-http", daemon=True)

    @property
    def open_connections(self) -> int:
        """Connections open now (at most ``max_connections``)."""
        return len(self._connections)

    def start(self) -> MetricsServer:
        """Serve in the background; returns the server."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close every socket (idempotent)."""
        self._stopping.set()
        with contextlib.suppress(OSError):  # closed already
            self._waker.send(b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        for sock in [*self._connections, self._listener, self._wake, self._waker]:
            sock.close()
        self._connections.clear()
        self._selector.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            for key, events in self._selector.select(self._wait()):
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj is self._wake:
                    return
                elif key.data.sock not in self._connections:
                    continue  # dropped earlier in this batch (to make room for a new one)
                elif events & selectors.EVENT_READ:
                    self._read(key.data)
                else:
                    self._write(key.data)
            self._expire()

    def _wait(self) -> float:
        if not self._connections:
            return _POLL_SECONDS
        oldest = next(iter(self._connections.values()))
        return min(_POLL_SECONDS, max(0.0, oldest.deadline - self._clock()))

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: the backlog waits for the next pass
                log.warning("metrics server cannot accept a connection: %s", exc)
                return
            if len(self._connections) >= self._max_connections:
                self._drop(next(iter(self._connections.values())))
            sock.setblocking(False)
            connection = _Connection(sock, self._clock() + self._timeout)
            self._connections[sock] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(connection)
            return
        connection.received += data
        head, found, _ = bytes(connection.received).partition(b"\r\n\r\n")
        if found:
            self._answer(connection, self._response(head))
        elif len(connection.received) > MAX_REQUEST_HEAD:
            self._answer(connection, _plain("431 Request Header Fields Too Large", b"too long\n"))

    def _response(self, head: bytes) -> bytes:
        try:
            return _response(self._app, head, self.address)
        except Exception:  # one bad answer, never the server thread
            log.exception("metrics server failed to answer a request")
            return _plain("500 Internal Server Error", b"error\n")

    def _answer(self, connection: _Connection, response: bytes) -> None:
        connection.answer = memoryview(response)
        self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)

    def _write(self, connection: _Connection) -> None:
        assert connection.answer is not None
        try:
            sent = connection.sock.send(connection.answer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            sent = len(connection.answer)  # the peer went away: nothing more to send
        connection.answer = connection.answer[sent:]
        if not connection.answer:
            self._drop(connection)

    def _expire(self) -> None:
        now = self._clock()
        for connection in list(self._connections.values()):
            if connection.deadline > now:
                break  # oldest first: the rest are younger
            self._drop(connection)

    def _drop(self, connection: _Connection) -> None:
        if self._connections.pop(connection.sock, None) is None:
            return  # dropped already
        self._selector.unregister(connection.sock)
        connection.sock.close()


def _response(app: WsgiApp, head: bytes, address: tuple[str, int]) -> bytes:
    """The whole HTTP answer of ``app`` to the request ``head`` (request line and headers)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _plain("400 Bad Request", b"bad request\n")
    method, target, _ = parts
    if method not in ("GET", "HEAD"):
        return _plain("405 Method Not Allowed", b"use GET\n", [("Allow", "GET, HEAD")])
    path, _, query = target.partition("?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",  # HEAD is answered as GET, without the body
        "PATH_INFO": unquote(path),
        "QUERY_STRING": query,
        "SERVER_NAME": address[0],
        "SERVER_PORT": str(address[1]),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(),
        "wsgi.url_scheme": "http",
    }
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            environ["HTTP_" + name.strip().upper().replace("-", "_")] = value.strip()
    started: list[Any] = []
    body = b"".join(app(environ, lambda status, headers, *_: started.extend((status, headers))))
    status, headers = started
    headers = [(name, value) for name, value in headers if name.lower() != "content-length"]
    return _plain(status, b"" if method == "HEAD" else body, headers, len(body))


def _plain(
    status: str,
    body: bytes,
    headers: list[tuple[str, str]] | None = None,
    length: int | None = None,
) -> bytes:
    """An HTTP/1.1 answer that closes the connection after ``body``."""
    if headers is None:
        headers = [("Content-Type", "text/plain; charset=utf-8")]
    fields = [*headers, ("Content-Length", str(len(body) if length is None else length))]
    fields.append(("Connection", "close"))
    lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
