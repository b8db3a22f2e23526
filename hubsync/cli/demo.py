"""``hubsync demo``: the whole pipeline end to end on a private Redis, with a summary."""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hubsync.cli import exit_codes
from hubsync.cli.options import env_option, json_option, options_from
from hubsync.core import keys
from hubsync.core.errors import ConfigError
from hubsync.core.logs import configure_logging
from hubsync.core.settings import DemoSettings
from hubsync.demo.stop_signals import Stopped, StopSignals

if TYPE_CHECKING:
    from hubsync.demo.embedded_redis import EmbeddedRedis
    from hubsync.demo.scenario import DemoResult, DemoScenario


@click.command(
    epilog="""\b
Examples:
  hubsync demo                               private Redis, temp dirs, summary, cleaned up
  hubsync demo --keep                        leave Redis and the files running for a look
  HUBSYNC_REDIS_URL=redis://host:6379/0 hubsync demo   use that Redis instead
  hubsync demo --json                        the summary as one JSON document
"""
)
@env_option(
    "--redis-url",
    help="Use this Redis instead of a private one (its demo keys are replaced); REDIS_URL is "
    "not read, so a shell's usual Redis is never touched by accident. A Redis another hub "
    "owns (hubsync:hub) is refused.",
)
@env_option(
    "--embedded",
    type=click.Choice(["auto", "redis-server", "fakeredis"]),
    default="auto",
    show_default=True,
    help="The private Redis: redis-server when installed (auto), or fakeredis over TCP (the "
    "demo extra: pip install 'hubsync[demo]').",
)
@options_from(DemoSettings)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the private Redis running and the work dir, to inspect them (no environment "
    "variable).",
)
@json_option
def demo(
    redis_url: str | None,
    embedded: str,
    runs_per_runtime: int,
    events_per_run: int,
    keep: bool,
    as_json: bool,
) -> None:
    """Run the whole pipeline end to end and check its invariants.

    Three runtimes append synthetic runs carrying planted secrets; their relays
    and two hub consumers run as real processes. One consumer is killed with
    SIGKILL mid-batch and the other reclaims its entries; a duplicate, a
    conflicting entry, an unsigned forgery and a garbage entry are injected;
    two boxes contend for one shared effect's lease and the stale holder's
    commit is refused; a box stalled past its lease while pushing to a shared git
    branch is refused by the remote's fence. The summary shows
    what arrived and what was refused; the exit code is 1 if any invariant broke.

    SIGINT (Ctrl-C), SIGTERM or SIGHUP stops it: the daemons and the private
    Redis are killed and the work dir removed (even with --keep), then it exits
    128 + the signal's number (130, 143, 129).
    """
    # Imported here: the demo is heavy, and other commands never need it.
    from hubsync.demo.scenario import DemoScenario
    from hubsync.processes import ChildDied

    # the summary reports refusals itself; the daemons' own logs are in the work dir
    configure_logging("ERROR")
    server: EmbeddedRedis | None = None
    scenario: DemoScenario | None = None
    scenario_dir: Path | None = None
    keep_files = False
    try:
        with StopSignals() as signals:
            try:
                if redis_url is None:
                    server = _start_redis(embedded, keep)
                    redis_url = server.url
                scenario_dir = Path(tempfile.mkdtemp(prefix="hubsync-demo-"))
                scenario = DemoScenario(
                    redis_url,
                    workdir=scenario_dir,
                    runs_per_runtime=runs_per_runtime,
                    events_per_run=events_per_run,
                )
                result = _run_with_progress(scenario, transient=as_json)
            except ChildDied:
                keep_files = True  # the dead daemon's whole log stays where the error says
                raise
            finally:
                signals.shield()
                stopped = signals.received is not None
                # Again here: a signal may have cut the scenario's own cleanup short.
                if scenario is not None:
                    scenario.daemons.kill_all()
                if server is not None and (stopped or not keep):
                    server.stop()
                if scenario_dir is not None and (stopped or not (keep or keep_files)):
                    shutil.rmtree(scenario_dir, ignore_errors=True)
                if signals.received is not None:
                    raise Stopped(signals.received)  # one that came during the cleanup too
    except Stopped as stop:
        click.echo(f"hubsync demo: stopped by {stop}; its processes and files are gone", err=True)
        raise SystemExit(exit_codes.STOPPED_BY_SIGNAL + stop.signum) from None
    if as_json:
        click.echo(json.dumps(result.as_dict(), sort_keys=True))
    else:
        _print_summary(result, keep, server is not None)
    raise SystemExit(exit_codes.OK if result.ok else exit_codes.FAILURE)


def _run_with_progress(scenario: DemoScenario, transient: bool) -> DemoResult:
    """Run ``scenario`` under a progress bar on stderr (``transient``: gone at the end)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description:<44}"), BarColumn(bar_width=16),
        MofNCompleteColumn(), TextColumn("acked {task.fields[acked]:>6}"),
        TimeElapsedColumn(), console=Console(stderr=True), transient=transient,
    ) as bar:  # fmt: skip
        task = bar.add_task("starting", total=scenario.total, acked=0)

        def progress(step: str, in_hub: int, acked: int, total: int) -> None:
            bar.update(task, description=step, completed=in_hub, acked=acked, total=total)

        scenario.progress = progress
        result = scenario.run()
        bar.update(task, description="done", completed=result.in_hub, acked=result.acked)
    return result


def _start_redis(embedded: str, keep: bool) -> EmbeddedRedis:
    from hubsync.demo.embedded_redis import (
        DEMO_EXTRA,
        FakeRedisTcpServer,
        fakeredis_missing,
        redis_server_binary,
        start_embedded_redis,
        start_redis_server,
    )

    missing = ", ".join(fakeredis_missing())
    if embedded == "fakeredis":
        if keep:
            raise ConfigError("--keep needs a redis-server; fakeredis lives inside this process")
        if missing:
            raise ConfigError(f"--embedded fakeredis: {missing} not installed; {DEMO_EXTRA}")
        return FakeRedisTcpServer()
    if embedded == "redis-server":
        if redis_server_binary() is None:
            raise ConfigError("--embedded redis-server: redis-server is not installed")
        return start_redis_server(appendonly=True)
    if missing and redis_server_binary() is None:
        raise ConfigError(
            "no private Redis for the demo: redis-server is not installed, and neither is the "
            f"demo extra ({missing}); {DEMO_EXTRA}, install redis-server, or give --redis-url"
        )
    return start_embedded_redis(appendonly=True)


def _print_summary(result: DemoResult, keep: bool, private: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    lease = result.lease
    table = Table(title="hubsync demo", show_header=True, header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("events produced (3 runtimes)", f"{result.produced:,}"),
        ("events in the hub", f"{result.in_hub:,}"),
        ("outbox rows acknowledged", f"{result.acked:,}"),
        ("duplicates answered (redeliveries, injected copy)", f"{result.duplicates:,}"),
        ("entries reclaimed from the killed consumer", f"{result.reclaimed:,}"),
        ("conflicts refused and alerted", f"{result.conflicts}"),
        ("unsigned entries refused and alerted", f"{result.refused}"),
        ("dead letters", f"{result.dead_letters}"),
        ("secrets found in hub, Redis, state, logs", f"{len(result.secrets_found)}"),
        ("lease tokens (stale box A -> taker box B)",
         f"{lease.get('token_a')} -> {lease.get('token_b')}"),
        ("stale holder's commit", f"refused: {lease.get('stale_attempt_state') or lease.get('stale_commit_code')}"
         if lease.get("stale_commit_refused") else "NOT refused"),
        ("stalled holder's push to a shared branch", _shared_push_row(result.shared_push)),
        ("seconds", f"{result.seconds:.1f}"),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    for check in result.invariants:
        mark = "[green]ok[/green]  " if check.held else "[red]FAIL[/red]"
        detail = f" ({check.detail})" if check.detail and not check.held else ""
        console.print(f"{mark} {check.name}{detail}")
    _print_where_to_look(result, keep, private)


def _shared_push_row(push: dict[str, Any]) -> str:
    if "skipped" in push:
        return f"skipped: {push['skipped']}"
    return "refused by the remote" if push.get("a_refused_by_remote") else "NOT refused"


def _print_where_to_look(result: DemoResult, keep: bool, private: bool) -> None:
    """The commands that show what the demo left, when its Redis still runs."""
    from hubsync.demo.scenario import HUB_PROJECT, demo_runtime_id

    url, lease = result.redis_url, result.lease
    if private and not keep:
        # the private Redis is already stopped: commands against it would only fail
        click.echo(
            "\nThe private Redis is stopped. To look at what the demo leaves, run "
            "hubsync demo --keep (needs redis-server) and the redis-cli commands it prints."
        )
        return
    click.echo("\nLook at what it left:")
    events = keys.events_stream(HUB_PROJECT, demo_runtime_id(1))  # one runtime's stream
    commands = [
        f"XRANGE '{events}' - + COUNT 5",
        f"XINFO GROUPS '{events}'",
        f"XRANGE '{keys.alerts_stream(HUB_PROJECT)}' - +",
        f"XRANGE '{keys.dead_stream(HUB_PROJECT)}' - +",
    ]
    if "resource" in lease:
        resource = lease["resource"]
        commands += [f"HGETALL '{keys.lease(resource)}'",
                     f"XREVRANGE '{keys.lease_log(resource)}' + -"]  # fmt: skip
    for command in commands:
        click.echo(f"  redis-cli -u {url} {command}")
    if keep:
        # click, not rich: a command to copy is one line, however narrow the terminal
        hub_db = shlex.quote(str(result.workdir / "hub.db"))
        click.echo(f"  hubsync status --redis-url {url} --hub-db {hub_db}")
        click.echo(f"  files: {result.workdir}")
        click.echo(f"  stop Redis: redis-cli -u {url} shutdown nosave")
    if not private:
        click.echo(
            f"  (the demo's keys in that Redis are those with {{{HUB_PROJECT}}} in their name)"
        )
