"""A local HTTP server (127.0.0.1 only) that counts webhook POSTs, for effect tests.

It also offers the check ``webhook-checked`` asks for: ``GET`` with an
``Idempotency-Key`` is answered 200 when a POST under that key was processed (answered
2xx, or held), 404 otherwise.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookRecorder:
    """Counts POSTs and keeps their headers; can hold each POST until ``release`` is set."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.posts: list[dict[str, str]] = []
        self.release = threading.Event()
        self.release.set()
        self.arrived = threading.Event()
        self.lock = threading.Lock()
        self.processed: set[str] = set()
        self.checks: list[str] = []
        self.url = ""


class _QuietServer(ThreadingHTTPServer):
    """Says nothing when a client gave up on its answer (a test's timeout did that)."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def webhook_server(status: int = 200) -> Iterator[WebhookRecorder]:
    """Serve on a free loopback port until the block ends."""
    recorder = WebhookRecorder(status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            with recorder.lock:
                recorder.posts.append(dict(self.headers.items()))
                if recorder.status < 300:
                    recorder.processed.add(self.headers.get("Idempotency-Key", ""))
            recorder.arrived.set()
            recorder.release.wait(30)
            self.send_response(recorder.status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:
            key = self.headers.get("Idempotency-Key", "")
            with recorder.lock:
                recorder.checks.append(key)
                found = key in recorder.processed
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _QuietServer(("127.0.0.1", 0), Handler)
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        recorder.release.set()
        server.shutdown()
        server.server_close()
