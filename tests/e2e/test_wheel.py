"""The package as a user gets it: ``python -m build`` makes the sdist and the wheel (the wheel
from the sdist), the wheel goes into a fresh virtual environment outside the checkout, and the
installed ``hubsync`` runs from there: every module imports, the Functions library's Lua is
all there, the commands answer, and the README's first command runs the demo.

A file of the packages (one git tracks, or would: not ignored) that the wheel leaves out (a
``.lua`` script, a template) fails here. The build starts from a copy of those files, as a
fresh clone has them. One environment is made per module, at the pins of constraints.txt (pip's
cache serves the downloads).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

from hubsync.core.version import __version__
from hubsync.processes import child_environment
from tests.helpers.support import REPO_ROOT

PACKAGES = ("hubsync", "producers", "consumers", "hubstore")
CONSTRAINTS = REPO_ROOT / "constraints.txt"


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment holding the wheel (no extras), and what was built."""

    sdist: Path
    wheel: Path
    venv: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def environment(self, path: str | None = None) -> dict[str, str]:
        """A child's environment in the venv: no checkout on PYTHONPATH; ``path``: its PATH."""
        env = child_environment({"VIRTUAL_ENV": str(self.venv)})
        env.pop("PYTHONPATH", None)
        env["PATH"] = path if path is not None else f"{self.bin}{os.pathsep}{env['PATH']}"
        return env

    def run(
        self, *args: str, path: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``ARGS`` (a program of the venv's bin/, named bare) from a directory outside the
        checkout."""
        program = self.bin / args[0] if (self.bin / args[0]).exists() else Path(args[0])
        env = self.environment(path) | (env or {})  # scrubbed: child_environment()'s
        return subprocess.run(
            [str(program), *args[1:]],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=env,
            timeout=180,
            check=False,
        )

    def pip_install(self, requirement: str) -> None:
        done = self.run(
            "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-c", str(CONSTRAINTS), requirement,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def checked(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"


def tracked_files(*under: str) -> list[str]:
    """The files of the checkout git tracks or would (not ignored), all or ``under`` these
    folders."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *under],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=child_environment(),
        check=True,
    ).stdout
    return [name for name in listed.split("\0") if name and (REPO_ROOT / name).exists()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("package")
    env = child_environment()
    env.pop("PYTHONPATH", None)
    # built from the tracked files alone, as a fresh clone has them: an egg-info an editable
    # install left in the checkout would add its own list of files to the sdist
    source = root / "source"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, source / name)
    dist = root / "dist"
    checked([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], env)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    venv = root / "venv"
    checked([sys.executable, "-m", "venv", str(venv)], env)
    work = root / "work"
    work.mkdir()
    ready = Installed(sdist, wheel, venv, work)
    ready.pip_install(str(wheel))
    yield ready
    shutil.rmtree(root, ignore_errors=True)  # a virtual environment is too big to keep around


def tracked_package_files() -> set[str]:
    """Every file of the packages (tracked or not ignored), as a path inside the wheel."""
    files = set(tracked_files(*PACKAGES))
    assert "hubstore/lua/lease_acquire.lua" in files
    return files


def test_the_wheel_and_the_sdist_carry_every_file_of_the_packages_and_the_license(
    installed: Installed,
) -> None:
    assert installed.wheel.name == f"hubsync-{__version__}-py3-none-any.whl"
    assert installed.sdist.name == f"hubsync-{__version__}.tar.gz"
    expected = tracked_package_files() | {f"{package}/py.typed" for package in PACKAGES}
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = set(wheel.namelist())
        licence = wheel.read(f"hubsync-{__version__}.dist-info/licenses/LICENSE").decode()
    assert expected - in_wheel == set(), "left out of the wheel"
    assert licence == (REPO_ROOT / "LICENSE").read_text()
    with tarfile.open(installed.sdist) as sdist:
        prefix = f"hubsync-{__version__}/"
        in_sdist = {name.removeprefix(prefix) for name in sdist.getnames()}
    assert expected | {"LICENSE", "README.md", "pyproject.toml"} <= in_sdist


def test_the_metadata_names_version_license_and_typing_and_fakeredis_only_for_the_demo(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        text = wheel.read(f"hubsync-{__version__}.dist-info/METADATA").decode()
    metadata = Parser().parsestr(text)
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    assert metadata["Author"]
    fakeredis = [r for r in metadata.get_all("Requires-Dist") if r.startswith("fakeredis")]
    assert fakeredis and all(
        re.search(r'extra == "(demo|test)"', requirement) for requirement in fakeredis
    ), fakeredis


def test_every_module_imports_from_the_install_and_the_functions_library_is_whole(
    installed: Installed,
) -> None:
    (site_packages,) = installed.venv.glob("lib/python*/site-packages")
    script = REPO_ROOT / "tests" / "helpers" / "import_every_module.py"
    done = installed.run("python", "-P", str(script), str(site_packages))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["failed"] == {}
    assert report["outside"] == []
    # without extras: only the PostgreSQL backend's driver modules, the NATS benchmark, the
    # dashboard's web application and the spans file exporter (the OpenTelemetry SDK) wait
    # for theirs; no module needs fakeredis
    assert set(report["optional"].values()) <= {
        "psycopg", "psycopg_pool", "nats", "starlette", "anyio", "jinja2", "uvicorn",
        "opentelemetry.sdk",
    }  # fmt: skip
    assert "hubsync.cli.dashboard" in report["imported"]  # says to install the web extra
    assert len(report["imported"]) > 150
    assert {"hubsync.cli.demo", "hubsync.demo.embedded_redis"} <= set(report["imported"])
    assert report["library_chars"] > 1000


def test_the_installed_command_answers_version_help_acl_and_completion(
    installed: Installed,
) -> None:
    version = installed.run("hubsync", "--version")
    assert version.returncode == 0 and version.stdout == f"hubsync, version {__version__}\n"
    shown = installed.run("hubsync", "--help")
    assert shown.returncode == 0 and "demo" in shown.stdout and "relay" in shown.stdout
    acl = installed.run("hubsync", "acl", "--operator")
    assert acl.returncode == 0, acl.stderr
    assert acl.stdout.startswith("ACL SETUSER")
    dashboard = installed.run("hubsync", "dashboard")  # the wheel alone has no web extra
    assert dashboard.returncode == 2 and "pip install 'hubsync[web]'" in dashboard.stderr
    assert len(dashboard.stderr.splitlines()) == 1, dashboard.stderr
    completion = installed.run("hubsync", env={"_HUBSYNC_COMPLETE": "bash_source"})
    assert "complete -o nosort -F _hubsync_completion hubsync" in completion.stdout


def readme_demo_command() -> tuple[str, list[str]]:
    """The README's first command: the extras its ``pip install`` names, and the command after
    the ``&&``."""
    readme = (REPO_ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert first is not None
    install, _, then = first.group(1).partition(" && ")
    words = shlex.split(install)
    assert words[:4] == ["python3", "-m", "pip", "install"] and "constraints.txt" in words
    target = words[-1]
    assert target.startswith(".["), f"the README installs this checkout: {target}"
    return target[1:], shlex.split(then)


def test_the_demo_needs_only_its_extra_the_readme_installs_on_a_machine_without_redis_server(
    installed: Installed,
) -> None:
    only_the_venv = str(installed.bin)  # no redis-server on this PATH
    # the wheel alone: one line saying what to install, exit 2, nothing started
    for args in (["hubsync", "demo"], ["hubsync", "demo", "--embedded", "fakeredis"]):
        refused = installed.run(*args, path=only_the_venv)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert "pip install 'hubsync[demo]'" in refused.stderr
    extras, demo = readme_demo_command()
    assert extras == "[demo]" and demo == ["hubsync", "demo"]
    installed.pip_install(f"{installed.wheel}{extras}")
    done = installed.run(*demo, "--json", path=only_the_venv)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["ok"] is True and summary["events_in_hub"] == summary["events_produced"] > 0
