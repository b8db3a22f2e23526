#!/usr/bin/env python3
"""The screenshot of docs/dashboard.png: the dashboard's main page on the demo's live pipeline.

Starts a private redis-server, runs ``hubsync demo --keep`` on it (three runtimes, their
relays and two consumers as real processes), serves ``hubsync dashboard`` over the same
Redis and the demo's hub database, and has Debian's chromium (Playwright, the test extra)
take the main page once a second while the demo runs. The shot from the middle of the run
(daemons live, sparklines filling) is written to the output file.

    python3 scripts/dashboard_screenshot.py [--output docs/dashboard.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from hubsync.demo.embedded_redis import RedisServerProcess, free_port
from hubsync.processes import Child, hubsync_command, poll_until

CHROMIUM = "/usr/bin/chromium"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("docs/dashboard.png"))
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hubsync-shot-") as work_dir:
        work = Path(work_dir)
        (work / "redis").mkdir()
        with RedisServerProcess(directory=work / "redis") as server:  # started on entry
            shots = take_shots(work, server.url)
    if len(shots) < 5:
        print(f"the demo ended after {len(shots)} shot(s): too few to pick one", file=sys.stderr)
        return 1
    options.output.write_bytes(shots[len(shots) // 2])
    print(f"wrote {options.output} (shot {len(shots) // 2 + 1} of {len(shots)})")
    return 0


def take_shots(work: Path, redis_url: str) -> list[bytes]:
    """Screenshots of the main page, one a second, while the demo runs."""
    demo_dir = work / "demo"
    demo_dir.mkdir()
    demo = Child(
        "demo",
        hubsync_command("demo", "--redis-url", redis_url, "--keep", "--events-per-run", "1500",
                        "--runs-per-runtime", "6"),
        work / "demo.log",
        env={"TMPDIR": str(demo_dir)},  # where its hub database is made
    ).start()  # fmt: skip
    hub_db = poll_until(
        lambda: next(demo_dir.glob("hubsync-demo-*/hub.db"), None),
        60,
        0.1,
        lambda: RuntimeError("the demo made no hub database"),
    )
    port = free_port()
    dashboard = Child(
        "dashboard",
        hubsync_command("dashboard", "--redis-url", redis_url, "--hub-db", str(hub_db),
                        "--port", str(port), "--refresh", "1", "--amber-after", "2"),
        work / "dashboard.log",
    ).start()  # fmt: skip
    shots: list[bytes] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            poll_until(
                lambda: dashboard.check() or _loads(page, f"http://127.0.0.1:{port}/"),
                30,
                0.2,
                lambda: RuntimeError("the dashboard did not answer"),
            )
            while demo.alive:
                time.sleep(1)
                page.reload()
                shots.append(page.screenshot(full_page=True))
            browser.close()
    finally:
        dashboard.stop()
        demo.stop()
    return shots


def _loads(page: Page, url: str) -> bool:
    try:
        reply = page.goto(url)
    except PlaywrightError:  # not listening yet
        return False
    return reply is not None and reply.ok


if __name__ == "__main__":
    sys.exit(main())
