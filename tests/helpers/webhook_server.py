"""A local HTTP server (127.0.0.1 only) that counts webhook POSTs, for effect tests."""

from __future__ import annotations

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
        self.url = ""


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
            recorder.arrived.set()
            recorder.release.wait(30)
            self.send_response(recorder.status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        recorder.release.set()
        server.shutdown()
        server.server_close()
