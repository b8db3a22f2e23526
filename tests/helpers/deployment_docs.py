"""The deployments the documentation gives, as the tests read and run them: docker-compose.yml's
services and its quick start, and the README's "A real deployment in six steps"."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hubsync.processes import child_environment, hubsync_command
from tests.helpers.support import REPO_ROOT

COMPOSE: dict[str, Any] = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
OURS = sorted(name for name in SERVICES if SERVICES[name].get("build") == ".")
"""The services running this repository's image."""
DAEMONS = sorted(name for name in OURS if SERVICES[name].get("restart") != "no")
"""Those that keep running (the rest are one-shot steps, such as the hub migration)."""
CONSUMERS = [name for name in OURS if SERVICES[name]["command"][:2] == ["hubsync", "consume"]]


def argv(value: Any) -> list[str]:
    """A compose command or healthcheck test as an argument list (exec form only)."""
    assert isinstance(value, list), f"use the exec (list) form, not a shell string: {value!r}"
    if value and value[0] in ("CMD", "CMD-SHELL"):
        assert value[0] == "CMD", "health checks run without a shell"
        value = value[1:]
    return [str(part) for part in value]


def quick_start(text: str, prefix: str) -> list[str]:
    """The ``docker compose ...`` commands of the first run of lines of ``text`` that start
    with ``prefix`` and hold one (continuations joined, trailing comments dropped)."""
    commands: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if not raw.startswith(prefix) or not raw[len(prefix) :].strip():
            if commands:
                break  # the end of the quick start's block
            continue
        line = f"{pending} {raw[len(prefix) :].strip()}".strip()
        if line.endswith("\\"):
            pending = line[:-1].strip()
            continue
        pending = ""
        if line.startswith("docker compose"):
            commands.append(" ".join(line.split("  #")[0].split()))
    return commands


COMPOSE_QUICK_START = quick_start((REPO_ROOT / "docker-compose.yml").read_text(), "#   ")
"""The sequence docker-compose.yml's header gives, one command per item."""


def compose_run_stages(command: str) -> list[tuple[str, list[str]]]:
    """``docker compose run [flags] SERVICE ARGV | ...`` as (service, argv) per stage."""
    stages = []
    for stage in command.split(" | "):
        words = stage.split()
        assert words[:3] == ["docker", "compose", "run"], stage
        rest = [w for w in words[3:] if w not in ("--rm", "-T", "--no-deps")]
        assert not rest[0].startswith("-"), (
            f"a docker compose run flag this test does not know: {stage}"
        )
        stages.append((rest[0], rest[1:]))
    return stages


def in_volume(arg: str, volumes: dict[str, str], root: Path) -> str:
    """``arg`` with a container path under a service's volume moved to a directory of ``root``."""
    for inside, volume in volumes.items():
        if arg == inside or arg.startswith(inside + "/"):
            return str(root / volume) + arg[len(inside) :]
    return arg


SECTION = (REPO_ROOT / "README.md").read_text().split("## A real deployment in six steps\n")[1]
SECTION = SECTION.split("\n## ")[0]


def readme_commands() -> list[str]:
    """The section's shell commands, in order: continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", SECTION, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #")[0].strip()
            if command and not command.startswith("#"):
                commands.append(" ".join(command.split()))
    return commands


def run_documented(
    args: list[str], environment: Mapping[str, str], stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """A documented ``hubsync ARGS`` as a real process with ``environment``; it must succeed."""
    assert args[0] == "hubsync", args
    done = subprocess.run(
        hubsync_command(*args[1:]),
        input=stdin,
        capture_output=True,
        text=True,
        env=child_environment(environment),
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done
