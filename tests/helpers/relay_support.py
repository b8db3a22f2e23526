"""Shared set-up for relay tests: a runtime with projects, a relay over it, and relay subprocesses."""

from __future__ import annotations

from pathlib import Path

from hubstore import hub_url_from_path, open_store
from hubstore.store import HubStore
from hubsync.core.clock import EpochClock, epoch_seconds
from hubsync.core.settings import RelaySettings
from hubsync.processes import Child, hubsync_command
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.store.event_store import RunEventStore
from tests.helpers.trust import join


def make_runtime(
    state_dir: Path, hub_projects: list[str], hub: HubStore | Path | None = None
) -> tuple[RuntimeRegistry, list[RunEventStore]]:
    """A runtime with one registered project per hub project name, enrolled for them on
    ``hub``: a hub store, the path of a SQLite hub database (created if need be) that real
    ``hubsync consume`` processes will use, or None for a throw-away hub (when the test
    plays the hub with ``hub_double``)."""
    registry = RuntimeRegistry(state_dir)
    if isinstance(hub, Path):
        with open_hub_db(hub) as store:
            join(registry, sorted(set(hub_projects)), store)
    else:
        join(registry, sorted(set(hub_projects)), hub)
    stores = []
    for index, hub_project in enumerate(hub_projects):
        root = state_dir.parent / f"project-{index}"
        root.mkdir(parents=True, exist_ok=True)
        registration = registry.register_project(root, hub_project=hub_project)
        stores.append(registry.open_store(registration))
    return registry, stores


def open_hub_db(path: Path) -> HubStore:
    """The SQLite hub database at ``path``, created with its schema if need be."""
    return open_store(hub_url_from_path(path), create_schema=True)


def append_many(store: RunEventStore, runs: int, per_run: int) -> None:
    """Append ``runs * per_run`` small events, interleaving the runs."""
    for sequence in range(per_run):
        for run in range(runs):
            store.append_event(f"run-{run}", "step.completed", {"step": f"s{sequence}", "ok": True})


def relay_settings(state_dir: Path, redis_url: str, **overrides: object) -> RelaySettings:
    """Relay settings for tests: fast polling, short intervals."""
    values: dict[str, object] = {"state_dir": state_dir, "redis_url": redis_url}
    values.update(overrides)
    return RelaySettings(**values)  # type: ignore[arg-type]


def relay_with_events(
    state_dir: Path,
    redis_url: str,
    runs: int,
    per_run: int,
    clock: EpochClock = epoch_seconds,
    **overrides: object,
) -> tuple[RuntimeRegistry, RunEventStore, Relay]:
    """A runtime in ``state_dir`` with one project on hub project ``alpha`` holding ``runs *
    per_run`` events (``append_many``), and a relay for it on ``redis_url`` that has not run
    yet: ``relay_settings(..., **overrides)``, resends falling due by ``clock``."""
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    append_many(store, runs=runs, per_run=per_run)
    return (
        registry,
        store,
        Relay(relay_settings(state_dir, redis_url, **overrides), registry, clock),
    )


def start_relay_process(state_dir: Path, redis_url: str, *extra: str) -> Child:
    """``hubsync relay`` as a real child process, its log ``relay.log`` in the state dir."""
    argv = hubsync_command("relay", "--state-dir", str(state_dir), "--redis-url", redis_url, *extra)
    return Child("relay", argv, state_dir / "relay.log").start()
