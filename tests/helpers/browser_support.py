"""A real browser for the dashboard tests: Debian's chromium driven by Playwright, and a
``hubsync dashboard`` process to point it at.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium``
(``scripts/test.sh`` installs Debian's package when it can). Without it the
browser tests are skipped with the reason shown, and in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hubsync.demo.embedded_redis import free_port
from hubsync.processes import Child, hubsync_command
from tests.helpers.support import wait_until

CHROMIUM = Path("/usr/bin/chromium")


def require_chromium() -> Path:
    """Debian's chromium, and Playwright to drive it; skip without them (fail in CI)."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package (the test extra)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI never skips them (scripts/test.sh installs chromium)")
        pytest.skip(reason)
    return CHROMIUM


def http_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The HTTP status a GET of ``url`` is answered with (0: no answer)."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)
    except (urllib.error.URLError, OSError):
        return 0


@contextmanager
def served_dashboard(
    logs: Path, *argv: str, token: str | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``hubsync dashboard ARGV`` on a free port of 127.0.0.1 as its own process, until it
    answers (with ``token``, when it was given one); its base URL. ``env``: its variables
    (a Redis URL with a password, kept off its command line). Stopped at the end by
    SIGTERM, on which it exits 0."""
    port = free_port()
    command = hubsync_command("dashboard", "--port", str(port), *argv)
    child = Child("dashboard", command, logs / f"dashboard-{port}.log", env=env).start()
    base = f"http://127.0.0.1:{port}"
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}

    def answers() -> bool:
        child.check()  # died: its log says why
        return http_status(f"{base}/healthz", headers) == 200

    try:
        wait_until(answers, timeout=30, interval=0.1, what="the dashboard to answer")
        yield base
    finally:
        code = child.stop(timeout=10)
    assert code == 0, f"the dashboard exited {code} on SIGTERM:\n{child.tail()}"
