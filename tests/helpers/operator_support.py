"""A small live pipeline for the operator-command tests: a runtime, its relay, hub consumers.

Every part is the real thing: a runtime registry and event store
(``producers.registry``), ``Relay.run_once`` onto the private Redis, and
``HubConsumer.run_once`` into a real SQLite hub database. ``run_cli`` runs the
``hubsync`` command in this process, as a child process would see it.
"""

from __future__ import annotations

import io
import logging
import os
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis

from consumers.stream.worker import HubConsumer
from hubstore.sqlite.store import SqliteHubStore
from hubsync.cli.main import main
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.closing import ClosesOnExit
from hubsync.core.settings import ConsumerSettings
from hubsync.processes import child_environment
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.store.event_store import RunEventStore
from tests.helpers.relay_player import send, send_fields, sync_event
from tests.helpers.relay_support import relay_settings
from tests.helpers.support import REPO_ROOT
from tests.helpers.trust import join, signed_event

HUB_PROJECT = "acme"
FORGED_LINE = "2030-01-01 00:00:00,000 INFO producers.relay: all clear"
HOSTILE = f"box\x1b[2J\x1b]0;owned\x07\n{FORGED_LINE}\r\u202eevil"
"""What someone who can write to Redis puts in an id, a host or a detail: terminal escapes,
a newline forging a log line of its own, and a bidi override."""
NOT_A_DATABASE = str(REPO_ROOT / "pyproject.toml")
"""A file that exists and is no database: what a mistyped --hub-db may name."""


class LivePipeline(ClosesOnExit):
    """One runtime with one project on ``HUB_PROJECT``, a hub database, and a Redis."""

    def __init__(self, tmp_path: Path, redis_url: str) -> None:
        self.redis_url = redis_url
        self.state_dir = tmp_path / "state"
        self.hub_db = tmp_path / "hub.db"
        self.client = redis.Redis.from_url(redis_url)
        self.registry = RuntimeRegistry(self.state_dir)
        root = tmp_path / "project"
        root.mkdir()
        self.registration = self.registry.register_project(root, hub_project=HUB_PROJECT)
        self.store: RunEventStore = self.registry.open_store(self.registration)
        self.hub = SqliteHubStore(self.hub_db)
        join(self.registry, [HUB_PROJECT], self.hub)  # 'hub init', 'enroll', 'runtime join'

    @property
    def runtime_id(self) -> str:
        """The runtime's id."""
        return self.registry.runtime_id

    @property
    def deployment_args(self) -> list[str]:
        """``--redis-url``, ``--hub-db`` and ``--state-dir`` of this pipeline, for the CLI."""
        return [
            *("--redis-url", self.redis_url),
            *("--hub-db", str(self.hub_db)),
            *("--state-dir", str(self.state_dir)),
        ]

    @property
    def events(self) -> str:
        """The runtime's events stream of the project."""
        return keys.events_stream(HUB_PROJECT, self.runtime_id)

    def append(self, run_id: str, count: int) -> None:
        """Append ``count`` events to ``run_id`` through the real outbox path."""
        for index in range(count):
            self.store.append_event(run_id, "step.completed", {"step": f"s{index}", "ok": True})

    def relay_once(self) -> None:
        """Send what is due and apply the acks there are (one ``Relay.run_once``)."""
        relay = Relay(relay_settings(self.state_dir, self.redis_url), self.registry)
        try:
            relay.run_once()
        finally:
            relay.close()

    def consume_once(self, name: str = "hub-1", **overrides: Any) -> HubConsumer:
        """One ``HubConsumer.run_once`` named ``name``."""
        settings = ConsumerSettings(
            hub_db=self.hub_db,
            redis_url=self.redis_url,
            **overrides,
        )
        worker = HubConsumer(self.client, self.hub, settings, name=name)
        worker.run_once()
        return worker

    def inject_conflict(self, run_id: str = "run-a", sequence: int = 1) -> str:
        """XADD other bytes under an existing key of this runtime, signed with its key (a
        runtime that lost its outbox, or a forger holding the key): the entry id."""
        forged = sync_event(
            sequence,
            run_id=run_id,
            project_id=self.registration.project_id,
            hub_project=HUB_PROJECT,
            runtime_id=self.runtime_id,
            data={"status": "forged"},
        )
        return send(self.client, forged)

    def inject_garbage(self, big: bool = False) -> str:
        """XADD an entry of this runtime, signed with its key, that no hub accepts: its event
        bytes are no JSON (``big``: over the dead-letter preview size)."""
        fields = garbage_event(self.registration.project_id, self.runtime_id, big)
        return send_fields(self.client, HUB_PROJECT, fields, self.runtime_id)

    def make_busy(self) -> None:
        """Six events stored and acked, one conflict, one dead letter, four events in flight of
        which the two oldest sit pending in a consumer that died ("ghost")."""
        self.append("run-a", 3)
        self.append("run-b", 3)
        self.relay_once()
        self.consume_once()
        self.relay_once()  # applies the acks
        self.inject_conflict()
        self.inject_garbage()
        self.consume_once()
        self.append("run-c", 4)
        self.relay_once()
        self.client.xreadgroup(keys.CONSUMER_GROUP, "ghost", {self.events: ">"}, count=2)

    def hub_rows(self, table: str) -> int:
        """Rows of a hub table, counted with plain SQL (not through the store under test)."""
        with sqlite3.connect(self.hub_db) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        """Close every file and connection."""
        self.store.close()
        self.registry.close()
        self.hub.close()
        self.client.close()


def garbage_event(
    project_id: str, runtime_id: str, big: bool = False, hub_project: str = HUB_PROJECT
) -> dict[str, str | bytes]:
    """The fields of an event entry signed with ``runtime_id``'s key whose event bytes are no
    JSON (``big``: over the dead-letter preview size): authentic, and refused ``bad_json``,
    so its dead letter is one an operator may replay."""
    data = b"x" * 10_000 if big else b"not an event"
    fields: dict[str, str | bytes] = {
        "kind": "event",
        "project_id": project_id,
        "hub_project": hub_project,
        "run_id": "run-garbage",
        "sequence": "1",
        "event_type": "step.completed",
        "runtime_id": runtime_id,
        "content_hash": content_hash(data),
        "event": data,
    }
    return signed_event(fields)


class CliRun(NamedTuple):
    """What one in-process ``hubsync`` run gave: its exit code and its text output."""

    code: int
    out: str
    err: str


def run_cli(
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
) -> CliRun:
    """``hubsync ARGV`` in-process, seeing what a child process would: (exit code, stdout, stderr).

    As for a child (``hubsync.processes.child_environment``), this machine's
    ``HUBSYNC_*`` and ``REDIS_URL`` are hidden and only ``env`` is set; ``stdin``
    is its standard input. A run that prints a traceback fails the test. Logging starts unconfigured, as in a fresh interpreter
    (a warning reaches stderr), and the test's own logging is put back afterwards.
    """
    capsys.readouterr()  # only this run's output
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with pytest.MonkeyPatch.context() as patch:
        clean = child_environment(env)
        for name in set(os.environ) - set(clean):
            patch.delenv(name)
        for name, value in clean.items():
            patch.setenv(name, value)
        patch.setattr(sys, "stdin", io.StringIO(stdin))
        root.handlers, root.level = [], logging.WARNING
        try:
            with pytest.raises(SystemExit) as info:
                main(list(argv))
        finally:
            root.handlers, root.level = handlers, level
    out, err = capsys.readouterr()
    # never a traceback, whatever the command and however it ends
    assert "Traceback" not in out + err, f"hubsync {' '.join(argv)} printed a traceback:\n{err}"
    return CliRun(int(info.value.code or 0), out, err)


def error_lines(err: str) -> list[str]:
    """The ``error:`` lines of stderr (click's usage hint may stand above its one error line)."""
    return [line for line in err.splitlines() if line.lower().startswith("error")]
