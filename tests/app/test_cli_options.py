"""The command line as a whole: options generated from the settings, one variable per meaning,
one-line usage errors, lazy subcommands, and a relay that refuses a missing state dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import click
import pytest
from click.testing import CliRunner
from pydantic import Field, TypeAdapter
from pydantic_settings import BaseSettings, SettingsConfigDict

from hubsync.cli.main import COMMANDS, cli
from hubsync.cli.options import options_from
from hubsync.core.settings import RelaySettings
from hubsync.processes import child_environment
from tests.helpers.operator_support import error_lines, run_cli
from tests.helpers.support import REPO_ROOT


def every_command() -> list[tuple[str, click.Command]]:
    """Every leaf command as (path, command), all subcommands loaded."""
    found: list[tuple[str, click.Command]] = []
    with click.Context(cli) as ctx:
        for name in cli.list_commands(ctx):
            command = cli.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                found += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
            else:
                found.append((name, command))
    return found


class _ExampleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HUBSYNC_", extra="ignore", frozen=True)

    window_size: int = Field(default=7, ge=2, le=9, description="How many at once.")


@click.command()
@options_from(_ExampleSettings)
def _example(window_size: int) -> None:
    click.echo(f"window {window_size}")


def test_a_settings_field_becomes_flag_variable_help_default_and_bounds() -> None:
    runner = CliRunner()
    shown = runner.invoke(_example, ["--help"], env={"HUBSYNC_WINDOW_SIZE": None})
    assert "--window-size" in shown.output and "How many at once." in shown.output
    assert "HUBSYNC_WINDOW_SIZE" in shown.output and "default: 7" in shown.output
    assert runner.invoke(_example, [], env={"HUBSYNC_WINDOW_SIZE": None}).output == "window 7\n"
    assert runner.invoke(_example, [], env={"HUBSYNC_WINDOW_SIZE": "3"}).output == "window 3\n"
    assert runner.invoke(_example, ["--window-size", "4"]).output == "window 4\n"
    assert runner.invoke(_example, ["--window-size", "10"]).exit_code == 2  # le=9
    assert runner.invoke(_example, [], env={"HUBSYNC_WINDOW_SIZE": "1"}).exit_code == 2  # ge=2


def test_every_variable_has_one_meaning_across_commands() -> None:
    meaning: dict[str, tuple[str, str]] = {}
    for path, command in every_command():
        for param in command.params:
            for envvar in (
                param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
            ):
                if envvar is None:
                    continue
                assert isinstance(param, click.Option)
                seen = meaning.setdefault(envvar, (path, param.name or ""))
                assert seen[1] == param.name, f"{envvar}: {seen} and {path} {param.name}"
                if envvar.startswith("HUBSYNC_"):
                    assert envvar == "HUBSYNC_" + param.opts[0][2:].replace("-", "_").upper()
    # The variables that used to mean different things to different commands:
    assert "HUBSYNC_JSON" not in meaning
    assert meaning["HUBSYNC_BATCH_COUNT"][0] == "relay"
    assert meaning["HUBSYNC_NAME"][0] == "consume"
    assert meaning["HUBSYNC_HUB_PROJECT"][0] == "produce"


def test_one_shot_flags_read_no_variable_and_say_so() -> None:
    for path, command in every_command():
        for param in command.params:
            if isinstance(param, click.Option) and param.opts[0] in ("--json", "--once", "--check"):
                assert param.envvar is None, f"{path} {param.opts[0]}"
                assert "no environment variable" in (param.help or ""), f"{path} {param.opts[0]}"


def test_the_command_list_shows_each_commands_own_short_help_without_importing_it() -> None:
    with click.Context(cli) as ctx:
        for name, (_, short) in COMMANDS.items():
            command = cli.get_command(ctx, name)
            assert command is not None
            recorded = click.Command(name, help=short).get_short_help_str(1000)
            assert recorded == command.get_short_help_str(1000)


def test_importing_the_cli_and_asking_for_help_loads_no_subcommand_rich_demo_or_redis() -> None:
    probe = (
        "import sys, contextlib\n"
        "from hubsync.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('rich', 'redis')\n"
        "         or m.startswith(('hubsync.demo', 'hubsync.benchmarks', 'hubsync.cli.'))\n"
        "         and m not in ('hubsync.cli.main', 'hubsync.cli.exit_codes')]\n"
        "print('LOADED', sorted(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_environment(),
    )
    assert done.returncode == 0, done.stderr
    assert "relay" in done.stdout and "LOADED []" in done.stdout


def test_a_bad_log_level_is_one_line_naming_the_option_and_the_levels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run_cli(capsys, "relay", "--state-dir", str(tmp_path), "--log-level", "foo")
    assert result.code == 2
    assert result.out == ""
    [line] = result.err.splitlines()
    assert line.startswith("error: --log-level: ") and "'foo'" in line
    assert all(level in line.lower() for level in ("debug", "info", "warning", "error"))


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["relay"], "--state-dir"),
        (["relay", "--state-dir", "x", "--batch-count", "0"], "--batch-count"),
        (["consume", "--hub-db", "h.db", "--no-such-option"], "--no-such-option"),
        (["lease", "acquire", "res"], "--holder"),
        (["dead", "list"], "--hub-project"),
        (["status", "--stale-after", "soon"], "--stale-after"),
        (["produce", "--state-dir", "s", "--project-root", "p", "--runs", "0"], "--runs"),
    ],
)
def test_usage_errors_are_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    result = run_cli(capsys, *args)
    assert result.code == 2
    [line] = result.err.splitlines()
    assert line.startswith(f"error: {option}: "), line


def test_hub_db_and_hub_url_together_are_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    both = ("--hub-db", str(tmp_path / "h.db"), "--hub-url", "sqlite:///x.db")
    result = run_cli(capsys, "consume", "--once", *both)
    assert result.code == 2
    [line] = result.err.splitlines()
    assert "--hub-url" in line and "--hub-db" in line and "not both" in line


def test_the_relay_refuses_a_state_dir_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    typo = tmp_path / "typo"
    for extra in (["--once"], ["--check"]):
        nowhere = ("--redis-url", "redis://127.0.0.1:1/0")
        result = run_cli(capsys, "relay", "--state-dir", str(typo), *nowhere, *extra)
        assert result.code == 2, result.err
        [line] = result.err.splitlines()
        assert "not a hubsync state dir" in line and "hubsync runtime join" in line
        assert not typo.exists(), "a mistyped state dir must not become a new runtime"


def _seconds_fields() -> list[tuple[type[BaseSettings], str]]:
    from hubsync.core import settings

    classes = [
        c for c in vars(settings).values() if isinstance(c, type) and issubclass(c, BaseSettings)
    ]
    return sorted(
        {
            (c, name)
            for c in classes
            for name, field in c.model_fields.items()
            if "float" in str(field.annotation)
        },
        key=lambda pair: (pair[0].__name__, pair[1]),
    )


def test_every_setting_in_seconds_takes_the_one_duration_syntax() -> None:
    fields = _seconds_fields()
    assert len(fields) >= 11  # relay, consumer and daemon durations all found
    for settings_class, name in fields:
        field = settings_class.model_fields[name]
        as_declared = TypeAdapter(Annotated[field.annotation, *field.metadata])
        assert as_declared.validate_python("0.5s") == 0.5, (settings_class.__name__, name)
        assert as_declared.validate_python(1.5) == 1.5


def test_a_duration_reads_the_syntax_from_the_environment_too(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HUBSYNC_OUTBOX_RETENTION", "1h30m")
        patch.setenv("HUBSYNC_EVENT_RETENTION", "7d")
        settings = RelaySettings(state_dir=tmp_path)
    assert (settings.outbox_retention, settings.event_retention) == (5_400.0, 604_800.0)


def test_a_duration_option_reads_the_syntax_and_names_itself_when_malformed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "state"
    given = run_cli(
        capsys, "relay", "--state-dir", str(missing), "--outbox-retention", "7d", "--once"
    )
    assert "outbox-retention" not in given.err  # the value was taken; the state dir is refused
    bad = run_cli(
        capsys, "relay", "--state-dir", str(missing), "--outbox-retention", "7x", "--once"
    )
    assert bad.code == 2
    assert bad.err.strip() == (
        "error: --outbox-retention: '7x' is not a duration; use seconds or a number with "
        "s, m, h, d or w (90, 15m, 2h, 7d, 1h30m) (HUBSYNC_OUTBOX_RETENTION)"
    )
    shown = run_cli(capsys, "consume", "--help")
    assert "--reclaim-idle DURATION" in shown.out


@pytest.mark.parametrize("argv", [(), ("dead",), ("alerts",), ("lease",), ("hub",)])
def test_a_group_without_a_subcommand_prints_its_help_not_an_error_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    shown = run_cli(capsys, *argv)
    assert shown.code == 2  # no command ran
    assert shown.out.startswith(f"Usage: hubsync {' '.join(argv)}".rstrip())
    assert "Commands:" in shown.out and len(shown.out.splitlines()) >= 5
    assert not error_lines(shown.err)


def test_python_m_hubsync_works_beside_a_clone_named_hubsync(tmp_path: Path) -> None:
    # the folder that holds a clone: its hubsync/ is not the package, yet -m finds it first
    (tmp_path / "hubsync").symlink_to(REPO_ROOT, target_is_directory=True)
    env = child_environment()
    env.pop("PYTHONPATH", None)
    shown = subprocess.run(
        [sys.executable, "-m", "hubsync", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout.startswith("hubsync, version ")
