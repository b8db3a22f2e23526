"""``hubsync outbox``: this runtime's outbox (``outbox retry``: put parked rows back to pending
once the hub-side cause of their conflict or rejection is fixed)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from hubsync.cli.options import json_option, options_from
from hubsync.cli.paging import project_id_option, run_option
from hubsync.core.entries import Outcome
from hubsync.core.settings import RuntimeSettings


@click.group(
    epilog="""\b
Examples:
  hubsync outbox retry --state-dir /var/lib/hubsync/runtime --outcome conflict
"""
)
def outbox() -> None:
    """This runtime's outbox: put parked rows back to pending (retry)."""


@outbox.command(
    "retry",
    epilog="""\b
Examples:
  hubsync outbox retry --state-dir /var/lib/hubsync/runtime
  hubsync outbox retry --state-dir /var/lib/hubsync/runtime --project-id shop-48ee17a7 \\
      --run run-2026-0001 --outcome conflict --json
""",
)
@options_from(RuntimeSettings, only=["state_dir"])
@project_id_option
@run_option
@click.option(
    "--outcome",
    type=click.Choice([o.value for o in (Outcome.CONFLICT, Outcome.REJECTED)]),
    help="Only rows parked with this outcome [default: both] (no environment variable).",
)
@json_option
def retry(
    state_dir: Path, project_id: str | None, run_id: str | None, outcome: str | None, as_json: bool
) -> None:
    """Put parked outbox rows back to pending, once the hub-side cause is fixed.

    A row the hub answered conflict or rejected is parked and never sent again
    by itself. This clears its outcome and makes it due for a resend now: the
    relay sends it on its next pass and the hub judges it afresh. Prints what
    was re-queued, per project and run. A parked row whose bytes hold a secret
    known now (a secret-named environment variable's value, a credential
    format) stays parked and is listed as refused. A row parked because its
    ids hold a secret (secret_in_id) is never re-queued.
    """
    from producers.registry import RuntimeRegistry

    wanted = None if outcome is None else Outcome(outcome)
    now = time.time()
    results: list[dict[str, object]] = []
    with RuntimeRegistry(state_dir, create=False) as registry:
        projects = registry.projects()
        if project_id is not None:
            projects = [p for p in projects if p.project_id == project_id]
            if not projects:
                raise click.BadParameter(
                    f"no project {project_id} is registered in {registry.state_dir}",
                    param_hint="--project-id",
                )
        for project in projects:
            if not project.store_path.exists():
                continue  # nothing appended: nothing parked
            with registry.open_store(project) as store:
                counts = store.retry_parked(now, run_id=run_id, outcome=wanted)
            for run in sorted({*counts.requeued, *counts.refused}):
                results.append(
                    {
                        "project_id": project.project_id,
                        "run_id": run,
                        "requeued": counts.requeued[run],
                        "refused": counts.refused[run],
                    }
                )
    _report(results, as_json)


def _report(results: list[dict[str, object]], as_json: bool) -> None:
    requeued = sum(int(str(r["requeued"])) for r in results)
    refused = sum(int(str(r["refused"])) for r in results)
    if as_json:
        document = {"requeued": requeued, "refused": refused, "runs": results}
        click.echo(json.dumps(document, sort_keys=True))
        return
    if not results:
        click.echo("no parked rows to retry")
        return
    for r in results:
        line = f"project {r['project_id']} run {r['run_id']}: {r['requeued']} re-queued"
        if r["refused"]:
            line += f", {r['refused']} refused (their bytes hold a secret)"
        click.echo(line)
    click.echo(f"{requeued} rows re-queued; the relay sends them on its next pass")
    if refused:
        click.echo(
            f"{refused} parked rows hold a secret and stay parked: they must never be sent",
            err=True,
        )
