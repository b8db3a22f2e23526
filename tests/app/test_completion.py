"""Shell completion: ``_HUBSYNC_COMPLETE=<shell>_source hubsync`` prints the script docs/cli.md
tells each shell to load, and the completions it asks for name the lazily loaded subcommands and
their options."""

from __future__ import annotations

import pytest

from tests.helpers.operator_support import run_cli


def complete(capsys: pytest.CaptureFixture[str], line: str) -> list[str]:
    """What a Tab at the end of ``line`` offers in bash, as ``type,value`` lines."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    run = run_cli(
        capsys,
        env={
            "_HUBSYNC_COMPLETE": "bash_complete",
            "COMP_WORDS": line,
            "COMP_CWORD": str(cword),
        },
    )
    assert run.code == 0, run.err
    return run.out.splitlines()


@pytest.mark.parametrize(
    ("shell", "registers"),
    [
        ("bash", "complete -o nosort -F _hubsync_completion hubsync"),
        ("zsh", "#compdef hubsync"),
        ("fish", "complete --no-files --command hubsync"),
    ],
)
def test_each_shell_gets_a_completion_script_for_hubsync(
    capsys: pytest.CaptureFixture[str], shell: str, registers: str
) -> None:
    run = run_cli(capsys, env={"_HUBSYNC_COMPLETE": f"{shell}_source"})
    assert run.code == 0, run.err
    assert registers in run.out
    assert f"_HUBSYNC_COMPLETE={shell}_complete" in run.out  # what it calls back at a Tab


def test_a_tab_completes_subcommands_without_importing_them_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert complete(capsys, "hubsync de") == ["plain,dead", "plain,demo"]
    assert {"plain,list", "plain,replay", "plain,purge"} <= set(complete(capsys, "hubsync dead "))


def test_a_tab_completes_the_options_and_choices_of_a_lazily_loaded_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert complete(capsys, "hubsync demo --emb") == ["plain,--embedded"]
    assert complete(capsys, "hubsync demo --embedded f") == ["plain,fakeredis"]
