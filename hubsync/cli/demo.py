"""``hubsync demo``: the whole pipeline end to end on an embedded Redis."""

from __future__ import annotations

import click

from hubsync.cli import exit_codes


@click.command()
def demo() -> None:
    """Run the pipeline end to end on a private Redis and print a summary."""
    click.echo(
        "hubsync demo: not ready yet; the pipeline it demonstrates is still being built. "
        "Run scripts/test.sh to see what works today.",
        err=True,
    )
    raise SystemExit(exit_codes.FAILURE)
